/**
 * Shared bytes across instances: two real `toolhost serve` processes on one PostgreSQL database, each with its own
 * data directory. A spill and an image made through instance 1 are read through instance 2 by their owner, and
 * another user gets exactly the answer a missing one gets; no answer names a server directory; an approval signed
 * on instance 1 is accepted (and still binds its arguments) on instance 2; an instance whose approval key file
 * disagrees with the database refuses to start, saying what to do.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openDatabase } from "../../src/storage/database.js";
import { TokenRepository } from "../../src/storage/token-repository.js";
import { runCliInProcess } from "../helpers/cli.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { type FakeServer, PNG_1x1, startFakeOpenAI } from "../image/fakes.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "./chat-process.js";

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

interface Instance {
  process: CliProcess;
  url: string;
  dataDir: string;
}

let work: string;
let databaseUrl: string;
let fake: FakeServer;
const tokens: Record<string, string> = {};
const instances: Instance[] = [];

function env(dataDir: string): NodeJS.ProcessEnv {
  return cleanEnv({
    TOOLHOST_DATA_DIR: dataDir,
    TOOLHOST_DATABASE_URL: databaseUrl,
    TOOLHOST_ADMIN_USERS: "alice",
    TOOLHOST_CONFIG: join(work, "no-config.json"),
    OPENAI_API_KEY: "test-key",
    OPENAI_BASE_URL: fake.baseUrl,
  });
}

async function startInstance(name: string): Promise<Instance> {
  const dataDir = join(work, name);
  const process = startCli(["serve", "--port", "0"], env(dataDir));
  await process.waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out));
  return { process, url: /http:\/\/[\d.]+:\d+/.exec(process.stdout())![0], dataDir };
}

async function call(instance: Instance, user: string, path: string, json?: unknown, method = "POST") {
  const response = await fetch(`${instance.url}${path}`, {
    method: json === undefined && method === "POST" ? "GET" : method,
    headers: { authorization: `Bearer ${tokens[user]}`, "content-type": "application/json" },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const type = response.headers.get("content-type") ?? "";
  const body = type.includes("json") ? await response.json() : Buffer.from(await response.arrayBuffer());
  return { status: response.status, body: body as any };
}

const execute = (instance: Instance, user: string, tool: string, args: Record<string, unknown>, extra = {}) =>
  call(instance, user, `/api/tools/${tool}/execute`, { arguments: args, workingDirectory: work, ...extra });

/** The answer with what differs between two asks (spill names, image ids, the measured duration) blanked out. */
const shape = (body: unknown) =>
  JSON.stringify(body)
    .replace(/spill:[0-9a-f]+/g, "spill:X")
    .replace(/"durationMs":\d+/g, '"durationMs":0')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "ID");

describe.skipIf(!findPgBin())("two instances on one PostgreSQL database", { concurrent: true }, () => {
  beforeAll(async () => {
    assertBuilt();
    work = mkdtempSync(join(tmpdir(), "toolhost-shared-"));
    mkdirSync(join(work, "notes"));
    writeFileSync(
      join(work, "big.txt"),
      Array.from({ length: 100 }, (_, i) => `needle ${String(i).padStart(3, "0")} ${"x".repeat(80)}`).join("\n"),
    );
    [databaseUrl, fake] = await Promise.all([freshPostgresDatabase(), startFakeOpenAI()]);
    const database = await openDatabase({ url: databaseUrl });
    try {
      const repository = new TokenRepository(database.db);
      for (const user of ["alice", "bob"]) tokens[user] = (await repository.create(user)).token;
    } finally {
      await database.close();
    }
    instances.push(...(await Promise.all([startInstance("one"), startInstance("two")])));
  });

  afterAll(async () => {
    for (const instance of instances) instance.process.child.kill("SIGTERM");
    await Promise.all(instances.map((i) => i.process.exited));
    await fake?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("a spill made through instance 1 is read through instance 2 by its owner only, by its virtual name", async () => {
    const [one, two] = instances as [Instance, Instance];
    const cap = await call(
      one,
      "alice",
      "/api/settings/tools/grep",
      { parameters: { maxResultBytes: 4096, maxMatchesPerFile: 100 } },
      "PUT",
    );
    expect(cap.status).toBe(200);
    const cut = await execute(one, "alice", "grep", { pattern: "needle", path: "big.txt" });
    expect(cut.body).toMatchObject({ ok: true });
    const field = cut.body.result.outputTruncated.fields[0];
    expect(field.spillFile).toMatch(/^spill:[0-9a-f]{24}$/);
    expect(field.howToRead).toContain(field.spillFile);
    for (const instance of instances) expect(JSON.stringify(cut.body)).not.toContain(instance.dataDir);

    // The owner reads it through the other instance, with read_file and grep, and sees only its name.
    const read = await execute(two, "alice", "read_file", { path: field.spillFile });
    expect(read.body).toMatchObject({ ok: true, result: { path: field.spillFile } });
    expect(read.body.result.content).toContain("needle 099");
    const found = await execute(two, "alice", "grep", { pattern: "needle 042", path: field.spillFile });
    expect(found.body).toMatchObject({ ok: true });
    expect(found.body.result.matches).toHaveLength(1);
    expect(found.body.result.matches[0].file).toBe(field.spillFile);
    for (const instance of instances) {
      expect(JSON.stringify(read.body)).not.toContain(instance.dataDir);
      expect(JSON.stringify(found.body)).not.toContain(instance.dataDir);
    }

    // Another user: exactly the answer a spill that does not exist gets, on either instance and either tool.
    for (const instance of instances) {
      for (const tool of ["read_file", "grep"]) {
        const args = (path: string) => (tool === "grep" ? { pattern: "needle", path } : { path });
        // (bob is no admin: the server's directories are not his to bind, so his calls bind none.)
        const none = { workingDirectory: undefined };
        const theirs = await execute(instance, "bob", tool, args(field.spillFile), none);
        const missing = await execute(instance, "bob", tool, args(`spill:${randomBytes(12).toString("hex")}`), none);
        expect(theirs.body).toMatchObject({ ok: false, error: { code: "not_found" } });
        expect(shape(theirs)).toBe(shape(missing));
      }
    }
  });

  it("an image made through instance 1 is served by instance 2 to its owner only", async () => {
    const [one, two] = instances as [Instance, Instance];
    const made = await execute(one, "alice", "generate_image", { prompt: "a cat" });
    expect(made.body).toMatchObject({ ok: true });
    const image = made.body.result.images[0];
    expect(image.url).toMatch(/^\/api\/images\/[0-9a-f-]{36}$/);
    expect(image.path).toBeUndefined();
    for (const instance of instances) expect(JSON.stringify(made.body)).not.toContain(instance.dataDir);

    const served = await call(two, "alice", image.url);
    expect(served.status).toBe(200);
    expect((served.body as Buffer).equals(PNG_1x1)).toBe(true);
    const theirs = await call(two, "bob", image.url);
    const missing = await call(two, "bob", "/api/images/00000000-0000-4000-8000-000000000000");
    expect(theirs.status).toBe(404);
    expect(shape(theirs)).toBe(shape(missing));
  });

  it("an approval asked on instance 1 and answered anywhere is accepted on instance 2, bound to its arguments", async () => {
    const [one, two] = instances as [Instance, Instance];
    const rules = await call(
      one,
      "alice",
      "/api/settings/tools/write_file",
      { parameters: { approvalRules: [{ decision: "ask", match: "notes/**" }] } },
      "PUT",
    );
    expect(rules.status).toBe(200);
    const args = { path: "notes/plan.md", content: "the plan\n" };
    const asked = await execute(one, "alice", "write_file", args);
    expect(asked.body).toMatchObject({ ok: false, error: { code: "denied_by_policy" } });
    const approvalId = asked.body.error.details.approvalId as string;
    expect((await call(two, "alice", `/api/approvals/${approvalId}`, { decision: "allow_once" })).status).toBe(200);

    const altered = await execute(two, "alice", "write_file", { ...args, content: "else\n" }, { approvalId });
    expect(altered.body).toMatchObject({ ok: false, error: { code: "access_denied" } });
    const run = await execute(two, "alice", "write_file", args, { approvalId });
    expect(run.body).toMatchObject({ ok: true });
    expect(readFileSync(join(work, "notes/plan.md"), "utf8")).toBe("the plan\n");
  });

  it("an instance whose approval key file disagrees with the database refuses to start, saying what to do", async () => {
    const dataDir = join(work, "three");
    mkdirSync(dataDir, { recursive: true });
    const keyFile = join(dataDir, "approval.key");
    writeFileSync(keyFile, `${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
    // main(argv) in this process: the refusal comes before anything listens, and its exit code and message are the
    // same as a process's; a fresh process would prove nothing more.
    const refused = await runCliInProcess(["serve", "--port", "0"], env(dataDir) as Record<string, string>);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      `The approval signing key in ${keyFile} differs from the one stored in the database`,
    );
    expect(refused.stderr).toContain(`Remove ${keyFile}`);
  });
});
