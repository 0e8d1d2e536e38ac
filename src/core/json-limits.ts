/**
 * Limits on JSON input, checked before any expensive work (parsing into objects, schema validation, settings
 * policy): total size, nesting depth, keys per object, items per array, string length and total values. A body
 * within the limits costs at most a few milliseconds of event-loop time to check, parse and validate; one beyond
 * them is refused after a linear scan of its text, without building it.
 *
 * Two entry points: {@link scanJsonText} for JSON text (HTTP bodies, arguments a model sent as a string) and
 * {@link checkValueLimits} for values a library caller passes directly (which may also hold things JSON cannot
 * carry: functions, symbols, BigInt, undefined inside arrays, cycles).
 */

/** The limits of one kind of input. Sizes in UTF-16 code units of the JSON text (≈ bytes for ASCII). */
export interface JsonLimits {
  /** Longest JSON text. */
  maxBytes: number;
  /** Deepest nesting of arrays and objects (a flat object is depth 1). */
  maxDepth: number;
  /** Most keys in one object. */
  maxKeys: number;
  /** Most items in one array. */
  maxItems: number;
  /** Longest string (key or value), in characters of the JSON text. */
  maxStringLength: number;
  /** Most values in total (objects, arrays, strings, numbers, literals). */
  maxValues: number;
}

/** Settings bodies: a few kilobytes of flags, numbers and short lists. */
export const SETTINGS_BODY_LIMITS: JsonLimits = {
  maxBytes: 64 * 1024,
  maxDepth: 8,
  maxKeys: 256,
  maxItems: 1000,
  maxStringLength: 16 * 1024,
  maxValues: 4000,
};

/** Tool arguments (HTTP execute bodies, model-sent argument strings, library calls): room for a file's content. */
export const TOOL_ARGUMENT_LIMITS: JsonLimits = {
  maxBytes: 2 * 1024 * 1024,
  maxDepth: 32,
  maxKeys: 1000,
  maxItems: 10_000,
  maxStringLength: 2 * 1024 * 1024,
  maxValues: 20_000,
};

/** Other JSON bodies of the HTTP API (chat messages, renames, decisions, tokens). */
export const DEFAULT_BODY_LIMITS: JsonLimits = {
  maxBytes: 1024 * 1024,
  maxDepth: 32,
  maxKeys: 1000,
  maxItems: 10_000,
  maxStringLength: 1024 * 1024,
  maxValues: 20_000,
};

/**
 * A limit an input broke: which one, its value, and a sentence saying what to send instead. `limit` "finiteNumber"
 * is not a size: a number too large for a double (`1e400`), which JSON.parse makes Infinity and JSON then writes as
 * null — a value silently replaced, so it is refused (`max` is then 0).
 */
export interface JsonLimitViolation {
  limit: keyof JsonLimits | "finiteNumber";
  max: number;
  message: string;
}

const describe = (limit: keyof JsonLimits, max: number, what: string): JsonLimitViolation => ({
  limit,
  max,
  message:
    limit === "maxDepth"
      ? `values nest deeper than ${max} levels (maxDepth); send a flatter value.`
      : `${what} exceeds the limit of ${max.toLocaleString("en-US")} (${limit}); send less.`,
});

/**
 * Scans JSON text for limit violations without parsing it into values: one pass over the characters, a stack of
 * open containers. Malformed text is not reported here (JSON.parse reports it next); the scan only guarantees that
 * text it accepts stays within the limits once parsed. Returns the first violation, or undefined.
 */
export function scanJsonText(text: string, limits: JsonLimits): JsonLimitViolation | undefined {
  if (text.length > limits.maxBytes) return describe("maxBytes", limits.maxBytes, `The JSON text (${text.length})`);
  // Per open container: 1 = object, 2 = array; and its element count so far.
  const kinds: number[] = [];
  const counts: number[] = [];
  let values = 0;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const ch = text.charCodeAt(i);
    if (ch === 0x22 /* " */) {
      const start = i;
      // Jump from quote to quote (indexOf is far faster than a loop over the characters); a quote preceded by an
      // odd number of backslashes is escaped and does not end the string.
      i = start;
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i === -1) {
          i = n;
          break;
        }
        let backslashes = 0;
        while (text.charCodeAt(i - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      if (i - start - 1 > limits.maxStringLength)
        return describe("maxStringLength", limits.maxStringLength, "A string");
      i++;
      continue;
    }
    if (ch === 0x7b /* { */ || ch === 0x5b /* [ */) {
      kinds.push(ch === 0x7b ? 1 : 2);
      counts.push(0);
      if (kinds.length > limits.maxDepth) return describe("maxDepth", limits.maxDepth, "The nesting depth");
    } else if (ch === 0x7d /* } */ || ch === 0x5d /* ] */) {
      kinds.pop();
      counts.pop();
    } else if (ch === 0x2c /* , */ || ch === 0x3a /* : */) {
      // Counted below, at the value or key that follows.
    } else if (ch === 0x20 || ch === 0x0a || ch === 0x0d || ch === 0x09) {
      i++;
      continue;
    } else if ((ch >= 0x30 && ch <= 0x39) || ch === 0x2d /* - */) {
      // A number: only one with an exponent or more digits than a double holds can overflow to Infinity.
      let end = i + 1;
      let exponent = false;
      for (; end < n; end++) {
        const c = text.charCodeAt(end);
        if (c === 0x65 || c === 0x45) exponent = true;
        else if (!((c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2b || c === 0x2d)) break;
      }
      if ((exponent || end - i > 300) && Math.abs(Number(text.slice(i, end))) === Number.POSITIVE_INFINITY) {
        const number = text.slice(i, Math.min(end, i + 24));
        return {
          limit: "finiteNumber",
          max: 0,
          message: `the number ${number}${end - i > 24 ? "…" : ""} is too large for a double (JSON would carry it as null); send a smaller number, or a string.`,
        };
      }
      i = end;
      continue;
    }
    // A value (or an object key) starts here when the previous significant character opened a container, or was a
    // comma or colon; counting commas per container is enough for the per-container limits.
    if (ch === 0x2c && counts.length > 0) {
      const top = counts.length - 1;
      const count = (counts[top] ?? 0) + 1;
      counts[top] = count;
      if (kinds[top] === 1 && count + 1 > limits.maxKeys)
        return describe("maxKeys", limits.maxKeys, "The number of keys in one object");
      if (kinds[top] === 2 && count + 1 > limits.maxItems)
        return describe("maxItems", limits.maxItems, "The number of items in one array");
    }
    if (ch === 0x2c || ch === 0x3a || ch === 0x7b || ch === 0x5b) {
      if (++values > limits.maxValues) return describe("maxValues", limits.maxValues, "The number of values");
    }
    i++;
  }
  return undefined;
}

/**
 * Checks a value a caller passed directly against the limits and against what JSON can carry. Walks iteratively
 * and stops at the first violation, so a huge or cyclic value costs at most `maxValues` steps. Returns the first
 * problem as a sentence with a path (e.g. `arguments.options.filter`), or undefined.
 */
export function checkValueLimits(value: unknown, limits: JsonLimits, root = "arguments"): string | undefined {
  if (value !== null && typeof value === "object" && checkedJson.get(value) === limits) return undefined;
  // Most values are small and fine: a walk that only counts answers them; the walk below (which names the path of
  // the first problem) runs only for a value the quick one does not pass.
  const budget: QuickBudget = { values: limits.maxValues, seen: undefined };
  if (quickWithin(value, limits, 0, budget)) return undefined;
  // Paths are built only for the node that breaks a limit: each entry keeps its parent entry and its key.
  type Entry = { node: unknown; parent: Entry | undefined; key: string | number; depth: number };
  const pathOf = (entry: Entry): string => {
    const parts: string[] = [];
    for (let e: Entry | undefined = entry; e?.parent; e = e.parent) {
      const key = e.key;
      parts.push(typeof key === "number" ? `[${key}]` : `.${key.length > 40 ? `${key.slice(0, 37)}...` : key}`);
    }
    return root + parts.reverse().join("");
  };
  const stack: Entry[] = [{ node: value, parent: undefined, key: root, depth: 0 }];
  const seen = new Set<object>();
  let values = 0;
  while (stack.length > 0) {
    const entry = stack.pop()!;
    const { node, depth } = entry;
    if (++values > limits.maxValues) return describe("maxValues", limits.maxValues, "The number of values").message;
    switch (typeof node) {
      case "string":
        if (node.length > limits.maxStringLength)
          return `${pathOf(entry)}: ${describe("maxStringLength", limits.maxStringLength, "The string").message}`;
        continue;
      case "number":
        if (!Number.isFinite(node))
          return `${pathOf(entry)} is ${node}, which JSON cannot carry; send a finite number.`;
        continue;
      case "boolean":
        continue;
      case "bigint":
        return `${pathOf(entry)} is a BigInt, which JSON cannot carry; send a number or a string.`;
      case "function":
        return `${pathOf(entry)} is a function, which JSON cannot carry; send data only.`;
      case "symbol":
        return `${pathOf(entry)} is a symbol, which JSON cannot carry; send a string.`;
      case "undefined":
        // Absent object keys are fine (JSON drops them); an undefined array item is not.
        if (typeof entry.key === "number")
          return `${pathOf(entry)} is undefined, which JSON cannot carry in an array; send null.`;
        continue;
    }
    if (node === null) continue;
    const object = node as object;
    if (seen.has(object)) return `${pathOf(entry)} refers back to itself (a cycle), which JSON cannot carry.`;
    seen.add(object);
    if (depth + 1 > limits.maxDepth)
      return `${pathOf(entry)}: ${describe("maxDepth", limits.maxDepth, "The nesting depth").message}`;
    if (Array.isArray(object)) {
      if (object.length > limits.maxItems)
        return `${pathOf(entry)}: ${describe("maxItems", limits.maxItems, "The number of items").message}`;
      for (let k = object.length - 1; k >= 0; k--)
        stack.push({ node: object[k], parent: entry, key: k, depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(object);
    if (keys.length > limits.maxKeys)
      return `${pathOf(entry)}: ${describe("maxKeys", limits.maxKeys, "The number of keys").message}`;
    for (const key of keys) {
      if (key.length > limits.maxStringLength)
        return `${pathOf(entry)}: ${describe("maxStringLength", limits.maxStringLength, "A key").message}`;
      stack.push({ node: (object as Record<string, unknown>)[key], parent: entry, key, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * Whether `value` is JSON data within `limits`, by a recursive walk that allocates nothing for a flat object
 * (`budget.values` counts down the values left; `budget.seen` holds the nested containers met, made when the first
 * one is). False for anything it does not pass — a broken limit, something JSON cannot carry, a container met twice
 * — and for values past a few hundred nodes, which the full walk checks instead.
 */
function quickWithin(value: unknown, limits: JsonLimits, depth: number, budget: QuickBudget): boolean {
  if (--budget.values < 0) return false;
  switch (typeof value) {
    case "string":
      return value.length <= limits.maxStringLength;
    case "number":
      return Number.isFinite(value);
    case "boolean":
      return true;
    case "object":
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (depth + 1 > limits.maxDepth || limits.maxValues - budget.values > QUICK_MAX_VALUES) return false;
  if (depth > 0) {
    budget.seen ??= new Set();
    if (budget.seen.has(value)) return false;
    budget.seen.add(value);
  }
  if (Array.isArray(value)) {
    if (value.length > limits.maxItems) return false;
    for (let k = 0; k < value.length; k++) {
      const item = value[k];
      if (item === undefined || !quickWithin(item, limits, depth + 1, budget)) return false;
    }
    return true;
  }
  const keys = Object.keys(value);
  if (keys.length > limits.maxKeys) return false;
  for (const key of keys) {
    if (key.length > limits.maxStringLength) return false;
    const item = (value as Record<string, unknown>)[key];
    // An absent (undefined) key counts as a value, as in the full walk, and is fine.
    if (item === undefined ? --budget.values < 0 : !quickWithin(item, limits, depth + 1, budget)) return false;
  }
  return true;
}

interface QuickBudget {
  values: number;
  seen: Set<object> | undefined;
}

/** Most values {@link quickWithin} walks before leaving a value to the full check. */
const QUICK_MAX_VALUES = 512;

/** Values parsed from JSON text that {@link scanJsonText} accepted, with the limits it checked them against. */
const checkedJson = new WeakMap<object, JsonLimits>();

/**
 * Records that `value` was parsed (JSON.parse) from text that passed {@link scanJsonText} with `limits` — or is a
 * part of such a value — so {@link checkValueLimits} with the same limits need not walk it again: parsed JSON
 * holds only JSON data and stays within the limits its text passed. Returns `value`.
 */
export function markCheckedJson<T>(value: T, limits: JsonLimits): T {
  if (value !== null && typeof value === "object") checkedJson.set(value, limits);
  return value;
}

/** Matches a lone UTF-16 surrogate (a pair is one code point in `u` mode, so only halves match). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Whether `text` holds a lone UTF-16 surrogate: `!text.isWellFormed()` (a builtin several times faster than the
 * LONE_SURROGATE scan on two-byte text), or the scan where the runtime lacks it.
 */
export function hasLoneSurrogate(text: string): boolean {
  const isWellFormed = (text as { isWellFormed?: () => boolean }).isWellFormed;
  return isWellFormed ? !isWellFormed.call(text) : LONE_SURROGATE.test(text);
}

/** A `\uD800`–`\uDFFF` escape in JSON text: it may decode to a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** What {@link unstorableText} found: where, and what. */
export interface UnstorableText {
  /** The path of the string (`root.a[2]`), or of the object holding the key (`root.a (a key)`: the key itself is not quoted). */
  path: string;
  /** "a lone UTF-16 surrogate (half of a character)" or "a NUL character (\u0000)". */
  problem: string;
}

const LONE = "a lone UTF-16 surrogate (half of a character)";
const NUL = "a NUL character (\\u0000)";

/**
 * Where a value decoded from JSON (or passed by a library caller) holds text that cannot be written as it is: a lone
 * UTF-16 surrogate — half a character, which UTF-8 cannot carry, so a file, a process argument or a database would
 * silently get U+FFFD instead — and, with `nul`, a NUL character, which PostgreSQL's text columns refuse. Returns the
 * first string or key that holds one, or undefined. `text`, the JSON text the value was decoded from, answers most
 * values without a walk: without such a character or its escape in it, none can be in the value. Walks
 * iteratively, at most as many nodes as the value has (its limits were checked before).
 */
export function unstorableText(
  value: unknown,
  root: string,
  text?: string,
  options: { nul?: boolean } = {},
): UnstorableText | undefined {
  const nul = options.nul === true;
  if (
    text !== undefined &&
    !hasLoneSurrogate(text) &&
    !SURROGATE_ESCAPE.test(text) &&
    !(nul && (text.includes("\\u0000") || text.includes("\0")))
  ) {
    return undefined;
  }
  const problemOf = (s: string) => (hasLoneSurrogate(s) ? LONE : nul && s.includes("\0") ? NUL : undefined);
  const stack: { node: unknown; path: string }[] = [{ node: value, path: root }];
  while (stack.length > 0) {
    const { node, path } = stack.pop()!;
    if (typeof node === "string") {
      const problem = problemOf(node);
      if (problem) return { path, problem };
    } else if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) stack.push({ node: node[i], path: `${path}[${i}]` });
    } else if (node !== null && typeof node === "object") {
      const entries = Object.entries(node as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        const problem = problemOf(key);
        if (problem) return { path: `${path} (a key)`, problem };
        stack.push({ node: child, path: `${path}.${key}` });
      }
    }
  }
  return undefined;
}
