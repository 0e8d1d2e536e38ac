/**
 * Translates a JavaScript regular expression (the source grep compiles with `new RegExp(pattern, flags)`, no `u`
 * flag) into a Rust-regex pattern for ripgrep that matches a SUPERSET of the lines the JS pattern matches.
 * grep then re-tests every line ripgrep reports with the JS RegExp, so the final result is exactly the JS
 * semantics while ripgrep does the walking and the scanning.
 *
 * Why a superset rather than an exact translation: JS (without `u`) sees UTF-16 code units, Rust sees code
 * points, so an atom that matches "any one character" (`.`, `[^…]`, `\D`, `\W`, `\S`) can consume half of an
 * astral character in JS. Each such atom becomes optional in Rust (`(?:A)?`), which can only widen the match set.
 * `\d`, `\w`, `\s`, `\b` get their ASCII/JS definitions spelled out, since Rust's are Unicode-aware.
 *
 * Returns null when the pattern uses what Rust's regex cannot express (lookaround, backreferences, `\n`, astral
 * literals, `[^]`, `[]`, set differences inside classes); grep then uses its JS engine for the whole search.
 */

// LF is left out: lines never contain it, and ripgrep refuses patterns that could match it.
const JS_SPACE =
  "\\t\\x0B\\x0C\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
const LINE_TERMINATORS = "\\n\\r\\x{2028}\\x{2029}";

function hex(code: number): string {
  return `\\x{${code.toString(16).toUpperCase()}}`;
}

function isSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdfff;
}

/** A literal character, escaped for use outside a class. */
function literal(code: number): string | null {
  if (isSurrogate(code)) return null;
  if (code === 0x0a) return null; // a line never contains LF: ripgrep refuses such patterns
  const ch = String.fromCharCode(code);
  if (/[0-9A-Za-z_]/.test(ch)) return ch;
  if (code < 0x20 || code === 0x7f || code > 0x7e) return hex(code);
  return "\\.+*?()|[]{}^$#&-~".includes(ch) ? `\\${ch}` : ch;
}

/** A literal character, escaped for use inside a class. */
function classLiteral(code: number): string | null {
  if (isSurrogate(code)) return null;
  const ch = String.fromCharCode(code);
  if (/[0-9A-Za-z_]/.test(ch)) return ch;
  if (code < 0x20 || code === 0x7f || code > 0x7e) return hex(code);
  return "\\[]-^&~".includes(ch) ? `\\${ch}` : ch;
}

interface Cursor {
  src: string;
  i: number;
}

/** Reads an escape after `\` (cursor on the char after the backslash). Returns the code of a single char, or null. */
function simpleEscapeCode(c: Cursor): number | null | "complex" {
  const ch = c.src[c.i]!;
  c.i++;
  switch (ch) {
    case "t":
      return 9;
    case "n":
      return 10;
    case "r":
      return 13;
    case "v":
      return 11;
    case "f":
      return 12;
    case "0":
      if (/[0-9]/.test(c.src[c.i] ?? "")) return null; // octal-ish legacy escapes
      return 0;
    case "x": {
      const m = /^[0-9a-fA-F]{2}/.exec(c.src.slice(c.i));
      if (!m) return "x".charCodeAt(0); // "\x" without digits is a literal x in non-u mode
      c.i += 2;
      return Number.parseInt(m[0], 16);
    }
    case "u": {
      const m = /^[0-9a-fA-F]{4}/.exec(c.src.slice(c.i));
      if (!m) return "u".charCodeAt(0);
      c.i += 4;
      return Number.parseInt(m[0], 16);
    }
    case "c": {
      const next = c.src[c.i] ?? "";
      if (/[A-Za-z]/.test(next)) {
        c.i++;
        return next.charCodeAt(0) % 32;
      }
      c.i--; // "\c" not followed by a letter is a literal backslash followed by c
      return "\\".charCodeAt(0);
    }
    default:
      if (/[1-9]/.test(ch) || ch === "k") return null; // backreferences
      if (/[dDwWsSbB]/.test(ch)) return "complex";
      return ch.charCodeAt(0); // identity escape
  }
}

/** Translates a class starting at `[` (cursor after it). Returns the Rust class and whether it is negated. */
function translateClass(c: Cursor): { text: string; negated: boolean } | null {
  let negated = false;
  if (c.src[c.i] === "^") {
    negated = true;
    c.i++;
  }
  const items: string[] = [];
  let first = true;
  for (;;) {
    if (c.i >= c.src.length) return null;
    const ch = c.src[c.i]!;
    if (ch === "]") {
      c.i++;
      break;
    }
    first = false;
    // one class atom
    let code: number | null;
    let text: string | null = null;
    if (ch === "\\") {
      c.i++;
      const next = c.src[c.i] ?? "";
      if (next === "d") {
        c.i++;
        text = "0-9";
        code = -1;
      } else if (next === "w") {
        c.i++;
        text = "0-9A-Za-z_";
        code = -1;
      } else if (next === "s") {
        c.i++;
        text = JS_SPACE;
        code = -1;
      } else if (next === "D" || next === "W" || next === "S") {
        return null;
      } else if (next === "b") {
        c.i++;
        code = 8;
      } else if (next === "B") {
        c.i++;
        code = "B".charCodeAt(0);
      } else if (/[1-9]/.test(next)) {
        return null; // octal escapes in classes
      } else if (next === "k") {
        c.i++;
        code = "k".charCodeAt(0);
      } else if (next === "-") {
        c.i++;
        code = "-".charCodeAt(0);
      } else {
        const r = simpleEscapeCode(c);
        if (r === null || r === "complex") return null;
        code = r;
      }
    } else {
      code = ch.charCodeAt(0);
      c.i++;
    }
    if (text !== null) {
      items.push(text);
      continue;
    }
    // a range?
    if (c.src[c.i] === "-" && c.src[c.i + 1] !== "]" && c.i + 1 < c.src.length) {
      c.i++;
      let hi: number;
      const hc = c.src[c.i]!;
      if (hc === "\\") {
        c.i++;
        const nx = c.src[c.i] ?? "";
        if (/[dDwWsS]/.test(nx)) return null;
        if (nx === "b") {
          c.i++;
          hi = 8;
        } else if (nx === "-") {
          c.i++;
          hi = 45;
        } else {
          const r = simpleEscapeCode(c);
          if (r === null || r === "complex") return null;
          hi = r;
        }
      } else {
        hi = hc.charCodeAt(0);
        c.i++;
      }
      if (code! > hi) return null;
      if (isSurrogate(code!) || isSurrogate(hi) || (code! < 0xd800 && hi > 0xdfff)) return null;
      const lo = classLiteral(code!);
      const up = classLiteral(hi);
      if (lo === null || up === null) return null;
      items.push(`${lo}-${up}`);
      continue;
    }
    const lit = classLiteral(code!);
    if (lit === null) return null;
    items.push(lit);
  }
  if (first) return null; // [] or [^]
  return { text: `[${negated ? "^" : ""}${items.join("")}${negated ? LINE_TERMINATORS : ""}]`, negated };
}

/**
 * Translates a JS pattern to a superset Rust regex for ripgrep, or null when it cannot. `ignoreCase` adds
 * `(?i)` (Rust's Unicode simple case folding is a superset of JS's non-`u` case-insensitive matching).
 */
export function translateJsRegexForRipgrep(pattern: string, ignoreCase: boolean): string | null {
  return translateJsRegex(pattern, ignoreCase)?.rust ?? null;
}

/** A JS pattern translated for ripgrep (see translateJsRegex). */
export interface RipgrepTranslation {
  /** The Rust pattern: it matches a superset of the lines the JS pattern matches. */
  rust: string;
  /**
   * True when the Rust pattern matches exactly the lines the JS pattern matches (no "any one character" atom, so no
   * UTF-16/code-point difference, and no case folding difference because `ignoreCase` is off), so ripgrep's lines
   * need no re-test.
   */
  exact: boolean;
  /**
   * True when no match of the pattern can contain a NUL character: exact, and no literal, escape or class bound is
   * NUL (the Rust text then never holds `\x{0}`). Such a pattern finds the same matches in a line whether or not
   * NUL bytes elsewhere in it are read as line breaks, which is what lets ripgrep's own binary detection stand in
   * for grep's probe (ripgrep-engine.ts).
   */
  nulFree: boolean;
}

/**
 * Like translateJsRegexForRipgrep, and says whether the translation is exact and whether the pattern can match a
 * NUL character (RipgrepTranslation).
 */
export function translateJsRegex(pattern: string, ignoreCase: boolean): RipgrepTranslation | null {
  let anyCharSeen = false;
  const c: Cursor = { src: pattern, i: 0 };
  const out: string[] = [];
  // The last emitted atom: its start index in `out` and whether it is an "any one char" atom.
  let lastAtom: { index: number; anyChar: boolean } | null = null;
  let depth = 0;
  const emitAtom = (text: string, anyChar: boolean) => {
    if (anyChar) anyCharSeen = true;
    lastAtom = { index: out.length, anyChar };
    out.push(text);
  };
  while (c.i < pattern.length) {
    const ch = pattern[c.i]!;
    switch (ch) {
      case "\\": {
        c.i++;
        const next = pattern[c.i] ?? "";
        if (next === "") return null;
        if (next === "d") {
          c.i++;
          emitAtom("[0-9]", false);
        } else if (next === "w") {
          c.i++;
          emitAtom("[0-9A-Za-z_]", false);
        } else if (next === "s") {
          c.i++;
          emitAtom(`[${JS_SPACE}]`, false);
        } else if (next === "D") {
          c.i++;
          emitAtom(`[^0-9${LINE_TERMINATORS}]`, true);
        } else if (next === "W") {
          c.i++;
          emitAtom(`[^0-9A-Za-z_${LINE_TERMINATORS}]`, true);
        } else if (next === "S") {
          c.i++;
          emitAtom(`[^${JS_SPACE}\\n]`, true);
        } else if (next === "b") {
          c.i++;
          out.push("(?-u:\\b)");
          lastAtom = null;
        } else if (next === "B") {
          c.i++;
          out.push("(?-u:\\B)");
          lastAtom = null;
        } else {
          const code = simpleEscapeCode(c);
          if (code === null || code === "complex") return null;
          const lit = literal(code);
          if (lit === null) return null;
          emitAtom(lit, false);
        }
        break;
      }
      case "[": {
        c.i++;
        const cls = translateClass(c);
        if (!cls) return null;
        emitAtom(cls.text, cls.negated);
        break;
      }
      case "(": {
        c.i++;
        if (pattern[c.i] === "?") {
          const rest = pattern.slice(c.i + 1);
          if (rest.startsWith(":")) {
            c.i += 2;
            out.push("(?:");
          } else if (/^<[A-Za-z_$][\w$]*>/.test(rest)) {
            c.i += 1 + rest.indexOf(">") + 1;
            out.push("(");
          } else {
            return null; // lookahead / lookbehind
          }
        } else {
          out.push("(");
        }
        depth++;
        lastAtom = null;
        break;
      }
      case ")": {
        c.i++;
        depth--;
        if (depth < 0) return null;
        // the group as a whole is the atom a following quantifier applies to; it needs no widening
        out.push(")");
        lastAtom = { index: out.length - 1, anyChar: false };
        break;
      }
      case "|":
        c.i++;
        out.push("|");
        lastAtom = null;
        break;
      case "^":
      case "$":
        c.i++;
        out.push(ch);
        lastAtom = null;
        break;
      case ".":
        c.i++;
        emitAtom(`[^${LINE_TERMINATORS}]`, true);
        break;
      case "*":
      case "+":
      case "?":
      case "{": {
        let quant: string | null = null;
        if (ch === "{") {
          const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(c.i));
          if (m) {
            if (Number(m[1]) > 1000 || (m[3] && Number(m[3]) > 1000)) return null;
            quant = m[0];
          }
        } else {
          quant = ch;
        }
        if (quant === null) {
          // a "{" that is not a quantifier is a literal in non-u mode
          c.i++;
          emitAtom("\\{", false);
          break;
        }
        if (!lastAtom) return null; // nothing to repeat (JS would have thrown; be safe)
        c.i += quant.length;
        let lazy = "";
        if (pattern[c.i] === "?") {
          lazy = "?";
          c.i++;
        }
        const atom = lastAtom as { index: number; anyChar: boolean };
        // "*" and "?" already admit any count; "+" and "{n,m}" must let each repetition consume nothing
        if (atom.anyChar && quant !== "*" && quant !== "?") out[atom.index] = `(?:(?:${out[atom.index]})?)`;
        out.push(quant + lazy);
        lastAtom = null;
        break;
      }
      case "}":
      case "]":
        c.i++;
        emitAtom(`\\${ch}`, false);
        break;
      default: {
        const code = pattern.charCodeAt(c.i);
        c.i++;
        const lit = literal(code);
        if (lit === null) return null;
        emitAtom(lit, false);
      }
    }
    // widen a bare any-char atom that no quantifier follows
    const next = pattern[c.i];
    const atom = lastAtom as { index: number; anyChar: boolean } | null;
    if (
      atom?.anyChar &&
      next !== "*" &&
      next !== "+" &&
      next !== "?" &&
      !(next === "{" && /^\{\d+(,\d*)?\}/.test(pattern.slice(c.i)))
    ) {
      out[atom.index] = `(?:${out[atom.index]})?`;
      lastAtom = { index: atom.index, anyChar: false };
    }
  }
  if (depth !== 0) return null;
  const rust = (ignoreCase ? "(?i)" : "") + out.join("");
  const exact = !anyCharSeen && !ignoreCase;
  return { rust, exact, nulFree: exact && !rust.includes("\\x{0}") };
}
