/**
 * The settings both SQL tools (sql_schema, sql_query) declare, and their model-facing source list: the declared
 * data sources this user may use, each with its dialect and description.
 */
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type { EffectiveToolSettings, ToolParameterDescriptor } from "../../core/types.js";
import { currentDataSources } from "./sources.js";
import type { DataSourceSummary } from "./types.js";

/** Budget of one call; the statement is stopped on the server when it is exceeded. */
export const SQL_TIMEOUT_SECONDS: ToolParameterDescriptor = {
  ...TIMEOUT_SECONDS_DESCRIPTOR,
  description:
    "Budget of one call; the statement is stopped on the server (statement timeout, cancel or kill) when it is exceeded.",
  min: 1,
  max: 600,
  default: 30,
};

/** Most rows one query returns; the statement is stopped after that many, the rest never read. */
export const SQL_MAX_ROWS: ToolParameterDescriptor = {
  name: "maxRows",
  type: "integer",
  description:
    "Most rows one query returns (a model may ask for fewer); the statement is stopped there and the rest is never read.",
  min: 1,
  max: 10_000,
  default: 500,
};

/** The data sources this user may use (admin only); empty means every declared source. */
export const SQL_ALLOWED_SOURCES: ToolParameterDescriptor = {
  name: "allowedSources",
  type: "string[]",
  description:
    "Names of the data sources (config file dataSources, or `toolhost data-sources add`) this user may query; empty means every declared source.",
  min: 0,
  max: 200,
  default: [],
  adminOnly: true,
};

/** sql_query's own settings, in display order. */
export const SQL_QUERY_SETTINGS: ToolParameterDescriptor[] = [SQL_TIMEOUT_SECONDS, SQL_MAX_ROWS, SQL_ALLOWED_SOURCES];

/** sql_schema's own settings, in display order. */
export const SQL_SCHEMA_SETTINGS: ToolParameterDescriptor[] = [SQL_TIMEOUT_SECONDS, SQL_ALLOWED_SOURCES];

/** Whether the allowedSources setting `allowed` (empty: all) lets a user use the source `name`. */
export function sourceAllowed(allowed: readonly string[], name: string): boolean {
  return allowed.length === 0 || allowed.includes(name);
}

/** The sources this user may use (as last listed in this process), for a tool description. */
export function describeSources(settings: EffectiveToolSettings): string {
  const allowed = Array.isArray(settings.values.allowedSources) ? (settings.values.allowedSources as string[]) : [];
  const sources = currentDataSources().filter((s) => sourceAllowed(allowed, s.name));
  if (sources.length === 0) return " No data source is declared for you yet.";
  return ` Data sources: ${sources.map(describeOne).join("; ")}.`;
}

function describeOne(s: DataSourceSummary): string {
  const dialect = s.dialect === "postgres" ? "PostgreSQL" : s.dialect === "mysql" ? "MySQL/MariaDB" : "SQLite";
  return `"${s.name}" (${dialect}${s.description ? `: ${s.description.slice(0, 300)}` : ""})`;
}
