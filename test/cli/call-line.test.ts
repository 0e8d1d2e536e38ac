/**
 * `toolhost call` reads its usual command lines without commander (a process per call then loads only what the call
 * needs), and `--version` alone is answered without it too. What that reader accepts must mean exactly what commander makes of it, and everything else must be left
 * to commander, which reports errors and prints help as before. In-process: no CLI is started.
 */
import { describe, expect, it } from "vitest";
import { type CallOptions, parseCallCommandLine } from "../../src/cli/commands/call.js";
import { buildProgram } from "../../src/cli/program.js";
import { runCliInProcess } from "../helpers/cli.js";

/** What commander passes to `call`'s action for `args`, with the action replaced by a recorder. */
async function commanderReads(args: string[]): Promise<{ tool: string; json: string; options: CallOptions }> {
  const program = await buildProgram("call");
  const call = program.commands.find((c) => c.name() === "call");
  let seen: { tool: string; json: string; options: CallOptions } | undefined;
  call?.action((tool: string, json: string, options: CallOptions) => {
    seen = { tool, json, options: { ...options } };
  });
  await program.parseAsync(["node", "toolhost", ...args]);
  if (!seen) throw new Error("the action did not run");
  return seen;
}

describe("toolhost call without commander", () => {
  const accepted: string[][] = [
    ["call", "get_current_datetime"],
    ["call", "get_current_datetime", '{"timezone":"UTC"}'],
    ["call", "get_current_datetime", ""],
    ["call", "read_file", '{"path":"a b.txt"}', "--cwd", "/tmp/x y", "--user", "ana"],
    ["call", "--user=ana.b@c", "read_file", "--cwd=/srv", '{"path":"."}'],
    ["call", "-u", "ana", "-y", "bash", '{"command":"ls"}', "--chat", "c1"],
    ["call", "bash", "--yes", "--approval", "ap_1", '{"command":"ls"}'],
    ["call", "mcp__files__read", "{}", "--cwd", ""],
  ];
  for (const args of accepted) {
    it(`reads ${JSON.stringify(args)} as commander does`, async () => {
      const fast = parseCallCommandLine(args);
      expect(fast).toBeDefined();
      expect(fast).toEqual(await commanderReads(args));
    });
  }

  const declined: string[][] = [
    ["tools"],
    ["call"],
    ["call", "--help"],
    ["call", "-h"],
    ["call", "get_current_datetime", "{}", "extra"],
    ["call", "get_current_datetime", "--", "{}"],
    ["call", "get_current_datetime", "--unknown"],
    ["call", "get_current_datetime", "-x"],
    ["call", "get_current_datetime", "-yu", "ana"],
    ["call", "get_current_datetime", "-uana"],
    ["call", "get_current_datetime", "--user"],
    ["call", "get_current_datetime", "--user", "-y"],
    ["call", "get_current_datetime", "--user", "bad user"],
    ["call", "get_current_datetime", "--user", ".."],
    ["call", "get_current_datetime", "--user=", "{}"],
    ["call", "get_current_datetime", "--user", "a", "--user", "b"],
    ["call", "get_current_datetime", "-y", "--yes"],
    ["call", "get_current_datetime", "--yes=1"],
    ["call", "-", "{}"],
    ["call", "get_current_datetime", "-5"],
    ["call", "get_current_datetime", "--constructor", "x"],
  ];
  for (const args of declined) {
    it(`leaves ${JSON.stringify(args)} to commander`, () => {
      expect(parseCallCommandLine(args)).toBeUndefined();
    });
  }
});

describe("toolhost --version without commander", () => {
  it("prints what commander prints for it, and exits 0", async () => {
    const program = await buildProgram("");
    let printed = "";
    program.configureOutput({ writeOut: (text) => (printed += text) });
    await expect(program.parseAsync(["node", "toolhost", "--version"])).rejects.toMatchObject({
      code: "commander.version",
    });
    for (const flag of ["--version", "-V"]) {
      const run = await runCliInProcess([flag]);
      expect(run).toMatchObject({ code: 0, stdout: printed, stderr: "" });
    }
  });
});
