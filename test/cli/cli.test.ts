import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { COMMAND_NAMES, commandNamedBy } from "../../src/cli/util.js";
import { BIN, runCli, runCliInProcess } from "../helpers/cli.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";

describe("toolhost CLI: the built bin as a real process", () => {
  const dataDir = tempDir();
  const env = { TOOLHOST_DATA_DIR: dataDir };

  it("call get_current_datetime prints the +05:45 offset for Asia/Kathmandu", async () => {
    const run = await runCli(["call", "get_current_datetime", '{"timezone":"Asia/Kathmandu","locale":"ne-NP"}'], env);
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout);
    expect(result.offset).toBe("+05:45");
    expect(result.local).toMatch(/\+05:45$/);
  });

  it("a one-tool call whose result is cut names the enabled reader of its spill, which reads it", async () => {
    // `call bash` loads bash's module alone; the reading tools join only when a result is cut.
    const cwd = tempDir();
    expect((await runCliInProcess(["settings", "set", "bash", "--enable"], env)).code).toBe(0);
    const run = await runCli(["call", "-y", "bash", '{"command":"seq 1 100000"}', "--cwd", cwd], env);
    expect(run.code).toBe(0);
    const [field] = JSON.parse(run.stdout).outputTruncated.fields;
    expect(field.howToRead).toMatch(
      /^Read the rest with read_file \{"path": "spill:[0-9a-f]{24}", "startLine": \d+, "maxLines": 500\}/,
    );
    // The spill is read by a later command; a second process would prove nothing more (main(argv) in this process).
    const read = await runCliInProcess(
      ["call", "read_file", JSON.stringify({ path: field.spillFile, startLine: 99_999, maxLines: 5 }), "--cwd", cwd],
      env,
    );
    expect(read.code).toBe(0);
    expect(JSON.parse(read.stdout).content).toBe(" 99999\t99999\n100000\t100000");
  });

  it("--version and a parser error exit 0 and 2 from the process itself", async () => {
    expect((await runCli(["--version"], env)).code).toBe(0);
    const bogus = await runCli(["bogus-cmd"], env);
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toMatch(/error/);
  });
});

// The same program, run by main(argv) inside this process: parsers, help, usage errors and command rules.
describe("toolhost CLI: commands and parsers (in-process)", () => {
  const dataDir = tempDir();
  const env = { TOOLHOST_DATA_DIR: dataDir };
  const runCli = runCliInProcess;

  it.each([
    ['{"timezone":"Mars/Olympus"}', /Mars\/Olympus/],
    ['{"timezone":42}', /"timezone": must be string, got number 42/],
  ])("call with %s exits 1 with validation_failed", async (json, message) => {
    const run = await runCli(["call", "get_current_datetime", json], env);
    expect(run.code).toBe(1);
    // Reported once: one stderr line, nothing on stdout.
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/^error: validation_failed: /);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(message);
  });

  it("approvals deny refuses --always (only an allow is stored as a rule); allow offers it", async () => {
    const deny = await runCli(["approvals", "deny", "some-id", "--always"], env);
    expect(deny.code).toBe(2);
    expect(deny.stderr).toMatch(/unknown option '--always'/);
    expect((await runCli(["approvals", "allow", "--help"], env)).stdout).toMatch(/--always/);
  });

  it("an unknown tool exits 1 with not_found", async () => {
    const run = await runCli(["call", "no_such_tool"], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/not_found/);
    // An operator's message: where to find the tools, not the model's "call one of the tools you were given".
    expect(run.stderr).toMatch(/Unknown tool "no_such_tool"\. List the tools with `toolhost tools`/);
    expect(run.stderr).not.toContain("you were given");
  });

  it("call --chat refuses a chat id the chat API would refuse, and creates no chat", async () => {
    for (const id of ["../x", "..", "my chat"]) {
      const run = await runCliInProcess(["call", "get_current_datetime", "{}", "--chat", id, "-y"], env);
      expect(run.code, id).toBe(2);
      expect(run.stderr).toMatch(/error: A chat id uses 1–128 letters, digits/);
    }
    const listed = await runCliInProcess(["chats", "list", "--json"], env);
    expect(JSON.parse(listed.stdout).chats).toEqual([]);
  });

  it("settings set applies the API's rules and is seen by the server's context", async () => {
    const bad = await runCli(["settings", "set", "get_current_datetime", "colour=red"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/invalid_settings: Unknown parameter "colour"/);

    const ok = await runCli(
      ["settings", "set", "get_current_datetime", "defaultTimezone=Asia/Tokyo", "--user", "ana"],
      env,
    );
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ enabled: true, parameters: { defaultTimezone: "Asia/Tokyo" } });

    const called = await runCli(["call", "get_current_datetime", "{}", "--user", "ana"], env);
    expect(JSON.parse(called.stdout).offset).toBe("+09:00");

    const ctx = await createAppContext({ dataDir, logger: recordingLogger() });
    try {
      expect((await ctx.settings.get("ana", "get_current_datetime")).parameters.defaultTimezone).toBe("Asia/Tokyo");
      expect((await ctx.settings.get("local", "get_current_datetime")).parameters.defaultTimezone).toBe("UTC");
    } finally {
      await ctx.close();
    }

    const off = await runCli(["settings", "set", "get_current_datetime", "--disable", "--user", "ana"], env);
    expect(off.code).toBe(0);
    // No image-provider key anywhere: generate_image is enabled but unavailable, and the listing says why.
    const noKeys = {
      OPENAI_API_KEY: "",
      GEMINI_API_KEY: "",
      GOOGLE_API_KEY: "",
      TOOLHOST_CONFIG: join(dataDir, "none"),
    };
    const tools = await runCli(["tools", "--user", "ana"], { ...env, ...noKeys });
    expect(tools.stdout).toMatch(/get_current_datetime\s+no\s+system/);
    expect(tools.stdout).toMatch(/generate_image\s+unavailable\s/);
    expect(tools.stdout).toMatch(/generate_image: No image provider has an API key\. .*OPENAI_API_KEY/);
    const refused = await runCli(["call", "get_current_datetime", "{}", "--user", "ana"], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/access_denied/);
  });

  it("token create prints a token the server accepts", async () => {
    const run = await runCli(["token", "create", "--user", "bob"], env);
    expect(run.code).toBe(0);
    const token = run.stdout.trim();
    expect(token).toMatch(/^th_/);
    const ctx = await createAppContext({ dataDir, logger: recordingLogger() });
    try {
      expect(await ctx.tokens.authenticate(token)).toBe("bob");
    } finally {
      await ctx.close();
    }
  });

  it.each([
    [["bogus-cmd"]],
    [["call"]],
    [["call", "get_current_datetime", "{}", "--bogus"]],
    [["tools", "--user"]],
    [["tools", "--user", "x/../y z"]],
    [["chat", "hi", "--provider", "bogus"]],
  ])("parser error %j exits 2", async (args) => {
    const run = await runCli(args, env);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/error/);
  });

  it("--version exits 0; an unsupported database URL is a clear error", async () => {
    const version = await runCli(["--version"], env);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const run = await runCli(["tools"], { ...env, TOOLHOST_DATABASE_URL: "mysql://x" });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/Unsupported database URL "mysql:\/\/x"/);
  });

  it("usage errors exit 2 and --help answers", async () => {
    const help = await runCli(["--help"], env);
    expect(help.code).toBe(0);
    // main() builds only the command a command line names (commandNamedBy): the list must name every command.
    const listed = help.stdout
      .slice(help.stdout.indexOf("Commands:"))
      .split("\n")
      .slice(1)
      .map((line) => /^ {2}([a-z-]+)/.exec(line)?.[1])
      .filter((name): name is string => name !== undefined && name !== "help");
    expect(listed).toEqual([...COMMAND_NAMES]);
    expect(commandNamedBy(["call", "x"])).toBe("call");
    expect(commandNamedBy(["--version"])).toBe("");
    expect(commandNamedBy(["help", "call"])).toBeUndefined();
    const usage = await runCli(["settings", "set", "get_current_datetime"], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/Nothing to change/);
    const badCwd = await runCli(["call", "list_directory", '{"path":"."}', "--cwd", "/definitely/not/here"], env);
    expect(badCwd.code).toBe(2);
  });

  it.each([
    ["{broken", /not valid JSON/],
    ["[1,2]", /must be a JSON object, got an array/],
    ['"UTC"', /must be a JSON object, got string/],
  ])("call with malformed arguments %s is a usage error: exit 2, nothing on stdout", async (json, message) => {
    const run = await runCli(["call", "get_current_datetime", json], env);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(message);
  });
});

describe("toolhost CLI: the process and its stdout", () => {
  const env = { TOOLHOST_DATA_DIR: tempDir() };

  it("output into a closed pipe ends quietly with status 0 (| head), not with an EPIPE stack", async () => {
    const work = tempDir();
    writeFileSync(join(work, "big.txt"), `${"x".repeat(200)}\n`.repeat(3000));
    // The reader is gone before the CLI writes: `true` exits at once.
    const cli = `"${process.execPath}" "${BIN}" call read_file '{"path":"big.txt"}' --cwd "${work}"`;
    const piped = spawnSync("bash", ["-c", `${cli} | true; echo "status=\${PIPESTATUS[0]}" >&2`], {
      env: { ...process.env, ...env },
      encoding: "utf8",
    });
    expect(piped.stderr).toContain("status=0");
    expect(piped.stderr).not.toMatch(/EPIPE|at .*\(/);
    // The handler itself, with the process kept alive after the failed write (where Node would crash).
    const util = fileURLToPath(new URL("../../dist/cli/util.js", import.meta.url));
    const script = `import(${JSON.stringify(util)}).then((m) => { m.exitQuietlyOnClosedStdout(); process.stdout.write("x".repeat(300000)); setTimeout(() => {}, 2000); });`;
    const direct = spawnSync(
      "bash",
      ["-c", `"${process.execPath}" -e '${script}' | true; echo "status=\${PIPESTATUS[0]}" >&2`],
      {
        encoding: "utf8",
      },
    );
    expect(direct.stderr).toContain("status=0");
    expect(direct.stderr).not.toContain("EPIPE");
  });
});

describe("serve says which option to change when it cannot listen", () => {
  it("names --host or TOOLHOST_HOST for an address it cannot bind, and --port for a port in use", async () => {
    const env = { TOOLHOST_DATA_DIR: tempDir("toolhost-serve-listen-") };
    // A real process, so the logger's own output (fd 2) is seen: no "bound to a non-loopback address" warning for
    // a host that was never bound.
    const badHost = await runCli(["serve", "--port", "0", "--host", "999.1.1.1"], {
      ...env,
      TOOLHOST_LOG_LEVEL: "warn",
    });
    expect(badHost.code).toBe(1);
    expect(badHost.stderr).toMatch(/Cannot listen on host "999\.1\.1\.1" \(--host\)/);
    expect(badHost.stderr).not.toMatch(/getaddrinfo|non-loopback/);
    const fromEnv = await runCliInProcess(["serve", "--port", "0"], { ...env, TOOLHOST_HOST: "999.1.1.1" });
    expect(fromEnv.code).toBe(1);
    expect(fromEnv.stderr).toMatch(/\(TOOLHOST_HOST\)/);
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    try {
      const port = (holder.address() as AddressInfo).port;
      const taken = await runCliInProcess(["serve", "--port", String(port)], env);
      expect(taken.code).toBe(1);
      expect(taken.stderr).toMatch(new RegExp(`Port ${port} on 127\\.0\\.0\\.1 is already in use.*--port`));
    } finally {
      holder.close();
    }
  });
});
