/**
 * Approvals that mean what they say, through the CLI's commands (no terminal, no --yes) and the application services:
 * `approval: allow` runs redirections and computed names unattended while the user's deny rules bind; a denial
 * without a terminal names its reason, suggests only what helps and carries no approval id; "allow always" is offered
 * only where the rule it stores makes the same call run unasked (answered, the repeat runs without an ask); an
 * admin's locked ask/deny is a floor no allow rule of the user's lifts (422 naming the lock); the re-check before an
 * approved call runs asks again when a rule has since turned to ask.
 *
 * The `toolhost call` runs are command rules: they run the same main(argv) the bin runs, in this process, whose stdin
 * and stderr are not terminals (checked before each run), as a process's would not be without one.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { runGatedCall } from "../../src/app/approvals/one-off.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { cleanEnv } from "../e2e/chat-process.js";
import { runCliInProcess } from "../helpers/cli.js";

vi.setConfig({ testTimeout: 120_000 });

let work: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "toolhost-meaning-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Changes user `local`'s bash settings in a data directory (as `toolhost settings set` does, without a process). */
async function setBash(dataDir: string, parameters: Record<string, unknown>): Promise<void> {
  const ctx = await createAppContext({ dataDir });
  try {
    await ctx.settings.update("local", "bash", { enabled: true, parameters }, { admin: true, lock: false });
  } finally {
    await ctx.close();
  }
}

/**
 * `toolhost …args` through main(argv) in this process, without a terminal, with `env` (and no database URL of this
 * process's: the data directory's SQLite). One run at a time.
 */
const runCli = (args: string[], env: NodeJS.ProcessEnv) => {
  expect(process.stdin.isTTY && process.stderr.isTTY).toBeFalsy();
  return runCliInProcess(args, { TOOLHOST_DATABASE_URL: "", ...(env as Record<string, string>) });
};

describe("toolhost call without a terminal", () => {
  it("approval allow runs a redirection and a computed name; a deny rule still binds", async () => {
    const dataDir = join(work, "cli-allow");
    const env = cleanEnv({ TOOLHOST_DATA_DIR: dataDir });
    await setBash(dataDir, { approval: "allow" });
    const dir = mkdtempSync(join(work, "allow-"));
    const redirect = await runCli(["call", "bash", '{"command":"echo x > notes.txt"}', "--cwd", dir], env);
    const computed = await runCli(["call", "bash", '{"command":"cmd=echo; $cmd y > computed.txt"}', "--cwd", dir], env);
    // The sandbox still confines: a write outside the working directory fails.
    const outside = await runCli(["call", "bash", `{"command":"echo z > ${work}/outside.txt"}`, "--cwd", dir], env);
    expect(redirect.code, redirect.stderr).toBe(0);
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("x\n");
    expect(computed.code, computed.stderr).toBe(0);
    expect(readFileSync(join(dir, "computed.txt"), "utf8")).toBe("y\n");
    expect(existsSync(join(work, "outside.txt"))).toBe(false);
    expect(outside.stdout).not.toContain('"ok": true');

    await setBash(dataDir, { approvalRules: [{ decision: "deny", match: "rm" }] });
    const denied = await runCli(["call", "bash", '{"command":"sudo rm -f notes.txt"}', "--cwd", dir], env);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('deny "rm"');
    expect(existsSync(join(dir, "notes.txt"))).toBe(true);
  });

  it("an ask is refused naming its reason and what helps, with no approval id nobody could answer", async () => {
    const dataDir = join(work, "cli-ask");
    const env = cleanEnv({ TOOLHOST_DATA_DIR: dataDir });
    await setBash(dataDir, {});
    const dir = mkdtempSync(join(work, "ask-"));
    const asked = await runCli(["call", "bash", '{"command":"ls"}', "--cwd", dir], env);
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain("denied_by_policy: Denied by policy");
    expect(asked.stderr).toContain("the approval setting is ask");
    expect(asked.stderr).toContain("--yes");
    expect(asked.stderr).toContain('approval=allow for "bash"');
    expect(`${asked.stdout}${asked.stderr}`).not.toMatch(/approvalId|[0-9a-f]{8}-[0-9a-f]{4}-/);

    await setBash(dataDir, { approval: "allow", approvalRules: [{ decision: "ask", match: "git push" }] });
    const byRule = await runCli(["call", "bash", '{"command":"git push origin main"}', "--cwd", dir], env);
    expect(byRule.code).toBe(1);
    expect(byRule.stderr).toContain('The rule ask "git push"');
    // The setting is already allow: the denial does not send the user there.
    expect(byRule.stderr).not.toContain("approval=allow");
  });
});

describe("answers that stick, locks that bind (application services)", () => {
  let ctx: AppContext;
  let dir: string;
  beforeAll(async () => {
    ctx = await createAppContext({ dataDir: join(work, "services") });
    dir = mkdtempSync(join(work, "services-"));
  });
  afterAll(async () => {
    await ctx?.close();
  });

  /** One call through the gate the way the tool-execute route makes it (an ask returns its pending id). */
  const call = (userId: string, command: string) =>
    runGatedCall("bash", JSON.stringify({ command }), {
      runtime: ctx.runtime,
      approvals: ctx.approvals,
      userId,
      workingDirectory: dir,
    });
  const approvalOf = (outcome: Awaited<ReturnType<typeof call>>) =>
    (outcome.ok ? undefined : (outcome.error.details as { approvalId?: string } | undefined)?.approvalId) ?? "";

  it("allow_always stores a rule that makes the same call run unasked; refused (422) where it could not", async () => {
    await ctx.settings.update("ann", "bash", { enabled: true }, { admin: true, lock: false });
    const first = await call("ann", "echo hello");
    const id = approvalOf(first);
    expect(id).not.toBe("");
    expect(ctx.approvals.view((await ctx.approvals.repository.get(id))!).allowAlways).toBe(true);
    await ctx.approvals.decide("ann", id, { decision: "allow_always", decidedBy: "ann" });
    const again = await call("ann", "echo hello");
    expect(again.ok).toBe(true);

    // A redirection past the stored narrow rule would still ask: allow_always is not offered, and refused.
    const redirect = approvalOf(await call("ann", "echo hello > out.txt"));
    const record = (await ctx.approvals.repository.get(redirect))!;
    expect(ctx.approvals.view(record).allowAlways).toBe(false);
    await expect(
      ctx.approvals.decide("ann", redirect, { decision: "allow_always", decidedBy: "ann" }),
    ).rejects.toMatchObject({ code: "invalid_settings", message: expect.stringContaining("redirects output") });
  });

  it("a locked ask is a floor: allow rules are refused (422 naming the lock) and old ones no longer loosen it", async () => {
    // An allow rule of the user's from before the lock…
    await ctx.settings.update("bob", "bash", { enabled: true }, { admin: true, lock: false });
    await ctx.settings.update("bob", "bash", { parameters: { approvalRules: [{ decision: "allow", match: "echo" }] } });
    expect((await call("bob", "echo before")).ok).toBe(true);
    // …then an admin locks approval: ask.
    await ctx.settings.update("bob", "bash", { parameters: { approval: "ask" } }, { admin: true });
    const held = await call("bob", "echo after");
    expect(held.ok).toBe(false);
    expect(held.ok ? "" : held.error.message).toContain("locked the approval setting");
    await expect(
      ctx.settings.update("bob", "bash", {
        parameters: { approvalRules: [{ decision: "allow", match: "ls" }] },
      }),
    ).rejects.toMatchObject({ code: "invalid_settings", details: { rule: "admin_locked" } });
    // Stricter rules are fine.
    await ctx.settings.update("bob", "bash", { parameters: { approvalRules: [{ decision: "deny", match: "rm" }] } });
    const id = approvalOf(await call("bob", "echo again"));
    expect(ctx.approvals.view((await ctx.approvals.repository.get(id))!).allowAlways).toBe(false);
    await expect(ctx.approvals.decide("bob", id, { decision: "allow_always", decidedBy: "bob" })).rejects.toMatchObject(
      { code: "invalid_settings", message: expect.stringContaining("locked at ask") },
    );
  });

  it("a locked quality locks the switch that would undo it", async () => {
    await ctx.settings.update("cy", "generate_image", { parameters: { defaultQuality: "low" } }, { admin: true });
    const descriptor = await ctx.settings.get("cy", "generate_image");
    expect(descriptor.parameters.letAiDecideQuality).toBe(false);
    expect(descriptor.lockedKeys).toEqual(expect.arrayContaining(["defaultQuality", "letAiDecideQuality"]));
  });

  it("the re-check before an approved call runs asks again when a rule has since turned to ask", async () => {
    await ctx.settings.update("dee", "bash", { enabled: true }, { admin: true, lock: false });
    const id = approvalOf(await call("dee", "echo hi"));
    await ctx.approvals.decide("dee", id, { decision: "allow_once", decidedBy: "dee" });
    await ctx.settings.update("dee", "bash", { parameters: { approvalRules: [{ decision: "ask", match: "echo" }] } });
    const record = (await ctx.approvals.repository.get(id))!;
    const rerun = await runGatedCall("bash", JSON.stringify({ command: "echo hi" }), {
      runtime: ctx.runtime,
      approvals: ctx.approvals,
      userId: "dee",
      workingDirectory: dir,
      approvalId: record.id,
    });
    expect(rerun.ok).toBe(false);
    expect(rerun.ok ? "" : rerun.error.message).toContain("asks about this call for another reason");
  });
});
