/**
 * sql_query: runs one read-only SQL statement on a declared data source (PostgreSQL, MySQL/MariaDB or SQLite) and
 * returns `{columns, rows, rowCount, truncated, durationMs}`. The database enforces read-only access (read-only
 * transactions or connections), a server-side statement timeout and one statement per call; rows stop at maxRows.
 * Disabled by default; approval defaults to allow, since the tool cannot write. See src/tools/data/.
 */
import { defineTool, lazyExecute } from "../../core/settings-declaration.js";
import type { EffectiveToolSettings, ToolDefinition } from "../../core/types.js";
import { describeSources, SQL_MAX_ROWS, SQL_QUERY_SETTINGS } from "../data/settings.js";

const DESCRIPTION =
  "Runs ONE read-only SQL statement (SELECT, WITH, EXPLAIN, SHOW…) on a data source and returns {columns, rows, rowCount, truncated, durationMs}. Writes are refused by the database. Bind values with `params` instead of quoting them into the SQL: $1, $2… for PostgreSQL, ? for MySQL/MariaDB and SQLite. Values come back JSON-safe: big integers and decimals as strings, dates as ISO-8601 text, bytes as base64. Use sql_schema first to learn the tables.";

const definition: ToolDefinition = {
  name: "sql_query",
  description: DESCRIPTION,
  parameters: {
    type: "object",
    properties: {
      source: { type: "string", description: "Name of the data source." },
      sql: { type: "string", description: "One SQL statement." },
      params: {
        type: "array",
        description:
          "Values bound to the statement's placeholders, in order. Pass a JSON value as its text (e.g. with $1::jsonb).",
        items: { type: ["string", "number", "boolean", "null"] },
      },
      maxRows: {
        type: "integer",
        description: "Most rows to return (at most the user's maxRows setting, default 500).",
        minimum: 1,
        maximum: SQL_MAX_ROWS.max,
      },
    },
    required: ["source", "sql"],
  },
};

/** sql_query's definition for these settings: the description names the sources this user may use. */
export function buildSqlQueryDefinition(settings: EffectiveToolSettings): ToolDefinition {
  return { ...definition, description: DESCRIPTION + describeSources(settings) };
}

export const sqlQueryTool = defineTool({
  definition,
  buildDefinition: buildSqlQueryDefinition,
  settings: {
    title: "Database query",
    description: "Lets the model run read-only SQL on the declared data sources.",
    category: "system",
    annotations: { readOnlyHint: true, destructiveHint: false, openWorldHint: false },
    enabledByDefault: false,
    canDisable: true,
    parameterDescriptors: SQL_QUERY_SETTINGS,
  },
  approval: { default: "allow" },
  execute: lazyExecute(() => import("../data/engine.js").then((m) => m.runSqlQuery)),
});
