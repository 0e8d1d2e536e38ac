/**
 * The SQL tools' implementation, loaded on their first call: find the source the user named among those they may
 * use, get its driver from the host's data-source service, and run the schema listing or the query within the
 * call's settings (timeoutSeconds, maxRows) and signal.
 */
import { ToolArgumentError, ToolExecutionError } from "../../core/errors.js";
import { integerSetting, stringListSetting } from "../../core/settings-declaration.js";
import type { ToolContext } from "../../core/types.js";
import { SQL_ALLOWED_SOURCES, SQL_MAX_ROWS, SQL_TIMEOUT_SECONDS, sourceAllowed } from "./settings.js";
import {
  DATA_SOURCES_SERVICE,
  type DataDriver,
  type DataSourceService,
  type NamedDataSource,
  type QueryResult,
  type SchemaTable,
} from "./types.js";

/** Arguments of sql_query. */
export interface SqlQueryArgs {
  source: string;
  sql: string;
  params?: unknown[];
  maxRows?: number;
}

/** Arguments of sql_schema. */
export interface SqlSchemaArgs {
  source: string;
  table?: string;
}

/** What sql_schema returns. */
export interface SqlSchemaResult {
  source: string;
  dialect: string;
  tables: SchemaTable[];
}

/**
 * The source named `name` if this user may use it, with its driver. Throws ToolArgumentError (validation_failed)
 * naming the sources the user may use when it is unknown or not allowed, ToolExecutionError when the host has no
 * data-source service.
 */
export async function resolveSource(
  name: string,
  context: ToolContext,
): Promise<{ source: NamedDataSource; driver: DataDriver }> {
  const service = context.services[DATA_SOURCES_SERVICE] as DataSourceService | undefined;
  if (!service) {
    throw new ToolExecutionError("This host has no data sources configured (no data-source service).");
  }
  const allowed = stringListSetting(context.settings.values, SQL_ALLOWED_SOURCES);
  const usable = (await service.list()).filter((s) => sourceAllowed(allowed, s.name));
  const source = usable.find((s) => s.name === name);
  if (!source) {
    const names = usable.map((s) => `"${s.name}"`).join(", ");
    throw new ToolArgumentError(
      `Unknown data source ${JSON.stringify(name.slice(0, 100))}. ${usable.length === 0 ? "No data source is available to you." : `Available: ${names}.`}`,
      { argument: "source", available: usable.map((s) => s.name) },
    );
  }
  return { source, driver: await service.driver(source) };
}

/** Runs sql_query. */
export async function runSqlQuery(args: unknown, context: ToolContext): Promise<QueryResult> {
  const { source: name, sql, params, maxRows } = args as SqlQueryArgs;
  if (!sql.trim()) throw new ToolArgumentError('Invalid argument "sql": it is empty.', { argument: "sql" });
  const { driver } = await resolveSource(name, context);
  const cap = integerSetting(context.settings.values, SQL_MAX_ROWS);
  return driver.query({
    sql,
    params: params ?? [],
    maxRows: Math.min(maxRows ?? cap, cap),
    timeoutMs: integerSetting(context.settings.values, SQL_TIMEOUT_SECONDS) * 1000,
    signal: context.signal,
  });
}

/** Runs sql_schema. */
export async function runSqlSchema(args: unknown, context: ToolContext): Promise<SqlSchemaResult> {
  const { source: name, table } = args as SqlSchemaArgs;
  const { source, driver } = await resolveSource(name, context);
  const tables = await driver.schema({
    ...(table ? { table } : {}),
    timeoutMs: integerSetting(context.settings.values, SQL_TIMEOUT_SECONDS) * 1000,
    signal: context.signal,
  });
  if (table && tables.length === 0) {
    throw new ToolArgumentError(
      `Data source "${source.name}" has no table ${JSON.stringify(table.slice(0, 100))}; call sql_schema without "table" to list them.`,
      { argument: "table" },
    );
  }
  return { source: source.name, dialect: source.dialect, tables };
}
