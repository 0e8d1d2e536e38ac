/**
 * A user's waiting asks are capped (MAX_PENDING_ASKS): a model that loops over calls needing approval cannot pile
 * up asks nobody will read. The cap holds under concurrent calls (count and insert are one transaction, serialized
 * per user), on SQLite and on PostgreSQL; past it a call is refused as limit_exceeded, saying what to do, and an
 * answered ask makes room again. Another user's asks are not counted.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MAX_PENDING_ASKS } from "../../src/app/approvals/service.js";
import { freshPostgresDatabase } from "../helpers/postgres.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";
import { HAVE_POSTGRES } from "../helpers/stores.js";
import { approvalRecord } from "./helpers.js";

const servers: TestServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

const cases = [
  { name: "SQLite", skip: false, databaseUrl: async () => undefined },
  { name: "PostgreSQL", skip: !HAVE_POSTGRES, databaseUrl: freshPostgresDatabase },
];

describe.each(cases)("pending asks on $name", ({ skip, databaseUrl }) => {
  it.skipIf(skip)("stop at the cap under concurrent calls, say so, and make room when one is answered", async () => {
    const url = await databaseUrl();
    const server = await startTestServer(url ? { databaseUrl: url } : {});
    servers.push(server);
    const work = tempDir("toolhost-pending-cap-");
    mkdirSync(join(work, "notes"));
    const put = await server.api("/api/settings/tools/write_file", {
      method: "PUT",
      json: { parameters: { approvalRules: [{ decision: "ask", match: "notes/**" }] } },
    });
    expect(put.status).toBe(200);
    const execute = async (i: number) => {
      const response = await server.api("/api/tools/write_file/execute", {
        method: "POST",
        json: { workingDirectory: work, arguments: { path: `notes/n${i}.md`, content: `${i}\n` } },
      });
      return (await response.json()) as { ok: boolean; error?: { code: string; message: string; details?: any } };
    };
    const outcomes = await Promise.all(Array.from({ length: MAX_PENDING_ASKS + 12 }, (_, i) => execute(i)));
    const asked = outcomes.filter((o) => o.error?.details?.approvalId);
    const capped = outcomes.filter((o) => o.error?.code === "limit_exceeded");
    expect(asked).toHaveLength(MAX_PENDING_ASKS);
    expect(capped).toHaveLength(12);
    expect(capped[0]?.error?.message).toMatch(/already waiting .* Answer or deny the waiting ones/);
    const listed = (await (await server.api("/api/approvals")).json()) as { approvals: unknown[] };
    expect(listed.approvals).toHaveLength(MAX_PENDING_ASKS);

    // An answer makes room for one more ask.
    const first = asked[0]?.error?.details?.approvalId as string;
    const answered = await server.api(`/api/approvals/${first}`, { method: "POST", json: { decision: "deny" } });
    expect(answered.status).toBe(200);
    expect((await execute(1_000)).error?.details?.approvalId).toBeTruthy();
    expect((await execute(1_001)).error?.code).toBe("limit_exceeded");
  });

  it.skipIf(skip)("the repository's count and insert are one step: 60 creates at once against a cap of 7", async () => {
    const url = await databaseUrl();
    const server = await startTestServer(url ? { databaseUrl: url } : {});
    servers.push(server);
    const repository = server.ctx.approvals.repository;
    const record = (i: number) =>
      approvalRecord(randomUUID(), { userId: "racer", chatId: null, toolCallId: `call-${i}`, rule: null });
    const stored = await Promise.all(Array.from({ length: 60 }, (_, i) => repository.create(record(i), 7)));
    expect(stored.filter(Boolean)).toHaveLength(7);
    expect(await repository.listPending("racer")).toHaveLength(7);
  });
});
