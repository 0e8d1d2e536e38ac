/**
 * Classified tool errors. Each class carries a stable `code` that the model (and API clients) see; a tool failure
 * is a result fed back to the model, never a crashed loop.
 *
 * Identity survives two copies of the package (a plugin that bundles its own Toolhost): every error class carries
 * a brand, a global symbol (`Symbol.for("toolhost.error.<Name>")`), and every instance carries the brands of its
 * class chain. `instanceof` and the static `isInstance` check the brand, so an error thrown by one copy is
 * recognized by the classes of the other.
 */

const BRAND_PREFIX = "toolhost.error.";

/** The global symbol that brands the error class called `name` (e.g. `errorBrand("ToolArgumentError")`). */
export function errorBrand(name: string): symbol {
  return Symbol.for(`${BRAND_PREFIX}${name}`);
}

type AnyClass = abstract new (...args: any[]) => unknown;

/**
 * Base class of Toolhost's error classes: an Error whose identity is a brand rather than a prototype chain.
 *
 * A subclass declares its brand once, as `static override readonly brand = errorBrand("Name")`; each class's
 * prototype gets its brand (a non-enumerable symbol property, never serialized) when the class first constructs an
 * instance, so instances carry the brands of every class from theirs up to BrandedError. A
 * subclass that declares no brand of its own falls back to the ordinary prototype check for `instanceof`.
 */
export class BrandedError extends Error {
  /** This class's brand (a `Symbol.for` key, the same in every copy of the package). */
  static readonly brand: symbol = errorBrand("BrandedError");

  /** True when `value` carries this class's brand (an instance of it or a subclass, from any copy of Toolhost). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // `this` is the class on the right of `instanceof`, which may be any subclass.
    // biome-ignore lint/complexity/noThisInStatic: the receiver is the subclass being tested
    const cls = this as unknown as { brand: symbol };
    if (!Object.hasOwn(cls, "brand")) return Function.prototype[Symbol.hasInstance].call(cls, value);
    return hasBrand(value, cls.brand);
  }

  /** Type guard form of the brand check: `ToolError.isInstance(e)` narrows `e` to ToolError. */
  static isInstance<T extends AnyClass>(this: T, value: unknown): value is InstanceType<T> {
    // biome-ignore lint/complexity/noThisInStatic: the receiver is the subclass being tested
    return value instanceof (this as unknown as new () => unknown);
  }

  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    brandPrototypes(new.target);
  }
}

/**
 * What a surface (HTTP, MCP, CLI) shows of a classified error: any Toolhost error that carries a string `code` (and
 * optionally `details`). Surfaces map the code (the HTTP status table is in the server); undefined for anything
 * else, which is an unexpected failure.
 */
export function classifiedError(
  error: unknown,
): { code: string; message: string; details?: Record<string, unknown> } | undefined {
  if (!(error instanceof BrandedError)) return undefined;
  const { code, details } = error as { code?: unknown; details?: unknown };
  if (typeof code !== "string") return undefined;
  return details !== null && typeof details === "object"
    ? { code, message: error.message, details: details as Record<string, unknown> }
    : { code, message: error.message };
}

/** Marks prototypes whose class chain already carries its brands (set once per class, on first construction). */
const BRANDED = Symbol("toolhost.error.branded");

/**
 * Puts each class's brand on its own prototype, once per class: an instance then carries the brands of its whole
 * chain through the prototype chain, at no cost per construction (a defineProperty per brand per instance before).
 */
function brandPrototypes(target: unknown): void {
  const proto = (target as { prototype: object }).prototype;
  if (Object.hasOwn(proto, BRANDED)) return;
  for (let c: unknown = target; typeof c === "function" && c !== Error; c = Object.getPrototypeOf(c)) {
    const prototype = (c as { prototype: object }).prototype;
    if (Object.hasOwn(c, "brand")) {
      Object.defineProperty(prototype, (c as unknown as { brand: symbol }).brand, { value: true, enumerable: false });
    }
    Object.defineProperty(prototype, BRANDED, { value: true, enumerable: false });
  }
}

function hasBrand(value: unknown, brand: symbol): boolean {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[brand] === true;
}

/** The stable error codes a tool call can end with. */
export type ToolErrorCode =
  | "validation_failed"
  | "invalid_settings"
  | "access_denied"
  | "not_found"
  | "timeout"
  | "aborted"
  | "execution_failed"
  | "denied_by_user"
  | "denied_by_policy"
  | "limit_exceeded";

/** Serialized form of a classified error, as fed back to the model and returned by the API. */
export interface SerializedToolError {
  code: ToolErrorCode;
  message: string;
  /** Extra machine-readable facts (e.g. `{ parameter: "timeoutSeconds" }`); never secrets. */
  details?: Record<string, unknown>;
}

/** Base class of every classified tool error. */
export class ToolError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ToolError");
  readonly code: ToolErrorCode;
  readonly details?: Record<string, unknown>;

  constructor(code: ToolErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    // A refusal the caller can act on (bad argument, denied path, missing file…) is an answer, not a fault: its
    // stack trace would say nothing its message does not, and capturing one was the largest cost of refusing a
    // call. execution_failed keeps its stack (and any cause) for whoever debugs the failure.
    const stackTraceLimit = Error.stackTraceLimit;
    if (code !== "execution_failed") Error.stackTraceLimit = 0;
    try {
      super(message, options);
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    this.code = code;
    if (details !== undefined) this.details = details;
  }

  /** The JSON shape sent to models and API clients. */
  toJSON(): SerializedToolError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

/** What {@link withCode} returns: ToolError's statics, and a constructor `(message, details?)` making a ToolError. */
type FixedCodeErrorClass = Omit<typeof ToolError, "prototype"> & {
  new (message: string, details?: Record<string, unknown>): ToolError;
  readonly prototype: ToolError;
};

/**
 * The base of a ToolError subclass whose class fixes its code: its constructor is `(message, details?)`, and
 * the subclass states only its brand, e.g.
 * `class NotFoundError extends withCode("not_found") { static override readonly brand = errorBrand("NotFoundError"); }`.
 * The base has no brand of its own, so `instanceof` and the brands on an instance are the subclass's and ToolError's.
 */
function withCode(code: ToolErrorCode): FixedCodeErrorClass {
  return class extends ToolError {
    constructor(message: string, details?: Record<string, unknown>) {
      super(code, message, details);
    }
  };
}

/** A model-supplied argument is missing, of the wrong type, or out of range (code `validation_failed`). */
export class ToolArgumentError extends withCode("validation_failed") {
  static override readonly brand: symbol = errorBrand("ToolArgumentError");
}

/**
 * A refusal as plain data: the code, message and details of the ToolError a check would throw, made without
 * constructing an Error (which costs more than most argument checks, and bad arguments are ordinary traffic). The
 * runtime turns it into the call's outcome as it is (toJSON); {@link ToolRefusal.toError} makes the error to throw.
 */
export class ToolRefusal {
  code: ToolErrorCode;
  /** Mutable, as an Error's message is (a caller may add what to do next). */
  message: string;
  details?: Record<string, unknown>;

  constructor(code: ToolErrorCode, message: string, details?: Record<string, unknown>) {
    this.code = code;
    this.message = message;
    if (details !== undefined) this.details = details;
  }

  /** The JSON shape sent to models and API clients (the same as the ToolError's). */
  toJSON(): SerializedToolError {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }

  /** The classified error with this code, message and details (ToolArgumentError for validation_failed). */
  toError(): ToolError {
    switch (this.code) {
      case "validation_failed":
        return new ToolArgumentError(this.message, this.details);
      case "access_denied":
        return new AccessDeniedError(this.message, this.details);
      case "not_found":
        return new NotFoundError(this.message, this.details);
      default:
        return new ToolError(this.code, this.message, this.details);
    }
  }
}

/** A `validation_failed` {@link ToolRefusal} (what a ToolArgumentError with this message and details serializes to). */
export function argumentRefusal(message: string, details?: Record<string, unknown>): ToolRefusal {
  return new ToolRefusal("validation_failed", message, details);
}

/**
 * Settings are invalid (code `invalid_settings`): a value with an unknown name, of the wrong type, out of range or
 * disallowed (`details.parameter` names it), or an update refused as a whole, e.g. disabling a tool whose
 * `canDisable` is false. One class under two names: {@link ToolParameterError} is this class.
 */
export class ToolSettingsError extends withCode("invalid_settings") {
  static override readonly brand: symbol = errorBrand("ToolSettingsError");
}

/**
 * The name the settings policy's parameter checks use for {@link ToolSettingsError}: the same class
 * (`ToolParameterError === ToolSettingsError`), so `instanceof` either name catches every `invalid_settings` error.
 */
export const ToolParameterError = ToolSettingsError;
/** The type of {@link ToolParameterError} (the same as {@link ToolSettingsError}). */
export type ToolParameterError = ToolSettingsError;

/** Path policy, SSRF guard or allowlist refused the operation (code `access_denied`). */
export class AccessDeniedError extends withCode("access_denied") {
  static override readonly brand: symbol = errorBrand("AccessDeniedError");
}

/** The tool, file or other named thing does not exist (code `not_found`). */
export class NotFoundError extends withCode("not_found") {
  static override readonly brand: symbol = errorBrand("NotFoundError");
}

/** The tool exceeded its time budget (code `timeout`). */
export class ToolTimeoutError extends withCode("timeout") {
  static override readonly brand: symbol = errorBrand("ToolTimeoutError");
}

/** The caller cancelled the call (user cancel, stream teardown); never reported as a timeout (code `aborted`). */
export class ToolAbortedError extends withCode("aborted") {
  static override readonly brand: symbol = errorBrand("ToolAbortedError");
  constructor(message = "The tool call was cancelled by the caller.", details?: Record<string, unknown>) {
    super(message, details);
  }
}

/** The tool ran and failed (code `execution_failed`). */
export class ToolExecutionError extends ToolError {
  static override readonly brand: symbol = errorBrand("ToolExecutionError");
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super("execution_failed", message, details, options);
  }
}

/**
 * A person refused the call when asked, or nobody answered before the ask expired (code `denied_by_user`). The
 * message carries the person's words, so the model can act on them (try something else, ask the user).
 */
export class DeniedByUserError extends withCode("denied_by_user") {
  static override readonly brand: symbol = errorBrand("DeniedByUserError");
}

/**
 * The approval policy refused the call: a deny rule or setting, or an ask with no one to ask (code
 * `denied_by_policy`). The message names the rule.
 */
export class DeniedByPolicyError extends withCode("denied_by_policy") {
  static override readonly brand: symbol = errorBrand("DeniedByPolicyError");
}

/**
 * A bounded resource ran out: an agent depth, quota, cap, queue or rate limit (code `limit_exceeded`). `details`
 * names the limit (`limit`, e.g. "MAX_AGENT_DEPTH") and its value (`value`), so a caller can tell which one.
 */
export class LimitExceededError extends withCode("limit_exceeded") {
  static override readonly brand: symbol = errorBrand("LimitExceededError");
  constructor(message: string, details: { limit: string; value: number } & Record<string, unknown>) {
    super(message, details);
  }
}

/** How many characters of a caller's argument an error message quotes at most (see clip). */
export const QUOTE_MAX_CHARS = 100;

const CONTROL = /[\u0000-\u001f\u007f]/;
const CONTROL_ALL = /[\u0000-\u001f\u007f]/g;
const NAMED_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
function escapeControl(c: string): string {
  return NAMED_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/**
 * Shortens a caller-supplied string for quoting in an error message: at most `max` UTF-16 code units (default
 * QUOTE_MAX_CHARS), keeping the start and the end (for a path, its file name) around "…"; never splits a surrogate
 * pair. Control characters are then written as escapes (`\n`, `\t`, `\u0000`), so a quoted value stays on one line
 * and shows exactly what was sent.
 */
export function clip(value: string, max = QUOTE_MAX_CHARS): string {
  const shown = shorten(value, max);
  return CONTROL.test(shown) ? shown.replace(CONTROL_ALL, escapeControl) : shown;
}

/**
 * clip without the escapes: at most `max` UTF-16 code units, start and end kept around "…", surrogate pairs whole.
 * For text shown as it is (a file's lines) or quoted by JSON.stringify (see quote).
 */
export function shorten(value: string, max = QUOTE_MAX_CHARS): string {
  if (typeof value !== "string") return String(value);
  if (value.length <= max) return value;
  const tailLength = Math.floor((max - 1) * 0.3);
  let head = value.slice(0, max - 1 - tailLength);
  let tail = value.slice(value.length - tailLength);
  if (/[\uD800-\uDBFF]$/.test(head)) head = head.slice(0, -1);
  if (/^[\uDC00-\uDFFF]/.test(tail)) tail = tail.slice(1);
  return `${head}…${tail}`;
}

/** A caller's string as a JSON string literal of at most ~`max` characters of it: `JSON.stringify(shorten(value))`. */
export function quote(value: string, max = QUOTE_MAX_CHARS): string {
  return JSON.stringify(shorten(value, max));
}

/**
 * The message of a Node.js system or argument error without the paths it carries (`ENOTDIR: not a directory,
 * mkdir '/srv/x/y'` → `ENOTDIR: not a directory (mkdir)`): the server's absolute paths are never shown to a
 * caller who did not name them. Other messages are returned unchanged.
 */
export function messageWithoutPaths(error: Error): string {
  const e = error as NodeJS.ErrnoException;
  if (typeof e.code !== "string") return error.message;
  if (typeof e.syscall === "string") {
    const at = error.message.indexOf(`, ${e.syscall}`);
    const head = at >= 0 ? error.message.slice(0, at) : error.message.replace(/\s*'[^']*'(?:\s*->\s*'[^']*')?/g, "");
    return `${head} (${e.syscall})`;
  }
  if (e.code.startsWith("ERR_")) {
    const received = error.message.indexOf(". Received");
    return received >= 0 ? `${error.message.slice(0, received)}.` : error.message;
  }
  return error.message;
}

/**
 * Turns anything thrown into a classified error; unknown errors become `execution_failed` with their message.
 * System errors (errno codes) lose the paths in their message (messageWithoutPaths); ENOENT becomes `not_found`,
 * EACCES/EPERM `access_denied`, ENAMETOOLONG/ELOOP/ENOTDIR `validation_failed`.
 */
export function toToolError(error: unknown): ToolError {
  if (error instanceof ToolError) return error;
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message = messageWithoutPaths(error);
    if (code === "ENOENT") return new NotFoundError(message);
    if (code === "EACCES" || code === "EPERM") return new AccessDeniedError(message);
    if (code === "ENAMETOOLONG" || code === "ELOOP" || code === "ENOTDIR") {
      return new ToolArgumentError(
        `${message}: check the path arguments (names of at most 255 bytes, no link loops).`,
        {
          rule: code.toLowerCase(),
        },
      );
    }
    return new ToolExecutionError(message, undefined, { cause: error });
  }
  return new ToolExecutionError(String(error));
}
