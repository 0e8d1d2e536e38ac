/**
 * File tools never write into a Git directory: a repository's hooks and config run commands when someone runs git
 * there, so a model that could plant them with write_file or apply_patch would turn an allowed `git status` into
 * any command. Reading stays allowed; names that merely begin with `.git` (.gitignore, .github) are ordinary files.
 */
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { fsRuntime, tempDir } from "./helpers.js";

const { dir, cleanup } = tempDir("toolhost-git-dir-");
afterAll(cleanup);
const { call, store } = fsRuntime(dir);

const refused = (outcome: unknown) => {
  expect(outcome).toMatchObject({ ok: false, error: { code: "access_denied", details: { rule: "gitDirectory" } } });
};

describe("write_file, file_write and apply_patch refuse a Git directory", () => {
  it("refuses planting a repository's config or hooks, at the top or nested, new or existing", async () => {
    await store.save("u1", "file_write", { enabled: true, parameters: {} });
    mkdirSync(join(dir, "repo/.git/hooks"), { recursive: true });
    writeFileSync(join(dir, "repo/.git/config"), "[core]\n");
    for (const path of [
      ".git/config",
      ".git/HEAD",
      "repo/.git/config",
      "repo/.git/hooks/pre-commit",
      "deep/down/.git/config",
      ".git",
      "repo/sub/../.git/hooks/post-checkout",
    ]) {
      refused(
        await call("write_file", { path, content: "[core]\n\tfsmonitor = touch PWNED\n", createDirectories: true }),
      );
      refused(await call("file_write", { path, content: "x" }));
    }
    expect(existsSync(join(dir, ".git"))).toBe(false);
    expect(existsSync(join(dir, "deep"))).toBe(false);
    expect(readFileSync(join(dir, "repo/.git/config"), "utf8")).toBe("[core]\n");
  });

  it("refuses a path whose real form is in a Git directory (a link to it)", async () => {
    symlinkSync(join(dir, "repo/.git"), join(dir, "innocent"));
    refused(await call("write_file", { path: "innocent/config", content: "x" }));
    expect(readFileSync(join(dir, "repo/.git/config"), "utf8")).toBe("[core]\n");
  });

  it("refuses apply_patch adding, updating, moving into or deleting in .git", async () => {
    const patches = [
      "*** Begin Patch\n*** Add File: .git/config\n+[core]\n*** End Patch",
      "*** Begin Patch\n*** Delete File: repo/.git/config\n*** End Patch",
      "*** Begin Patch\n*** Update File: repo/.git/config\n@@\n-[core]\n+[alias]\n*** End Patch",
    ];
    for (const patch of patches) refused(await call("apply_patch", { patch }));
    writeFileSync(join(dir, "notes.txt"), "a\n");
    await call("read_file", { path: "notes.txt" });
    refused(
      await call("apply_patch", {
        patch:
          "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: repo/.git/hooks/pre-commit\n@@\n-a\n+b\n*** End Patch",
      }),
    );
    expect(readFileSync(join(dir, "repo/.git/config"), "utf8")).toBe("[core]\n");
    expect(existsSync(join(dir, "repo/.git/hooks/pre-commit"))).toBe(false);
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("a\n");
  });

  it("still reads a Git directory and writes names that only begin with .git", async () => {
    expect(await call("read_file", { path: "repo/.git/config" })).toMatchObject({ ok: true });
    for (const path of [".gitignore", ".github/workflows/ci.yml", "src/.gitkeep", "x.git/y"]) {
      expect(await call("write_file", { path, content: "x\n", createDirectories: true }), path).toMatchObject({
        ok: true,
      });
    }
  });
});
