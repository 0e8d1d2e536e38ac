/**
 * The property tests of the file tools' argument handling (run by test/fs/argument-fuzz-*.test.ts, split so the
 * suite's workers share them), through executeTool as a host calls it (settings store with deniedPaths saved, path
 * policy on, Toolhost's data directory and installation protected), on a small real tree with symbolic links
 * inside, out, dangling and looping.
 *
 * - Defective arguments (arbitraries.ts `defective`, drawn in batches of 50 per property run, each argument
 *   generated on its own): 20,000 per file tool by default (TOOLHOST_FUZZ_RUNS): every
 *   one is `validation_failed`, with a message under 700 characters that quotes at most ~100 characters of any
 *   argument and names no server path.
 * - Free arguments (`free`: real names, links, denied and protected paths, hostile text), which really execute:
 *   TOOLHOST_FUZZ_EXEC_RUNS per tool (default 300; grep 100 unless set, since each grep that searches starts a
 *   worker or ripgrep): no `execution_failed` except the tools' semantic refusals (read before write, stale read,
 *   hunk or anchor mismatch, hunks out of order, already exists), and the same message rules. A few hundred runs
 *   draw every family of the `free` arbitraries many times over (the rarest, weight 1 in 10, some 30 times at 300
 *   runs); the defective arguments, which must all be refused before any file is touched, carry the large count.
 *
 * Both properties fail on a thrown (rather than returned) error. The seed is fixed (TOOLHOST_FUZZ_SEED overrides
 * it; "random" draws one), so the suite is deterministic; a failure prints the seed and the shrunk arguments.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import type { ToolCallOutcome } from "../../../src/core/runtime.js";
import { defectiveBatch, free } from "./arbitraries.js";
import { createFuzzWorld, envCount, type FileTool, type FuzzWorld } from "./tree.js";

/**
 * 20,000 by default (it was 100,000: a fifth of the suite's in-process CPU for the same families of defects). Each
 * tool's defects are a choice of at most 10 kinds (arbitraries.ts `defects`), one or two per argument, each with a
 * handful of variants: 20,000 arguments draw every kind well over a thousand times and every variant hundreds of
 * times (the rarest, the 7 raw texts that are not a JSON object, ~90 times each). Set TOOLHOST_FUZZ_RUNS for a longer
 * hunt.
 */
const RUNS = envCount("TOOLHOST_FUZZ_RUNS", 20_000);
/** Defective arguments checked per property run (RUNS / BATCH runs; a failing batch shrinks to one argument). */
const BATCH = 50;
const EXEC_RUNS = envCount("TOOLHOST_FUZZ_EXEC_RUNS", 300);
const GREP_EXEC_RUNS = envCount("TOOLHOST_FUZZ_EXEC_RUNS", 100);
const seedSetting = process.env.TOOLHOST_FUZZ_SEED;
const SEED =
  seedSetting === "random"
    ? undefined
    : Number.isInteger(Number(seedSetting)) && seedSetting
      ? Number(seedSetting)
      : 20261201;

/** Refusals a tool gives on purpose as execution_failed: the call was fine, the state of the files says no. */
const SEMANTIC_RULES = new Set([
  "read_before_write",
  "stale_read",
  "hunk_mismatch",
  "hunk_order",
  "anchor_not_found",
  "exists",
]);

let world: FuzzWorld;

/** Every string in a value (keys included), for the quoting checks, appended to `out`. */
function stringsOf(value: unknown, out: string[] = []): string[] {
  if (typeof value === "string") out.push(value);
  else if (Array.isArray(value)) for (const v of value) stringsOf(v, out);
  else if (value && typeof value === "object") {
    for (const k of Object.keys(value)) {
      out.push(k);
      stringsOf((value as Record<string, unknown>)[k], out);
    }
  }
  return out;
}

/**
 * The message rules every refusal obeys; returns a description of the first broken one, or null. What the caller
 * sees is the message and every string (keys included) of the details, each checked as it is. The strings of the
 * arguments are gathered only when a check needs them: a quote of over 100 characters needs a shown string of at
 * least 101 and a sent one of over 120 (JSON text of at most 120 characters holds none), a server path must appear
 * in one, and a length refusal is checked against them.
 */
function messageProblem(outcome: ToolCallOutcome, args: unknown): string | null {
  if (outcome.ok) return null;
  const { message, details } = outcome.error;
  const limit = details?.rule === "hunk_mismatch" ? 20_000 : 700;
  if (message.length > limit) return `message of ${message.length} characters`;
  const shown = details === undefined ? [message] : stringsOf(details, [message]);
  let sentStrings: string[] | undefined;
  const sent = () => {
    sentStrings ??= stringsOf(typeof args === "string" ? safeParse(args) : args);
    return sentStrings;
  };
  const quotes = (piece: string) => {
    for (const text of shown) if (text.includes(piece)) return true;
    return false;
  };
  let longShown = false;
  for (const text of shown) {
    if (text.length >= 101) {
      longShown = true;
      break;
    }
  }
  if (longShown && (typeof args !== "string" || args.length > 120)) {
    for (const s of sent()) {
      if (s.length > 120 && (quotes(s.slice(0, 101)) || quotes(s.slice(-101)))) {
        return "quotes more than ~100 characters of an argument";
      }
    }
  }
  if (details?.rule === "path_too_long" || details?.rule === "name_too_long") {
    // The refusal must be earned: some argument has a name over 255 bytes or a path over 4,095 (also under `proj`).
    const long = (s: string) => {
      if (Buffer.byteLength(s) + world.proj.length + 1 > 4095) return true;
      // Each name between "/" (one of at most 85 units holds at most 255 bytes: only longer ones are measured).
      for (let start = 0; ; ) {
        const slash = s.indexOf("/", start);
        const end = slash === -1 ? s.length : slash;
        if (end - start > 85 && Buffer.byteLength(s.slice(start, end)) > 255) return true;
        if (slash === -1) return false;
        start = slash + 1;
      }
    };
    // UTF-8 takes at most 3 bytes per UTF-16 unit: a string of at most 85 units holds no name over 255 bytes, nor
    // (with the working directory in front) a path over 4,095.
    if (!sent().some((s) => s.length > 85 && (long(s) || (s.includes("\n") && s.split("\n").some(long)))))
      return `${details.rule} for arguments within the limits`;
  }
  for (const server of world.serverPaths) {
    if (quotes(server) && !sent().some((s) => s.includes(server))) return `names the server path ${server}`;
  }
  return null;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const summary = (outcome: ToolCallOutcome) =>
  outcome.ok ? "ok" : `${outcome.error.code} ${JSON.stringify(outcome.error.details ?? {})}: ${outcome.error.message}`;

/** Declares both properties for each of `tools`, on one fresh world. */
export function describeArgumentFuzz(tools: readonly FileTool[]): void {
  beforeAll(async () => {
    world = await createFuzzWorld();
  });
  afterAll(() => world?.cleanup());
  describe("file tool arguments (property)", () => {
    for (const tool of tools) declareProperties(tool);
  });
}

function declareProperties(tool: FileTool): void {
  const batch = Math.min(BATCH, RUNS);
  it(`${tool}: ${RUNS} defective arguments are all validation_failed with a short message`, async () => {
    await fc.assert(
      fc.asyncProperty(defectiveBatch(tool, batch), async (batchOfArgs) => {
        for (const args of batchOfArgs) {
          // executeTool never throws for a tool failure: a rejection here fails the property with the arguments.
          const outcome = await world.call(tool, args);
          // Plain checks in the hot loop (expect() costs more than the call under test); they throw with the outcome.
          if (outcome.ok || outcome.error.code !== "validation_failed")
            throw new Error(`not refused: ${summary(outcome)}`);
          const problem = messageProblem(outcome, args);
          if (problem) throw new Error(`${problem}: ${summary(outcome)}`);
        }
      }),
      { numRuns: Math.ceil(RUNS / batch), seed: SEED, endOnFailure: true },
    );
  }, 600_000);

  const execRuns = tool === "grep" ? GREP_EXEC_RUNS : EXEC_RUNS;
  it(`${tool}: ${execRuns} executed arguments end classified, never as an argument-handling execution_failed`, async () => {
    await fc.assert(
      fc.asyncProperty(free(tool), async (args) => {
        const outcome = await world.call(tool, args);
        if (!outcome.ok) {
          const { code, details } = outcome.error;
          const fine =
            code === "validation_failed" ||
            code === "not_found" ||
            code === "access_denied" ||
            (code === "execution_failed" && SEMANTIC_RULES.has(String(details?.rule)));
          if (!fine) throw new Error(`unclassified: ${summary(outcome)}`);
        }
        const problem = messageProblem(outcome, args);
        if (problem) throw new Error(`${problem}: ${summary(outcome)}`);
      }),
      { numRuns: execRuns, seed: SEED, endOnFailure: true },
    );
  }, 600_000);
}
