/**
 * sql_schema: lists the tables of a declared data source (PostgreSQL, MySQL/MariaDB or SQLite) with their columns
 * (name, type, nullable) and row estimates; with `table`, that table's indexes and foreign keys too. Read-only by
 * construction (see src/tools/data/). Disabled by default; an admin declares the sources (config file
 * `dataSources`, `toolhost data-sources add`) and may restrict each user's (`allowedSources`).
 */
import { defineTool, lazyExecute } from "../../core/settings-declaration.js";
import type { EffectiveToolSettings, ToolDefinition } from "../../core/types.js";
import { describeSources, SQL_SCHEMA_SETTINGS } from "../data/settings.js";

const DESCRIPTION =
  "Lists the tables of a database the admin declared as a data source: columns (name, type, nullable) and row estimates; with `table`, also its indexes and foreign keys. Call it before writing SQL for sql_query.";

const definition: ToolDefinition = {
  name: "sql_schema",
  description: DESCRIPTION,
  parameters: {
    type: "object",
    properties: {
      source: { type: "string", description: "Name of the data source." },
      table: {
        type: "string",
        description: "One table (`name` or `schema.name`) to describe with its indexes and foreign keys.",
      },
    },
    required: ["source"],
  },
};

/** sql_schema's definition for these settings: the description names the sources this user may use. */
export function buildSqlSchemaDefinition(settings: EffectiveToolSettings): ToolDefinition {
  return { ...definition, description: DESCRIPTION + describeSources(settings) };
}

export const sqlSchemaTool = defineTool({
  definition,
  buildDefinition: buildSqlSchemaDefinition,
  settings: {
    title: "Database schema",
    description: "Lets the model list the tables and columns of the declared data sources (read-only).",
    category: "system",
    annotations: { readOnlyHint: true, destructiveHint: false, openWorldHint: false },
    enabledByDefault: false,
    canDisable: true,
    parameterDescriptors: SQL_SCHEMA_SETTINGS,
  },
  approval: { default: "allow" },
  execute: lazyExecute(() => import("../data/engine.js").then((m) => m.runSqlSchema)),
});
