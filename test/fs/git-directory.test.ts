/**
 * File tools never write into a Git directory: a repository's hooks and config run commands when someone runs git
 * there, so a model that could plant them with write_file or apply_patch would turn an allowed `git status` into
 * any command. Reading stays allowed; names that merely begin with `.git` (.gitignore, .github) are ordinary files.
 */
import { execFileSync } from "node:child_process";
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

  it("refuses a Git directory without a .git name: a worktree's separate one, a bare repository", async () => {
    // `git init --separate-git-dir` leaves a ".git" pointer file in the worktree and the repository elsewhere; a
    // bare repository has no ".git" at all. git still runs their hooks and config.
    execFileSync("git", ["init", "-q", "--separate-git-dir", join(dir, "sep-git"), join(dir, "work")]);
    execFileSync("git", ["init", "-q", "--bare", join(dir, "store.git")]);
    const config = readFileSync(join(dir, "sep-git/config"), "utf8");
    // A model reads what it overwrites first: the freshness rule is not what stops it here.
    for (const path of ["sep-git/config", "store.git/config"]) await call("read_file", { path });
    for (const path of ["sep-git/config", "sep-git/hooks/pre-commit", "store.git/config", "store.git/hooks/x/y"]) {
      refused(
        await call("write_file", { path, content: "[core]\n\tfsmonitor = touch PWNED\n", createDirectories: true }),
      );
    }
    refused(
      await call("apply_patch", {
        patch: "*** Begin Patch\n*** Add File: sep-git/hooks/post-checkout\n+x\n*** End Patch\n",
      }),
    );
    expect(readFileSync(join(dir, "sep-git/config"), "utf8")).toBe(config);
    expect(existsSync(join(dir, "sep-git/hooks/pre-commit"))).toBe(false);
    expect(await call("read_file", { path: "sep-git/config" })).toMatchObject({ ok: true });
    expect(await call("write_file", { path: "work/file.txt", content: "x\n" })).toMatchObject({ ok: true });
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
