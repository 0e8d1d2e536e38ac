/**
 * The freshness ledger across instances: a chat's reads are stored in batches, but before the turn that made them
 * ends, so the chat's next turn may run on another instance (another app context on the same database) and write
 * the file it read without being told to read it again.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../src/app/chat-service.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { tempDir } from "../helpers/server.js";
import { scriptedAdapter, textTurn, toolTurn } from "../loop/scripted-adapter.js";

describe("the freshness ledger across instances", () => {
  let root: string;
  let a: AppContext;
  let b: AppContext;
  beforeAll(async () => {
    root = tempDir("toolhost-ledger-instances-");
    mkdirSync(join(root, "project"));
    writeFileSync(join(root, "project", "notes.txt"), "old\n");
    // Two instances: each its own process state (settings cache, ledger queue), one database.
    a = await createAppContext({ dataDir: join(root, "data") });
    b = await createAppContext({ dataDir: join(root, "data") });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it("a read in a turn on one instance lets the next turn on another instance write the file", async () => {
    const project = join(root, "project");
    const adapter = scriptedAdapter([
      toolTurn([{ id: "c1", name: "read_file", arguments: JSON.stringify({ path: "notes.txt" }) }]),
      textTurn("Read it."),
    ]);
    const service = new ChatService({
      chats: a.chats,
      runtime: a.runtime,
      logger: a.logger,
      env: {},
      chatRoots: null,
      adapterFactory: () => adapter,
    });
    const chat = await service.createChat("u1", { provider: "openai", model: "m", workingDirectory: project });
    const events = [];
    for await (const event of (await service.prepareTurn("u1", chat.id, "Read notes.txt")).run()) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "text" });

    // At once, on the other instance: the write is allowed because the read was stored when the turn ended.
    const write = await b.runtime.executeTool(
      "write_file",
      { path: "notes.txt", content: "new\n" },
      { userId: "u1", chatId: chat.id, workingDirectory: project },
    );
    expect(write).toMatchObject({ ok: true });
    expect(readFileSync(join(project, "notes.txt"), "utf8")).toBe("new\n");

    // A file this chat never read is still refused on either instance.
    writeFileSync(join(project, "other.txt"), "x\n");
    const refused = await b.runtime.executeTool(
      "write_file",
      { path: "other.txt", content: "y\n" },
      { userId: "u1", chatId: chat.id, workingDirectory: project },
    );
    expect(refused.ok).toBe(false);
  });
});
