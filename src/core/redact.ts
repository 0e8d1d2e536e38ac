/**
 * Redaction of secrets before arguments and settings reach the audit log or an approval preview: values under
 * secret-looking keys (api keys, tokens, passwords, `Authorization`, cookies), bearer and basic credentials,
 * well-known key formats (Toolhost tokens, OpenAI/Anthropic/Google keys, GitHub and Slack tokens, AWS access keys),
 * private key blocks and passwords in URLs are replaced by "[redacted]".
 */

/** What replaces a secret. */
export const REDACTED = "[redacted]";

const SECRET_KEY_PARTS = [
  "password",
  "passwd",
  "passphrase",
  "secret",
  "token",
  "apikey",
  "authorization",
  "cookie",
  "credential",
  "privatekey",
  "sessionid",
];

/** Whether a key names a secret (`apiKey`, `api_key`, `Authorization`, `accessToken`, `password`, …). */
export function isSecretKey(key: string): boolean {
  let known = secretKeys.get(key);
  if (known === undefined) {
    const k = key.toLowerCase().replace(/[-_\s]/g, "");
    known = k === "auth" || k === "pass" || k === "pwd" || SECRET_KEY_PARTS.some((part) => k.includes(part));
    // Argument and setting names repeat from call to call: remember the answer for short ones (a bounded number).
    if (key.length <= 64) {
      if (secretKeys.size >= 4096) secretKeys.clear();
      secretKeys.set(key, known);
    }
  }
  return known;
}

/** isSecretKey's answers by key. */
const secretKeys = new Map<string, boolean>();

const SECRET_PATTERNS: RegExp[] = [
  /\b(authorization|proxy-authorization)(\s*[:=]\s*)("?)[^"'\n]+/gi,
  /\b(bearer|basic|token)(\s+)()[A-Za-z0-9._~+/=-]{8,}/gi,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /\b(th_[A-Za-z0-9_-]{20,}|sk-(ant-)?[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b/g,
  /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:)([^\s@/]+)(@)/gi,
  /(--?(?:password|passwd|token|api-key|apikey|secret)[= ])(\S+)/gi,
  /\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY)[A-Z0-9_]*=)(\S+)/g,
];

/**
 * Matches somewhere in every text any of SECRET_PATTERNS matches (each pattern needs one of these words or marks,
 * in any case): text without one is returned as it is, with one scan instead of one per pattern.
 */
const MAYBE_SECRET =
  /authorization|bearer|basic|token|secret|passw|api[-_]?key|-----begin|th_|sk-|aiza|gh[pousr]_|github_pat_|xox[abposr]-|akia|:\/\//i;

/** Redacts secrets inside one string (see the module comment). */
export function redactText(text: string): string {
  // Every pattern needs at least three characters ("th_", "sk-", "://" are the shortest).
  if (text.length < 3 || !MAYBE_SECRET.test(text)) return text;
  let out = text;
  out = out.replace(
    SECRET_PATTERNS[0]!,
    (_m, name: string, sep: string, quote: string) => `${name}${sep}${quote}${REDACTED}`,
  );
  out = out.replace(SECRET_PATTERNS[1]!, (_m, scheme: string, space: string) => `${scheme}${space}${REDACTED}`);
  out = out.replace(SECRET_PATTERNS[2]!, REDACTED);
  out = out.replace(SECRET_PATTERNS[3]!, REDACTED);
  out = out.replace(SECRET_PATTERNS[4]!, (_m, head: string, _pw: string, at: string) => `${head}${REDACTED}${at}`);
  out = out.replace(SECRET_PATTERNS[5]!, (_m, flag: string) => `${flag}${REDACTED}`);
  out = out.replace(SECRET_PATTERNS[6]!, (_m, name: string) => `${name}${REDACTED}`);
  return out;
}

/**
 * A deep copy of `value` with secrets redacted: values under secret-looking keys entirely, secrets inside strings
 * by pattern. Cycles and depth past 32 become "[…]".
 */
export function redactValue(value: unknown, depth = 0): unknown {
  if (depth > 32) return "[…]";
  if (typeof value === "string") return redactText(value);
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      out[key] =
        isSecretKey(key) && ((typeof v === "string" && v !== "") || (typeof v === "object" && v !== null))
          ? REDACTED
          : redactValue(v, depth + 1);
    }
    return out;
  }
  return value;
}

/** What {@link redactBounded} keeps of a value. Lengths in characters. */
export interface RedactionBounds {
  /** Longest string kept; a longer one keeps its start and says how much was cut. */
  maxString: number;
  /** Most items kept of an array (then one item saying how many more there were). */
  maxItems: number;
  /** Most keys kept of an object (then a key `…` saying how many more there were). */
  maxKeys: number;
  /** Characters of strings and keys kept in all; past it, strings become "[…]" and containers stop. */
  maxTotal: number;
}

/** What an audit line keeps of a call's arguments: enough to see what was asked, never megabytes. */
export const AUDIT_ARGUMENT_BOUNDS: RedactionBounds = {
  maxString: 2048,
  maxItems: 100,
  maxKeys: 100,
  maxTotal: 32 * 1024,
};

/**
 * Like {@link redactValue}, but a bounded copy: strings, arrays, objects and the whole are cut to `bounds`, with
 * notes saying what was cut, so the cost and size stay small whatever the input (a 2 MiB argument is read only as
 * far as it is kept). A string is redacted on a window a little past the cut, so a secret crossing the cut is
 * still recognized and redacted whole.
 */
export function redactBounded(value: unknown, bounds: RedactionBounds = AUDIT_ARGUMENT_BOUNDS): unknown {
  return boundedCopy(value, 0, { bounds, budget: bounds.maxTotal });
}

/** The walk of {@link redactBounded}: `state.budget` is what is left of bounds.maxTotal. */
function boundedCopy(v: unknown, depth: number, state: { bounds: RedactionBounds; budget: number }): unknown {
  if (depth > 32) return "[…]";
  const { bounds } = state;
  if (typeof v === "string") {
    if (state.budget <= 0) return "[…]";
    const keep = Math.min(bounds.maxString, state.budget);
    if (v.length <= keep) {
      state.budget -= v.length;
      return redactText(v);
    }
    state.budget -= keep;
    return `${redactText(v.slice(0, keep + 256)).slice(0, keep)}… [${v.length - keep} more characters]`;
  }
  if (Array.isArray(v)) {
    const out: unknown[] = [];
    for (let i = 0; i < v.length; i++) {
      if (i >= bounds.maxItems || state.budget <= 0) {
        out.push(`[${v.length - i} more items]`);
        break;
      }
      out.push(boundedCopy(v[i], depth + 1, state));
    }
    return out;
  }
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    const keys = Object.keys(v);
    for (let i = 0; i < keys.length; i++) {
      if (i >= bounds.maxKeys || state.budget <= 0) {
        out["…"] = `${keys.length - i} more keys`;
        break;
      }
      const key = keys[i]!;
      const item = (v as Record<string, unknown>)[key];
      state.budget -= Math.min(key.length, 256);
      out[key.length > 256 ? `${key.slice(0, 256)}…` : key] =
        isSecretKey(key) && ((typeof item === "string" && item !== "") || (typeof item === "object" && item !== null))
          ? REDACTED
          : boundedCopy(item, depth + 1, state);
    }
    return out;
  }
  return v;
}

/**
 * A redacted JSON preview of `value` at most `maxBytes` long (UTF-8): cut with a note when longer. Strings that
 * hold JSON (raw model arguments) are decoded first. Only a bounded part of a huge value is read.
 */
export function redactedPreview(value: unknown, maxBytes = 4096): string {
  let decoded = value;
  if (typeof value === "string") {
    try {
      decoded = JSON.parse(value);
    } catch {
      decoded = value;
    }
  }
  const bounds = { maxString: maxBytes, maxItems: 200, maxKeys: 200, maxTotal: maxBytes * 2 };
  const text = JSON.stringify(redactBounded(decoded, bounds), null, 2) ?? "null";
  if (Buffer.byteLength(text, "utf8") <= maxBytes) return text;
  const note = "\n… [preview cut]";
  let cut = text.slice(0, maxBytes - note.length);
  while (Buffer.byteLength(cut, "utf8") > maxBytes - note.length) cut = cut.slice(0, -16);
  return `${cut}${note}`;
}
