/**
 * Runs grep's JavaScript RegExp work in a worker thread, so a pattern that backtracks catastrophically on a
 * huge line (`(a|a)*b`, `.*x.*y` on a 600 KB minified line) can never block the event loop: when the call is
 * cancelled or runs out of time, the worker is terminated mid-match.
 *
 * The worker reads files itself (same cap, probe, decoding and line rules as text-probe.ts, whose pure functions
 * are shipped to it as source) and answers two requests: search these files, and verify ripgrep's candidate lines of these files
 * (plus the binary probe of each file with a verified line). It is started from a source string (`eval: true`), so it works from compiled output and from
 * TypeScript sources alike. A thread whose search ended cleanly is kept (up to two, for 30 s) and serves the next
 * search, which sends its own pattern and limits first; a cancelled or failed search's thread is terminated.
 */
import { Worker } from "node:worker_threads";
import { BINARY_PROBE_BYTES, detectBom, isBinaryHead, splitLines } from "../../core/text-probe.js";

/** What searching one file produced. */
export type WorkerFileOutcome =
  | { kind: "searched"; lines: { line: number; text: string }[]; more: boolean }
  | { kind: "binary" | "tooLarge" | "unreadable" | "denied" };

/**
 * Candidate lines of several files for verifyFiles, as bytes: file `f` (absolute real path `paths[f]`) has
 * `counts[f]` lines, consecutive in `bytes` (UTF-8, no line breaks); line `k` of the batch ends at byte `ends[k]`
 * and starts where the previous one ended. `bytes` is transferred to the worker (unusable here afterwards).
 */
export interface VerifyBatch {
  paths: string[];
  counts: number[];
  ends: number[];
  bytes: ArrayBuffer;
}

/** Limits and pattern of one grep call. */
export interface RegexWorkerOptions {
  pattern: string;
  flags: string;
  maxPerFile: number;
  maxFileSize: number;
  maxLineChars: number;
  /**
   * Identities (`device:inode`) of the denied and protected files that have other names (linkedDeniedFiles): a
   * file found to be one of them is not read (outcome "denied").
   */
  deniedFiles: string[];
}

const WORKER_SOURCE = `
"use strict";
const { parentPort } = require("node:worker_threads");
const fs = require("node:fs");
const BINARY_PROBE_BYTES = ${BINARY_PROBE_BYTES};
${detectBom.toString()}
${isBinaryHead.toString()}
${splitLines.toString()}
const decoders = {
  "utf-8": new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }),
  "utf-16le": new TextDecoder("utf-16le", { fatal: false, ignoreBOM: true }),
  "utf-16be": new TextDecoder("utf-16be", { fatal: false, ignoreBOM: true }),
};
// The search this worker serves now: set by a "configure" message, the first one of every search (a worker is
// reused by later searches once one has finished cleanly).
let maxPerFile, maxFileSize, maxLineChars, regex, pre, deniedFiles;
function configure(options) {
  ({ maxPerFile, maxFileSize, maxLineChars } = options);
  deniedFiles = new Set(options.deniedFiles);
  regex = new RegExp(options.pattern, options.flags);
  // A whole-text pre-test in multiline mode admits a superset of the matching lines, unless lookaround is used.
  pre = /\\(\\?<?[=!]/.test(options.pattern) ? null : new RegExp(options.pattern, options.flags + "m");
}
const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

function cut(line) {
  if (line.length <= maxLineChars) return line;
  regex.lastIndex = 0;
  const m = regex.exec(line);
  const at = m ? m.index : 0;
  const start = Math.max(0, Math.min(at - 100, line.length - maxLineChars));
  const end = Math.min(line.length, start + maxLineChars);
  return (start > 0 ? "[…" + start + " chars] " : "") + line.slice(start, end) + (end < line.length ? " […" + (line.length - end) + " chars]" : "");
}

function read(path) {
  let fd;
  try {
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    const info = fs.fstatSync(fd);
    if (!info.isFile()) return "unreadable";
    if (deniedFiles.size > 0 && info.nlink > 1) {
      // A hard link to a denied or protected file is that file.
      const exact = fs.fstatSync(fd, { bigint: true });
      if (deniedFiles.has(exact.dev + ":" + exact.ino)) return "denied";
    }
    if (info.size > maxFileSize) return "tooLarge";
    let buf = Buffer.allocUnsafe(Math.min(info.size + 1, maxFileSize + 1));
    let length = 0;
    for (;;) {
      if (length === buf.length) {
        if (length > maxFileSize) return "tooLarge";
        const grown = Buffer.allocUnsafe(Math.min(buf.length * 2 + 1, maxFileSize + 1));
        buf.copy(grown, 0, 0, length);
        buf = grown;
      }
      const n = fs.readSync(fd, buf, length, buf.length - length, null);
      if (n === 0) break;
      length += n;
      if (length > maxFileSize) return "tooLarge";
    }
    return buf.subarray(0, length);
  } catch {
    return "unreadable";
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function searchFile(path, binaryAsText) {
  const bytes = read(path);
  if (typeof bytes === "string") return { kind: bytes };
  if (!binaryAsText && isBinaryHead(bytes)) return { kind: "binary" };
  const bom = detectBom(bytes);
  const text = decoders[bom.encoding].decode(bytes.subarray(bom.bomLength));
  if (pre && !pre.test(text)) return { kind: "searched", lines: [], more: false };
  const lines = splitLines(text);
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    regex.lastIndex = 0;
    if (regex.test(lines[i])) {
      if (out.length >= maxPerFile) return { kind: "searched", lines: out, more: true };
      out.push({ line: i + 1, text: cut(lines[i]) });
    }
  }
  return { kind: "searched", lines: out, more: false };
}

parentPort.on("message", (msg) => {
  if (msg.type === "configure") {
    configure(msg.options);
  } else if (msg.type === "files") {
    parentPort.postMessage({ id: msg.id, results: msg.paths.map((path) => searchFile(path, msg.binaryAsText === true)) });
  } else {
    // verify: the lines arrive as UTF-8 bytes (one transferred buffer, each line ending at ends[k]), decoded here.
    const probe = Buffer.allocUnsafe(BINARY_PROBE_BYTES);
    const bytes = Buffer.from(msg.bytes);
    let line = 0;
    let start = 0;
    const results = msg.paths.map((path, f) => {
      const texts = [];
      for (let k = 0; k < msg.counts[f]; k++, line++) {
        const text = bytes.toString("utf8", start, msg.ends[line]);
        start = msg.ends[line];
        regex.lastIndex = 0;
        texts.push(regex.test(text) ? cut(text) : null);
      }
      let binary = false;
      if (texts.some((t) => t !== null)) {
        let fd;
        try {
          fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
          binary = isBinaryHead(probe.subarray(0, fs.readSync(fd, probe, 0, BINARY_PROBE_BYTES, 0)));
        } catch {
          binary = true;
        } finally {
          if (fd !== undefined) fs.closeSync(fd);
        }
      }
      return { binary, texts };
    });
    parentPort.postMessage({ id: msg.id, results });
  }
});
`;

/**
 * Threads that served a search to its end, kept for the next searches (starting a thread costs ~20–40 ms of CPU,
 * more than most searches): at most {@link MAX_IDLE_THREADS}, unreferenced (they never keep the process alive), and
 * ended after {@link IDLE_THREAD_MS} without use. A thread whose search was cancelled, failed or still had work
 * outstanding is terminated instead, never kept.
 */
const idleThreads: Worker[] = [];
const MAX_IDLE_THREADS = 2;
const IDLE_THREAD_MS = 30_000;
const idleTimers = new WeakMap<Worker, NodeJS.Timeout>();

function takeIdleThread(): Worker | undefined {
  const thread = idleThreads.pop();
  if (thread) clearTimeout(idleTimers.get(thread));
  return thread;
}

function keepIdleThread(thread: Worker): void {
  if (idleThreads.length >= MAX_IDLE_THREADS) {
    void thread.terminate();
    return;
  }
  idleThreads.push(thread);
  const timer = setTimeout(() => {
    const at = idleThreads.indexOf(thread);
    if (at >= 0) idleThreads.splice(at, 1);
    void thread.terminate();
  }, IDLE_THREAD_MS);
  timer.unref();
  idleTimers.set(thread, timer);
}

/** A new thread, or an idle one; either way without listeners of a search. */
function startThread(): Worker {
  const idle = takeIdleThread();
  if (idle) return idle;
  const thread = new Worker(WORKER_SOURCE, { eval: true });
  thread.unref();
  // An idle thread that dies (it has no search to tell) leaves the pool.
  thread.on("exit", () => {
    const at = idleThreads.indexOf(thread);
    if (at >= 0) idleThreads.splice(at, 1);
  });
  return thread;
}

/**
 * A worker evaluating one grep pattern. Requests resolve in order; `terminate()` (also called when `signal`
 * aborts) rejects whatever is outstanding with the signal's reason (or an Error). `release()` ends the search:
 * the thread goes back to the idle pool when the search finished cleanly, else it is terminated.
 */
export class RegexWorker {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (v: any) => void; reject: (e: unknown) => void }>();
  #nextId = 0;
  #failure: unknown;
  #done = false;
  readonly #signal?: AbortSignal;
  readonly #onAbort = () => this.terminate(this.#signal?.reason);
  readonly #onMessage = (msg: { id: number; results: unknown }) => {
    const p = this.#pending.get(msg.id);
    this.#pending.delete(msg.id);
    p?.resolve(msg.results);
  };
  readonly #onError = (error: Error) => this.#fail(error);
  readonly #onExit = () => this.#fail(this.#failure ?? new Error("grep worker exited"));

  constructor(options: RegexWorkerOptions, signal?: AbortSignal) {
    this.#signal = signal;
    this.#worker = startThread();
    this.#worker.on("message", this.#onMessage);
    this.#worker.on("error", this.#onError);
    this.#worker.on("exit", this.#onExit);
    // Messages are handled in order: the configuration precedes every request of this search.
    this.#worker.postMessage({ type: "configure", options });
    signal?.addEventListener("abort", this.#onAbort, { once: true });
  }

  #fail(error: unknown) {
    this.#failure ??= error;
    for (const p of this.#pending.values()) p.reject(this.#failure);
    this.#pending.clear();
  }

  #request<T>(message: Record<string, unknown>, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...message, id }, transfer);
    });
  }

  /**
   * Searches files (absolute real paths); one outcome per path, in order. With `binaryAsText`, a file the binary
   * probe marks is searched as text rather than reported as `binary` (the caller probes it itself).
   */
  searchFiles(paths: string[], options: { binaryAsText?: boolean } = {}): Promise<WorkerFileOutcome[]> {
    return this.#request({ type: "files", paths, binaryAsText: options.binaryAsText === true });
  }

  /**
   * Tests each file's candidate lines (a VerifyBatch, decoded in the worker): for each line, the (possibly cut)
   * text when it matches, else null; and whether the file is binary (probed only when a line matched; an
   * unreadable file counts as binary).
   */
  verifyFiles(batch: VerifyBatch): Promise<{ binary: boolean; texts: (string | null)[] }[]> {
    return this.#request(
      { type: "verify", paths: batch.paths, counts: batch.counts, ends: batch.ends, bytes: batch.bytes },
      [batch.bytes],
    );
  }

  #detach(): void {
    this.#done = true;
    this.#signal?.removeEventListener("abort", this.#onAbort);
    this.#worker.off("message", this.#onMessage);
    this.#worker.off("error", this.#onError);
    this.#worker.off("exit", this.#onExit);
  }

  /**
   * Ends the search. When every request was answered, nothing failed and the search was not cancelled, the
   * thread is kept for a later search; otherwise it is terminated (a thread may still be inside a runaway match).
   */
  release(): void {
    if (this.#done) return;
    if (this.#failure !== undefined || this.#pending.size > 0 || this.#signal?.aborted) {
      this.terminate();
      return;
    }
    this.#detach();
    keepIdleThread(this.#worker);
  }

  /** Stops the worker; outstanding requests reject with `reason`. */
  terminate(reason: unknown = new Error("grep worker terminated")): void {
    this.#fail(reason);
    if (this.#done) return;
    this.#detach();
    void this.#worker.terminate();
  }
}
