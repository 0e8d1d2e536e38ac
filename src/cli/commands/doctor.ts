/** `toolhost doctor`: checks this installation and prints one line per check; exit 0 healthy, 1 not. */
import type { Command } from "commander";
import { createAppContext } from "../app-context.js";

/** How long doctor waits for external MCP servers to connect (ms). */
const MCP_WAIT_MS = 10_000;

/** Registers `doctor` on the program. */
export function registerDoctorCommand(program: Command): void {
  program
    .command("doctor")
    .description(
      "Check the installation: data directory, database and migrations, providers (never their keys), ripgrep, shells, chat roots, admins, MCP servers. Exit 0 when healthy, 1 when not.",
    )
    .option("--json", "print the report as JSON")
    .option("--no-mcp", "do not connect to the configured external MCP servers")
    .action(async (opts: { json?: boolean; mcp: boolean }) => {
      const { formatDoctorReport, runDoctor } = await import("../doctor.js");
      const report = await runDoctor({
        openContext: (env) => {
          // Parts of the context read the process's environment, so the malformed variables the configuration
          // check reported are unset here too (this process ends after the report).
          for (const [name, value] of Object.entries(env)) if (process.env[name] !== value) process.env[name] = value;
          return createAppContext({ env });
        },
        ...(opts.mcp
          ? {
              mcpStatuses: async (ctx) => {
                const { createMcpClientManager } = await import("../../mcp/client/index.js");
                const manager = createMcpClientManager(ctx);
                try {
                  await manager.start();
                  await manager.settled(MCP_WAIT_MS);
                  return manager
                    .statuses()
                    .map((s) => ({ name: s.name, state: s.state, tools: s.tools.length, lastError: s.lastError }));
                } finally {
                  await manager.close();
                }
              },
            }
          : {}),
      });
      process.stdout.write(`${opts.json ? JSON.stringify(report, null, 2) : formatDoctorReport(report)}\n`);
      process.exitCode = report.healthy ? 0 : 1;
    });
}
