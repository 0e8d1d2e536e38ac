/**
 * `toolhost data-sources list|add|remove|test`: the databases the SQL tools (sql_schema, sql_query) may read. `list`
 * shows the declared sources (config file `dataSources` and stored ones) with their URLs' passwords replaced by
 * `***`; `add` stores one (the URL as an argument, or from an environment variable with --url-env so the password
 * stays out of the shell history) and tests it; `remove` deletes a stored one; `test` connects and prints each
 * source's server version or why it is unreachable.
 */
import type { Command } from "commander";
import type { DataSourcesService } from "../../app/data-sources.js";
import { createAppContext } from "../app-context.js";
import { CliError, print, table } from "../util.js";

async function withService<T>(fn: (service: DataSourcesService) => Promise<T>): Promise<T> {
  const [{ DataSourcesService }, { DataSourceRepository }] = await Promise.all([
    import("../../app/data-sources.js"),
    import("../../storage/data-source-repository.js"),
  ]);
  const ctx = await createAppContext();
  try {
    return await fn(new DataSourcesService(ctx.dataSources, new DataSourceRepository(ctx.database.db)));
  } finally {
    await ctx.close();
  }
}

/** Registers `data-sources` and its subcommands on the program. */
export function registerDataSourcesCommand(program: Command): void {
  const group = program
    .command("data-sources")
    .description("Manage the databases the SQL tools read (PostgreSQL, MySQL/MariaDB, SQLite), read-only.");

  group
    .command("list")
    .description("List the declared data sources (config file `dataSources` and stored ones), without passwords.")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) =>
      withService(async (service) => {
        const { sources, errors } = await service.list();
        for (const error of errors) process.stderr.write(`warning: ${error.name}: ${error.message}\n`);
        if (opts.json) return print({ sources, errors });
        if (sources.length === 0) return print("No data sources declared. Add one: toolhost data-sources add NAME URL");
        print(
          table([
            ["NAME", "DIALECT", "ORIGIN", "LOCATION", "DESCRIPTION"],
            ...sources.map((s) => [s.name, s.dialect, s.origin, s.location, s.description ?? ""]),
          ]),
        );
      }),
    );

  group
    .command("add")
    .description("Store a data source (postgres://…, mysql://… or sqlite:/absolute/path.db) and test it.")
    .argument("<name>", "source name (letters, digits, _ or -)")
    .argument("[url]", "the source's URL (or use --url-env)")
    .option("--url-env <VAR>", "read the URL from this environment variable (keeps the password out of the history)")
    .option("-d, --description <text>", "what the data is, for the model")
    .action(async (name: string, url: string | undefined, opts: { urlEnv?: string; description?: string }) => {
      if ((url === undefined) === (opts.urlEnv === undefined)) throw new CliError("Give either a URL or --url-env.");
      const value = url ?? process.env[opts.urlEnv as string];
      if (!value) throw new CliError(`The environment variable ${opts.urlEnv} is empty or not set.`);
      await withService(async (service) => {
        const added = await service.add(name, {
          url: value,
          ...(opts.description ? { description: opts.description } : {}),
        });
        const [result] = await service.test(added.name);
        print(
          `Added ${added.name} (${added.dialect}, ${added.location}): ${result?.reachable ? `reachable, ${result.version}` : `not usable — ${result?.error}`}`,
        );
        print(
          "Enable the tools for a user: toolhost settings set sql_query --enable (and sql_schema; -u USER for another user).",
        );
        if (!result?.reachable) {
          // Stored all the same (its server may be down for now): say so, or the next `add` meets a taken name.
          print(
            `It is stored all the same: fix the cause, then check it with toolhost data-sources test ${added.name}, or remove it with toolhost data-sources remove ${added.name}.`,
          );
          process.exitCode = 1;
        }
      });
    });

  group
    .command("remove")
    .description("Remove a stored data source (sources in the config file are removed by editing it).")
    .argument("<name>")
    .action(async (name: string) =>
      withService(async (service) => {
        await service.remove(name);
        print(`Removed ${name}.`);
      }),
    );

  group
    .command("test")
    .description(
      "Connect to the data sources (or one) and print each server's version or why it cannot be used (unreachable, refused, not read-only).",
    )
    .argument("[name]", "only this source")
    .option("--json", "print JSON")
    .action(async (name: string | undefined, opts: { json?: boolean }) =>
      withService(async (service) => {
        const results = await service.test(name);
        if (opts.json) print({ sources: results });
        else if (results.length === 0) print("No data sources declared.");
        else
          for (const r of results)
            print(
              `${r.name} (${r.dialect}, ${r.location}): ${r.reachable ? `reachable, ${r.version}` : `not usable — ${r.error}`}`,
            );
        if (results.some((r) => !r.reachable)) process.exitCode = 1;
      }),
    );
}
