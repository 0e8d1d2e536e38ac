/**
 * Spills are read-only: a writing tool given a spill name (`spill:<id>`) refuses it, instead of creating a file of
 * that literal name that read_file would never read back (it reads the spill). `./spill:…` names a real file of that
 * name, which every tool writes and reads as any other file.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { fsRuntime, tempDir } from "./helpers.js";

const { dir, cleanup } = tempDir("toolhost-spill-write-");
afterAll(cleanup);
const { call, store } = fsRuntime(dir);
const SPILL = "spill:aaaaaaaaaaaaaaaaaaaaaaaa";

const refused = (outcome: unknown, path = SPILL) => {
  expect(outcome).toMatchObject({
    ok: false,
    error: { code: "validation_failed", details: { rule: "spill_read_only" } },
  });
  const message = (outcome as { error: { message: string } }).error.message;
  expect(message).toMatch(/read-only/);
  expect(message).toContain(`"./${path}"`);
};

describe("writing tools refuse a spill name", () => {
  it("write_file, file_write and apply_patch (add, update, delete, move) refuse spill:<id>, creating nothing", async () => {
    await store.save("u1", "file_write", { enabled: true, parameters: {} });
    refused(await call("write_file", { path: SPILL, content: "x" }));
    refused(await call("write_file", { path: "spill:not-even-an-id", content: "x" }), "spill:not-even-an-id");
    refused(await call("file_write", { path: SPILL, content: "x" }));
    refused(await call("apply_patch", { patch: `*** Begin Patch\n*** Add File: ${SPILL}\n+x\n*** End Patch` }));
    refused(await call("apply_patch", { patch: `*** Begin Patch\n*** Delete File: ${SPILL}\n*** End Patch` }));
    refused(
      await call("apply_patch", { patch: `*** Begin Patch\n*** Update File: ${SPILL}\n@@\n-a\n+b\n*** End Patch` }),
    );
    expect(readdirSync(dir)).toEqual([]);
  });

  it("apply_patch refuses moving a file onto a spill name and leaves the file", async () => {
    expect((await call("write_file", { path: "notes.txt", content: "a\n" })).ok).toBe(true);
    refused(
      await call("apply_patch", {
        patch: `*** Begin Patch\n*** Update File: notes.txt\n*** Move to: ${SPILL}\n@@\n-a\n+b\n*** End Patch`,
      }),
    );
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("a\n");
    expect(existsSync(join(dir, SPILL))).toBe(false);
  });

  it("./spill:<id> is a real file of that name: written, read back and patched", async () => {
    const name = "spill:bbbbbbbbbbbbbbbbbbbbbbbb";
    const local = `./${name}`;
    expect(await call("write_file", { path: local, content: "mine\n" })).toMatchObject({
      ok: true,
      result: { created: true, path: local },
    });
    expect(readFileSync(join(dir, name), "utf8")).toBe("mine\n");
    expect(await call("read_file", { path: local })).toMatchObject({ ok: true, result: { content: "     1\tmine" } });
    expect(
      (
        await call("apply_patch", {
          patch: `*** Begin Patch\n*** Update File: ${local}\n@@\n-mine\n+ours\n*** End Patch`,
        })
      ).ok,
    ).toBe(true);
    expect(readFileSync(join(dir, name), "utf8")).toBe("ours\n");
    // Found by glob or grep, it is shown as the path that reaches it, never as the spill name.
    expect(await call("glob", { pattern: "spill:*" })).toMatchObject({ ok: true, result: { matches: [local] } });
    expect(JSON.stringify(await call("grep", { pattern: "ours", path: "." }))).toContain(`"${local}`);
  });
});
