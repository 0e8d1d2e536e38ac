/**
 * The runtime-wide output cap and the spill area: a 5 MB shell output comes back within 48 KiB with its last line,
 * the spill file holds every byte and only the owning user's chat can read it; other tools keep the head; spill
 * files expire and stay within a per-user quota; truncations are counted per tool.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolOutputTruncatedTotal } from "../../src/core/metrics.js";
import { SpillArea } from "../../src/core/output-spill.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { capToolResult, countLines } from "../../src/core/result-cap.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { RegisteredTool } from "../../src/core/types.js";
import { grepTool } from "../../src/tools/builtin/grep.js";
import { readFileTool } from "../../src/tools/builtin/read-file.js";
import { buildShellTool, findInterpreter } from "../../src/tools/shell/shell-tool.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../shell/helpers.js";

const BASH = findInterpreter("bash") as string;
let root: string;
let cleanup: () => void;
let wd: string;

const bigTool = (name: string, produce: () => unknown): RegisteredTool => ({
  definition: { name, description: "test", parameters: { type: "object", properties: {} } },
  settings: {
    title: name,
    description: name,
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    defaultParameters: {},
    parameterDescriptors: [],
  },
  execute: async () => produce(),
});

function setup() {
  const registry = new ToolRegistryStore();
  registry.register(buildShellTool("bash", BASH));
  registry.register(readFileTool);
  const store = new MemoryToolSettingsStore();
  const dataDir = join(root, "data");
  const runtime = new ToolRuntime({ registry, store, logger: recordingLogger(), dataDir });
  return { runtime, registry, store, dataDir };
}

async function truncations(tool: string): Promise<number> {
  const metric = await toolOutputTruncatedTotal.get();
  return metric.values.find((v) => v.labels.tool === tool)?.value ?? 0;
}

beforeAll(() => {
  ({ dir: root, cleanup } = tempDir("toolhost-spill-"));
  wd = join(root, "project");
  mkdirSync(wd, { recursive: true });
});
afterAll(() => cleanup());

describe("a 5 MB shell output", () => {
  it("comes back within 48 KiB with its last line; the spill file holds every byte; only its chat can read it", async () => {
    const { runtime, store } = setup();
    // ~5 MB of lines, then the line that matters.
    const lines: string[] = [];
    let size = 0;
    for (let i = 1; size < 5_000_000; i++) {
      const line = `row ${String(i).padStart(6, "0")} ${randomBytes(30).toString("hex")}\n`;
      lines.push(line);
      size += line.length;
    }
    const big = Buffer.from(lines.join(""));
    writeFileSync(join(wd, "big.txt"), big);
    const last = "error: compilation failed in step 42 (the last line)\n";
    await store.save("alice", "bash", { enabled: true, parameters: {} });
    const before = await truncations("bash");

    const outcome = await runtime.executeTool(
      "bash",
      { command: `cat big.txt; printf '${last.trim()}\\n'; echo 'warning: at the end' >&2; exit 1` },
      { userId: "alice", chatId: "chat-a", workingDirectory: wd },
    );
    expect(outcome.ok).toBe(true);
    const result = (outcome as { result: Record<string, unknown> }).result as {
      stdout: string;
      stderr: string;
      exitCode: number;
      stdoutBytes: number;
      outputTruncated: { fields: { field: string; spillFile: string; droppedBytes: number; howToRead: string }[] };
    };
    expect(Buffer.byteLength(JSON.stringify(result))).toBeLessThanOrEqual(48 * 1024);
    expect(result.exitCode).toBe(1);
    expect(result.stdout.endsWith(last)).toBe(true);
    expect(result.stdout.startsWith("row 000001 ")).toBe(true);
    expect(result.stderr).toBe("warning: at the end\n");
    expect(result.stdoutBytes).toBe(big.length + last.length);
    // About 20% head, 80% tail.
    const [head, tail] = result.stdout.split(/\[\.\.\. \d+ bytes, \d+ lines cut here; full output: .*\]\n/);
    expect(head && tail).toBeTruthy();
    expect(Buffer.byteLength(tail as string)).toBeGreaterThan(3 * Buffer.byteLength(head as string));

    const entry = result.outputTruncated.fields.find((f) => f.field === "stdout")!;
    expect(entry.droppedBytes).toBeGreaterThan(4_900_000);
    expect(entry.howToRead).toMatch(/read_file/);
    // A virtual name, never a server path; its local file is private.
    expect(entry.spillFile).toMatch(/^spill:[0-9a-f]{24}$/);
    expect(JSON.stringify(result)).not.toContain(root);
    const local = (await runtime.spill!.open("alice", "chat-a", entry.spillFile)) as string;
    const spilled = readFileSync(local);
    expect(spilled.equals(Buffer.concat([big, Buffer.from(last)]))).toBe(true);
    expect(statSync(local).mode & 0o777).toBe(0o600);
    expect(await truncations("bash")).toBe(before + 1);

    // The owning chat reads it with read_file …
    await store.save("alice", "read_file", { enabled: true, parameters: {} });
    const read = await runtime.executeTool(
      "read_file",
      { path: entry.spillFile, startLine: 2, maxLines: 2 },
      { userId: "alice", chatId: "chat-a", workingDirectory: wd },
    );
    expect(read).toMatchObject({
      ok: true,
      result: { path: entry.spillFile, startLine: 2, endLine: 3, totalLines: lines.length + 1 },
    });
    const content = (read as { result: { content: string } }).result.content;
    expect(content).toContain(lines[1]?.trim());
    expect(content).toContain(lines[2]?.trim());

    // … another user cannot, nor another chat of the same user: answered exactly like a spill that does not exist.
    const missing = await runtime.executeTool(
      "read_file",
      { path: "spill:000000000000000000000000" },
      { userId: "alice", chatId: "chat-a", workingDirectory: wd },
    );
    expect(missing).toMatchObject({ ok: false, error: { code: "not_found" } });
    const missingMessage = (missing as { error: { message: string } }).error.message.replace(/spill:[0-9a-f]+/, "X");
    for (const [userId, chatId] of [
      ["bob", "chat-a"],
      ["alice", "chat-b"],
      ["alice", null],
    ] as const) {
      const denied = await runtime.executeTool(
        "read_file",
        { path: entry.spillFile },
        { userId, chatId, workingDirectory: wd },
      );
      expect(denied, `${userId}/${chatId}`).toMatchObject({ ok: false, error: { code: "not_found" } });
      expect((denied as { error: { message: string } }).error.message.replace(/spill:[0-9a-f]+/, "X")).toBe(
        missingMessage,
      );
    }
    // The local file stays protected: by its server path it is refused like any other data-directory path.
    const byPath = await runtime.executeTool(
      "read_file",
      { path: local },
      { userId: "bob", chatId: "chat-a", workingDirectory: wd },
    );
    expect(byPath).toMatchObject({ ok: false, error: { code: "access_denied" } });
    // The sandboxed shell itself cannot read the data directory at all.
    const peek = await runtime.executeTool(
      "bash",
      { command: `cat ${JSON.stringify(local)} | head -c 10` },
      { userId: "alice", chatId: "chat-a", workingDirectory: wd },
    );
    expect((peek as { result: { stdout: string } }).result.stdout).toBe("");
  }, 60_000);
});

describe("the cap for other tools", () => {
  it("a custom tool's long text keeps its head and is spilled; a short result is untouched", async () => {
    const { runtime, registry, store } = setup();
    const text = Array.from({ length: 5000 }, (_, i) => `line ${i + 1}`).join("\n");
    registry.register(bigTool("big_text", () => ({ text, note: "kept" })));
    registry.register(bigTool("small", () => ({ ok: 1 })));
    await store.save("carol", "read_file", { enabled: false, parameters: {} });
    const outcome = await runtime.executeTool("big_text", {}, { userId: "carol", chatId: "c" });
    const result = (outcome as { result: Record<string, unknown> }).result as {
      text: string;
      note: string;
      outputTruncated: { fields: { spillFile: string; totalLines: number; droppedLines: number; howToRead: string }[] };
    };
    expect(result.note).toBe("kept");
    expect(result.text.startsWith("line 1\nline 2\n")).toBe(true);
    expect(countLines(result.text)).toBeLessThanOrEqual(2001);
    const field = result.outputTruncated.fields[0]!;
    expect(field).toMatchObject({ totalLines: 5000 });
    expect(field.droppedLines).toBeGreaterThanOrEqual(3000);
    expect(readFileSync((await runtime.spill!.open("carol", "c", field.spillFile)) as string, "utf8")).toBe(text);
    // read_file is disabled for carol and grep is not registered: the hint says so.
    expect(field.howToRead).toMatch(/No file-reading tool/);
    expect(await runtime.executeTool("small", {}, { userId: "carol" })).toMatchObject({ ok: true, result: { ok: 1 } });
  });

  it("a spill over grep's maxFileSizeBytes is still searched by its spill name, as the cut result suggests", async () => {
    const { runtime, registry } = setup();
    registry.register(grepTool);
    // About 2 MB of lines: over the 1 MB default of maxFileSizeBytes, which keeps directory searches out of big files.
    const text = Array.from({ length: 300_000 }, (_, i) => `row ${i + 1}`).join("\n");
    registry.register(bigTool("big_rows", () => ({ text })));
    const outcome = await runtime.executeTool("big_rows", {}, { userId: "dave", chatId: "c", workingDirectory: wd });
    const field = (outcome as { result: { outputTruncated: { fields: { spillFile: string; howToRead: string }[] } } })
      .result.outputTruncated.fields[0]!;
    expect(field.howToRead).toMatch(/grep/);
    const found = await runtime.executeTool(
      "grep",
      { pattern: "^row 299999$", path: field.spillFile },
      { userId: "dave", chatId: "c", workingDirectory: wd },
    );
    expect(found).toMatchObject({ ok: true, result: { matches: [{ line: 299_999, text: "row 299999" }] } });
    // A directory search still skips a file that size (the setting keeps walks out of huge files).
    writeFileSync(join(wd, "huge.txt"), text);
    const walked = await runtime.executeTool(
      "grep",
      { pattern: "^row 299999$", path: "." },
      { userId: "dave", chatId: "c", workingDirectory: wd },
    );
    expect(walked).toMatchObject({ ok: true, result: { matches: [] } });
  }, 60_000);

  it("per-user settings change the cap (maxResultBytes / maxResultLines are common settings)", async () => {
    const { runtime, registry, store } = setup();
    registry.register(bigTool("lines", () => Array.from({ length: 300 }, (_, i) => `x${i}`).join("\n")));
    const tool = registry.get("lines")!;
    expect(tool.settings.parameterDescriptors.map((d) => d.name)).toEqual(
      expect.arrayContaining(["maxResultBytes", "maxResultLines"]),
    );
    expect(await runtime.executeTool("lines", {}, { userId: "dave" })).toMatchObject({ ok: true });
    const plain = (await runtime.executeTool("lines", {}, { userId: "dave" })) as { result: unknown };
    expect(typeof plain.result).toBe("string");
    await store.save("dave", "lines", { enabled: true, parameters: { maxResultLines: 50 } });
    const cut = (await runtime.executeTool("lines", {}, { userId: "dave" })) as { result: { result: string } };
    expect(countLines(cut.result.result)).toBeLessThanOrEqual(51);
    expect(cut.result).toMatchObject({ outputTruncated: { fields: [{ field: "result", totalLines: 300 }] } });
  });

  it("list results keep their first entries; read_file keeps its head and says which startLine continues", async () => {
    const bothReaders = { enabled: [readFileTool.spillReader!, grepTool.spillReader!], names: ["read_file", "grep"] };
    const area = new SpillArea(join(root, "unit"));
    const matches = Array.from({ length: 3000 }, (_, i) => ({ file: `f${i}.ts`, line: i, text: "match" }));
    const listCut = await capToolResult(
      { matches, truncated: false },
      {
        tool: "grep",
        style: "head",
        maxBytes: 48 * 1024,
        maxLines: 2000,
        streams: new Map(),
        area,
        userId: "u",
        chatId: "c",
        readers: bothReaders,
      },
    );
    const list = listCut.result as { matches: unknown[]; outputTruncated: { fields: { spillFile: string }[] } };
    expect(list.matches[0]).toEqual(matches[0]);
    expect(list.matches.length).toBeLessThan(3000);
    const spilled = readFileSync(
      (await area.open("u", "c", list.outputTruncated.fields[0]!.spillFile)) as string,
      "utf8",
    ).split("\n");
    expect(spilled).toHaveLength(3000);
    expect(JSON.parse(spilled[2999]!)).toEqual(matches[2999]);

    // A list whose first entry alone is too big falls back to the head of the whole result's text.
    const oneBig = await capToolResult(
      { content: [{ type: "text", text: "q".repeat(100_000) }] },
      {
        tool: "mcp__srv__t",
        style: "head",
        maxBytes: 48 * 1024,
        maxLines: 2000,
        streams: new Map(),
        area,
        userId: "u",
        chatId: "c",
        readers: bothReaders,
      },
    );
    const whole = oneBig.result as { resultHead: string; outputTruncated: { fields: { spillFile: string }[] } };
    expect(whole.resultHead).toContain("qqqq");
    expect(Buffer.byteLength(JSON.stringify(whole))).toBeLessThanOrEqual(48 * 1024);
    expect(
      JSON.parse(
        readFileSync((await area.open("u", "c", whole.outputTruncated.fields[0]!.spillFile)) as string, "utf8"),
      ),
    ).toEqual({
      content: [{ type: "text", text: "q".repeat(100_000) }],
    });

    const content = Array.from({ length: 2000 }, (_, i) => `${String(i + 1).padStart(6)}\t${"y".repeat(60)}`).join(
      "\n",
    );
    const readCut = await capToolResult(
      { content, path: "a.txt", startLine: 1, endLine: 2000, totalLines: 9000, truncated: true },
      {
        tool: "read_file",
        style: "head",
        maxBytes: 48 * 1024,
        maxLines: 2000,
        streams: new Map(),
        area,
        userId: "u",
        chatId: "c",
        readers: { enabled: [readFileTool.spillReader!], names: ["read_file", "grep"] },
        paging: readFileTool.resultPaging!,
      },
    );
    const read = readCut.result as { content: string; endLine: number; continueWith: string };
    expect(read.endLine).toBeLessThan(2000);
    expect(read.continueWith).toBe(`read_file {"path": "a.txt", "startLine": ${read.endLine + 1}}`);
    expect(read.content.split("\n").at(-2)).toMatch(new RegExp(`^\\s*${read.endLine}\\t`));
  });
});

describe("spill area housekeeping", () => {
  it("expires old files and keeps each user within the quota, oldest first", async () => {
    const area = new SpillArea(join(root, "housekeeping"), { ttlMs: 60_000, quotaBytes: 3000 });
    const now = Date.now();
    const write = async (user: string, ageMs: number, bytes: number) => {
      const { path: name } = await area.writeFile(user, "c", "t", "f", "z".repeat(bytes));
      const path = (await area.open(user, "c", name)) as string;
      const when = new Date(now - ageMs);
      utimesSync(path, when, when);
      return path;
    };
    const expired = await write("u1", 120_000, 10);
    const oldest = await write("u1", 30_000, 1000);
    const middle = await write("u1", 20_000, 1000);
    const newest = await write("u1", 10_000, 1500);
    const other = await write("u2", 30_000, 1000);
    expect(await area.cleanup(now)).toBe(2);
    const exists = (p: string) => {
      try {
        statSync(p);
        return true;
      } catch {
        return false;
      }
    };
    expect([expired, oldest, middle, newest, other].map(exists)).toEqual([false, false, true, true, true]);
  });

  it("a stream larger than the file limit is kept up to it and marked incomplete; small ones stay in memory", async () => {
    const area = new SpillArea(join(root, "streams"), { maxFileBytes: 1000 });
    const stream = area.openStream("u", "c", "bash", "stdout", 100);
    for (let i = 0; i < 30; i++) stream.write(Buffer.from(`${"a".repeat(99)}\n`));
    expect(stream.totalBytes).toBe(3000);
    expect(stream.totalLines).toBe(30);
    const saved = await stream.persist();
    expect(saved).toMatchObject({ complete: false, bytes: 1000 });
    expect(readFileSync((await area.open("u", "c", saved.path)) as string, "utf8")).toBe(
      `${"a".repeat(99)}\n`.repeat(10),
    );
    const small = area.openStream("u", "c", "bash", "stderr", 100);
    small.write(Buffer.from("hi"));
    await small.discard();
    expect(small.totalLines).toBe(1);
  });
});
