import type { ToolError, ToolRefusal } from "./errors.js";

/**
 * Core types of the tool runtime: ToolDefinition, RegisteredTool, ToolSettingsMetadata, the parameter descriptors,
 * effective settings and the per-call ToolContext every executor receives.
 */

/** A JSON Schema object (draft 2020-12 subset). Source schemas stay plain; provider dialects are derived. */
export type JsonSchema = {
  type?: string | string[];
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema | JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  additionalProperties?: boolean | JsonSchema;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  allOf?: JsonSchema[];
  not?: JsonSchema;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  definitions?: Record<string, JsonSchema>;
  [keyword: string]: unknown;
};

/** What a model is told about a tool: its name, what it does, and the JSON Schema of its arguments. */
export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema for the tool's arguments; always `type: "object"` at the top. */
  parameters: JsonSchema;
}

/** Where a tool is listed in settings UIs (ToolSettingsMetadata.category). */
export type ToolCategory = "system" | "image" | "interaction";

/** The value types a stored tool setting may have. */
export type ToolParameterType = "string" | "integer" | "number" | "boolean" | "string[]" | "object[]";

/**
 * Declares one user-adjustable setting of a tool (e.g. `timeoutSeconds`): the one place its type, default, range
 * and unit are written. The settings policy validates changes against it, tools read it leniently at call time
 * (`integerSetting(params, descriptor)` and friends in settings-declaration.ts), and the docs and the settings page
 * are generated from it. `min`/`max` bound numbers (inclusive) and, for `string[]`, the list length.
 */
export interface ToolParameterDescriptor {
  name: string;
  type: ToolParameterType;
  description: string;
  min?: number;
  max?: number;
  /** For `string` settings: the only values accepted. */
  allowedValues?: readonly string[];
  /**
   * For `string` settings the longest value, for `string[]` settings the longest entry, in characters. `max` bounds
   * a list's number of entries. Registration gives lists (and strings) the caps in `LIST_SETTING_CAPS` when a tool
   * declares none, so no user can store unbounded lists that every call parses again.
   */
  maxLength?: number;
  /**
   * The default value. `ToolSettingsMetadata.defaultParameters` is derived from it at registration; a tool reading
   * the setting with a typed reader must declare one.
   */
  default?: unknown;
  /** Unit shown to people (e.g. "seconds", "bytes"). */
  unit?: string;
  /**
   * Extra rule for values that pass the type and range checks (e.g. "must be an IANA timezone"): returns a
   * description of the violated rule, or undefined when the value is fine. Not serialized to API clients.
   */
  validate?: (value: unknown) => string | undefined;
  /**
   * Only an admin may change this setting (it widens what the tool can reach: allowedPaths, restrictPaths,
   * allowedHosts, command allowlists). A non-admin's change is refused with access_denied.
   */
  adminOnly?: boolean;
  /**
   * For `object[]` settings: the fields of each entry, each described like a setting of its own (type, allowed
   * values, default, validate). An entry is an object holding these keys only; a field without a `default` is
   * required. `min`/`max` of the list bound its length. Renders as a table with one row per entry.
   */
  fields?: ToolParameterDescriptor[];
}

/**
 * Settings metadata of a registered tool (ToolSettingsMetadata), complete as the registry stores it. Authors
 * write a ToolSettingsDeclaration (every field optional); `defaultParameters` is derived from the descriptors.
 */
export interface ToolSettingsMetadata {
  title: string;
  description: string;
  category: ToolCategory;
  enabledByDefault: boolean;
  canDisable: boolean;
  defaultParameters: Record<string, unknown>;
  parameterDescriptors: ToolParameterDescriptor[];
  /**
   * Only an admin may enable this tool for a user (tools that amount to a shell on the server). A non-admin may
   * still disable it.
   */
  enablingRequiresAdmin?: boolean;
  /**
   * Hints about the tool's behaviour for clients and people (the MCP tool annotations). Absent hints are derived
   * by deriveToolAnnotations (core/tool-annotations.ts): not read-only, destructive when not
   * read-only, not idempotent, open-world only when declared. Hints are not security: policy never trusts them.
   */
  annotations?: ToolAnnotationHints;
  /**
   * Set on tools imported from an external MCP server (src/mcp/client): which server and tool they come from,
   * whether an admin marked the server trusted, and a stable hash of the tool's name, description and schema so a
   * changed tool voids approvals given to the old one. Absent on built-in and host-registered tools.
   */
  external?: ExternalToolOrigin;
}

/** Behaviour hints of a tool (the MCP `ToolAnnotations` fields; all optional). */
export interface ToolAnnotationHints {
  /** The tool does not modify its environment. */
  readOnlyHint?: boolean;
  /** When not read-only: the tool may perform destructive updates (delete, overwrite) rather than only add. */
  destructiveHint?: boolean;
  /** When not read-only: calling it again with the same arguments has no additional effect. */
  idempotentHint?: boolean;
  /** The tool interacts with an open world of external entities (the web, other services). */
  openWorldHint?: boolean;
}

/** Where an imported tool comes from (see ToolSettingsMetadata.external). */
export interface ExternalToolOrigin {
  kind: "mcp";
  /** The configured server name (the key under `mcpServers`). */
  server: string;
  /** The tool's name on that server (before prefixing and sanitizing). */
  tool: string;
  /** An admin marked the server trusted: its tools default to approval `allow` instead of `ask`. */
  trusted: boolean;
  /** sha256 (hex) of the tool's name, description and input schema as the server announced them. */
  contentHash: string;
}

/** A user's settings for one tool after merging defaults < saved < overrides. */
export interface EffectiveToolSettings {
  enabled: boolean;
  /**
   * The user's value of each of the tool's settings, by setting name (defaults filled in): what a tool reads with
   * `integerSetting(context.settings.values, DESCRIPTOR)` and its siblings. Stored and sent over HTTP as
   * `parameters`.
   */
  values: Record<string, unknown>;
}

/** A user's stored settings for one tool, as they sit in `user_tool_settings`. Either part may be absent. */
export interface SavedToolSettings {
  enabled?: boolean | null;
  parameters?: Record<string, unknown> | null;
  /**
   * Keys an admin set for this user ("enabled" and parameter names): only an admin may change them again, so a
   * user cannot lift a restriction (a denied path, a disabled tool) that an admin imposed.
   */
  locked?: string[] | null;
}

/** A progress event a tool emits while it runs (e.g. one generated image); streamed to chats as-is. */
export interface ToolProgressEvent {
  /** Short kind, e.g. "image_generated", "image_failed", "output". */
  kind: string;
  message?: string;
  data?: Record<string, unknown>;
}

/**
 * Per-chat record of which file contents the chat has seen (path → sha256), used by write_file and apply_patch
 * to refuse overwriting a file the model has not read or that changed since it read it.
 */
export interface FreshnessLedger {
  /** Records that `chatId` saw `absolutePath` with content hash `sha256` (hex). */
  recordRead(chatId: string, absolutePath: string, sha256: string): Promise<void>;
  /** The hash recorded for that chat and path, or undefined when the chat never read it. */
  getRead(chatId: string, absolutePath: string): Promise<string | undefined>;
  /** Stores reads recorded so far, where the ledger stores them later (optional; called before it closes). */
  flush?(): Promise<void>;
}

/** One entry of the security audit log (shell executions and other sensitive actions). */
export interface AuditEntry {
  userId: string;
  chatId: string | null;
  tool: string;
  /** The argv (shell_exec) or command string (bash/zsh/powershell). */
  command: string | string[];
  cwd: string | null;
  exitCode: number | null;
  termination: string;
  durationMs: number;
  /** Whether the command ran inside the sandbox (shell tools set it; undefined when not known). */
  sandboxed?: boolean;
}

/**
 * One line of the audit of everything: a tool call (every tool, on every surface) or a settings change. Secrets
 * in arguments and values are redacted before they get here (core/redact.ts).
 */
export type AuditEvent =
  | {
      kind: "tool_call";
      /** Whose call it was. */
      userId: string;
      chatId: string | null;
      tool: string;
      /** The call's arguments, redacted. */
      arguments: unknown;
      /** The working directory the call ran in (the tool's cwd when it reported one, else the bound directory). */
      cwd: string | null;
      outcome: "ok" | "error" | "denied";
      errorCode: string | null;
      durationMs: number;
      /** The approval decision: allow (the policy allowed it), allow_once, allow_always, deny, expired. */
      approval: string | null;
      /** Who decided: "policy", or the user / surface that answered the ask. */
      approvedBy: string | null;
      /** What the tool itself recorded (shell: command, exit code, termination, sandboxed). */
      toolEntry?: AuditEntry;
    }
  | {
      kind: "settings_change";
      /** Whose settings changed. */
      userId: string;
      /** Who changed them (a user id, or `cli:<os user>`). */
      actor: string;
      tool: string;
      /** Before and after; `locked`: the keys admins locked for the user (a lock or an unlock alone is a change). */
      old: { enabled: boolean | null; parameters: Record<string, unknown>; locked?: string[] };
      new: { enabled: boolean | null; parameters: Record<string, unknown>; locked?: string[] };
    };

/** Where audit entries go (the database in the server and CLI; memory in tests). */
export interface AuditSink {
  /** A tool's own entry (shell executions); the runtime folds it into the call's event when it can. */
  record(entry: AuditEntry): Promise<void>;
  /** Records a tool call or settings change; sinks without it receive only the tools' own entries. */
  recordEvent?(event: AuditEvent): Promise<void>;
}

/** Minimal structured logger (pino-compatible subset). */
export interface Logger {
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
}

/**
 * What an executor receives with its arguments.
 *
 * `workingDirectory` is the chat's bound directory (absolute), or null when none is bound; tools then fall back to
 * `process.cwd()`. `signal` aborts on the caller's cancel and on the tool's time budget; `signal.reason` is a
 * ToolTimeoutError or ToolAbortedError so a tool can tell them apart. The runtime's contexts make the signal when a
 * tool first reads it (an accessor of the context's class): pass the context itself on, or name the members a copy
 * needs — a spread copy (`{ ...context }`) has no `signal`.
 */
export interface ToolContext {
  userId: string;
  chatId: string | null;
  workingDirectory: string | null;
  signal: AbortSignal;
  /** This tool's effective settings for this user (defaults < saved). */
  settings: EffectiveToolSettings;
  /** Data directory of this Toolhost instance (images and other artefacts are stored beneath it). */
  dataDir: string;
  ledger: FreshnessLedger;
  audit: AuditSink;
  logger: Logger;
  /** Streams a progress event to whoever runs the tool (chat SSE, CLI spinner). */
  emitProgress(event: ToolProgressEvent): void;
  /** Extension point for services a tool needs from the host (e.g. a model runner for sub-agents). */
  services: Record<string, unknown>;
  /**
   * Paths no tool may touch whatever the settings say: Toolhost's data directory (its database holds every user's
   * chats) and its own installed code. Refused like a deniedPaths entry (same message, `details.rule` "deniedPaths"), so a refusal does not reveal where Toolhost keeps its files. Absent: none.
   */
  protectedPaths?: readonly string[];
  /**
   * Whether, with no working directory bound, path-taking tools fall back to the process working directory (the
   * rule for a single local user). The HTTP service turns it off for non-admin users, whose calls
   * then reach only directories an admin granted (allowedPaths). Absent: true.
   */
  processCwdFallback?: boolean;
  /**
   * This call's own spill directory (the user's and chat's): the one place inside the data directory that reading
   * tools may open (see path-policy.ts), so a model can read the full output of a cut result. Absent: none.
   */
  spillDirectory?: string;
  /**
   * The local file holding spill `name` (`spill:<id>`, the only name users and models see for a spill) of this
   * call's user and chat, fetched from the shared store when needed; undefined when there is no such spill for them
   * (missing, expired, another user's or another chat's: all alike). Reading tools resolve `spill:` paths through it
   * (path-policy.ts). Absent when the host has no spill area.
   */
  openSpill?: (name: string) => Promise<string | undefined>;
  /**
   * Streams the full, uncut content of a top-level string field of the result (e.g. "stdout") to the spill area
   * while the tool produces it, so a result the tool itself caps can still point at every byte. Absent when the
   * host has no spill area.
   */
  captureFullOutput?: (field: string) => FullOutputSink;
  /**
   * The approval gate's decision that let this call run (see ToolCallContext.approval); absent when no gate ran
   * (library use, `toolhost call`, the tool-execute route): then no one could have been asked.
   */
  approval?: { decision: string; decidedBy: string };
  /**
   * The provider's id of this call when a model made it (absent for direct calls): a tool that must not repeat its
   * effect when a turn is resumed on another instance keys it by this id (agent_spawn).
   */
  toolCallId?: string;
}

/** Receives the full content of one result field as it is produced (see ToolContext.captureFullOutput). */
export interface FullOutputSink {
  /** Appends bytes; never throws. */
  write(chunk: Buffer): void;
}

/**
 * A tool in the registry (RegisteredTool).
 *
 * `execute` receives arguments already parsed against `definition.parameters` (nulls removed, defaults applied)
 * and returns any JSON-serializable value; it throws a ToolError subclass to report a classified failure.
 */
export interface RegisteredTool {
  definition: ToolDefinition;
  /** Settings-aware definition (e.g. hide a parameter the user's settings forbid). */
  buildDefinition?: (settings: EffectiveToolSettings) => ToolDefinition;
  settings: ToolSettingsMetadata;
  execute: (args: unknown, context: ToolContext) => Promise<unknown>;
  /**
   * JSON Schema of the result, for tools whose result is always a JSON object of a known shape. Announced to MCP
   * clients as the tool's `outputSchema` (they validate the structured result against it), so declare only what
   * every successful result satisfies.
   */
  outputSchema?: JsonSchema;
  /**
   * True when the tool enforces its own time budget (shell tools kill their process group on their own timer).
   * executeTool then only adds a backstop a few seconds past the tool's budget instead of racing it.
   */
  managesOwnTimeout?: boolean;
  /**
   * The time budget in milliseconds for one call, given its parsed arguments and settings; overrides the
   * `timeoutSeconds` setting lookup (shell_exec's `timeout` argument is in milliseconds).
   */
  timeoutMs?: (args: Record<string, unknown>, settings: EffectiveToolSettings) => number;
  /**
   * How the runtime cuts an oversized result (see core/result-cap.ts): "head" (default) keeps the beginning,
   * "head_tail" keeps about 20% head and 80% tail of text fields (shell output, whose error is at the end).
   */
  outputCapStyle?: "head" | "head_tail";
  /**
   * For a tool whose result is one page of a larger source (read_file: lines of a file): when the output cap cuts
   * the page's text, the rest is read from the source rather than spilled, as the tool's notice says.
   */
  resultPaging?: ResultPaging;
  /** For a tool that can read a spill file (the full output of a cut result): how the model reads one with it. */
  spillReader?: SpillReader;
  /**
   * Argument checks beyond the schema that need neither the network nor the filesystem (e.g. web_fetch: the URL is
   * absolute, http(s), without credentials). Returns (cheapest: bad arguments are ordinary traffic; a ToolRefusal
   * costs least) or throws the classified ToolError the call would end with; returns undefined when they pass. `settings` are the
   * call's effective settings (for checks that depend on them). The runtime runs it after the schema check, both
   * before a call runs and when the approval gate inspects a call, so an argument the tool would refuse anyway is
   * refused before anyone is asked about it (and no approval is stored), and before the call gets a time budget,
   * a context or a signal.
   */
  validateArguments?: (
    args: Record<string, unknown>,
    settings: EffectiveToolSettings,
  ) => ToolError | ToolRefusal | undefined;
  /**
   * The tool's own say in the approval decision for one call, consulted by the approval gate before the call runs
   * together with the user's approval settings (the strictest wins). E.g. a shell tool whose sandbox is
   * `preferred` but unavailable answers `ask` so the command never runs unconfined without a person's consent.
   * Returns undefined when the tool has nothing to add.
   */
  approvalHint?: (
    args: Record<string, unknown>,
    context: ToolContext,
  ) => Promise<ApprovalHint | undefined> | ApprovalHint | undefined;
  /**
   * Why the tool cannot work on this host as configured (e.g. no API key for any image provider), in words that
   * say what to set; undefined when it can. A tool with a reason is not offered to models even when enabled
   * (getEnabledToolRuntime skips it) and its settings descriptor shows the reason. `services` are the host's
   * services (ToolRuntime `services`). Must be cheap and must not throw.
   */
  unavailableReason?: (services: Record<string, unknown>) => string | undefined;
  /**
   * How the approval policy treats this tool: its default decision and what its argument rules match (see
   * ToolApprovalProfile). Each built-in declares its own; tools imported from MCP servers and
   * custom tools declare it here. Absent: allow by default (ask when enabling requires an admin), no argument rules.
   */
  approval?: ToolApprovalProfile;
}

/** A decision of the approval policy for one call: run it, ask a person first, or refuse it. */
export type ApprovalDecision = "allow" | "ask" | "deny";

/**
 * What a tool's argument rules match against:
 * - `shell`: a command line in `argument`, parsed as `dialect` and matched per command (prefix rules such as
 *   `git status`); `argv`: an argument vector in `argument` (shell_exec).
 * - `path`: the paths in `arguments`, and the further paths a call names (`namedPaths`: read by the tool's own parser,
 *   so the rules see every file it would touch; or, with `patchArgument`, the files a patch's headers name), matched
 *   by globs resolved like the tool resolves paths (absolute, `~`-prefixed, or relative to the working directory).
 * - `host`: the host of the URL in `argument`, matched by host patterns (`example.com`, `*.example.com`).
 */
export type ApprovalSubject =
  | { kind: "shell"; argument: string; dialect: "bash" | "zsh" | "powershell" | "argv" }
  | {
      kind: "path";
      arguments: string[];
      patchArgument?: string;
      /** The further paths of a call as the tool reads them; undefined when it cannot tell (then `patchArgument`). */
      namedPaths?: (args: Record<string, unknown>) => string[] | undefined;
    }
  | { kind: "host"; argument: string };

/** A tool's place in the approval policy (RegisteredTool.approval). */
export interface ToolApprovalProfile {
  /** The `approval` setting's default for this tool. */
  default: ApprovalDecision;
  /** What argument rules match; absent: the tool has no `approvalRules` setting. */
  subject?: ApprovalSubject;
  /**
   * Path arguments the path policy decides before anyone is asked about a call, besides a path subject's: the
   * argument's name, and the path the tool uses when it is absent (a shell's `cwd` defaults to "."). A call whose
   * path the policy refuses (outside the allowed directories, denied, no working directory) is refused at once.
   */
  checkedPaths?: { argument: string; default?: string }[];
}

/** A tool's own contribution to an approval decision (see RegisteredTool.approvalHint). */
export interface ApprovalHint {
  decision: "ask" | "deny";
  /** Why, in words shown to the person asked and, on deny, to the model. */
  reason: string;
}

/** How a paged result (see RegisteredTool.resultPaging) is cut: the field holding the page and the tool's notice. */
export interface ResultPaging {
  /** The text field that holds the page ("content"). */
  field: string;
  /**
   * The page cut to `kept` (the head of `result[field]` the cap keeps): `text` replaces the field (the kept part
   * and the tool's notice), `howToRead` tells how to read on, `fields` are set on the result beside it. Undefined
   * when this result cannot be continued from its source (the field is then cut and spilled as any other).
   */
  cut(
    kept: string,
    result: Record<string, unknown>,
  ): { text: string; howToRead: string; fields?: Record<string, unknown> } | undefined;
}

/** A spill file as a reader is asked about it: its name, its size and the line the model should read on from. */
export interface SpillFileRef {
  /** The spill's virtual name (`spill:<id>`). */
  path: string;
  /** 1-based line (or list entry) where the dropped part begins. */
  fromLine: number;
  totalLines: number;
  bytes: number;
}

/** A tool that reads spill files (see RegisteredTool.spillReader). */
export interface SpillReader {
  /** The tool's name. */
  tool: string;
  /** Lower is asked first: the first reader enabled for the user that can read the spill gives the hint. */
  rank: number;
  /** How to read `spill` with this tool; `readable: false` when it cannot (the text then says why and what helps). */
  howToRead(spill: SpillFileRef): { readable: boolean; text: string };
}
