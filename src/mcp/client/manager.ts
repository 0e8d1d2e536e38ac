/**
 * The MCP client side of Toolhost: connects to the configured external MCP servers and imports their tools into
 * the registry, where they reach settings, mappers, the loop, sub-agents and Toolhost's own MCP server like
 * built-ins (see imported-tool.ts for the tool itself).
 *
 * Lifecycle: every server connects in the background and in parallel ({@link McpClientManager.start} returns at
 * once, so a chat never waits); connect + initialize + the first list must finish within `connectTimeoutMs`
 * (10 s). The tool list is cached between turns and refreshed when the server says it changed
 * (`notifications/tools/list_changed`, coalesced: one refresh runs at a time, and a notification during a refresh
 * causes exactly one more). A server that exits or drops its connection is marked `failed` with the last error and
 * the tail of its stderr; its tools stay registered and a later call reconnects once before giving up.
 *
 * Security: a stdio server starts with a minimal environment (PATH, HOME, USER, LOGNAME, LANG, LC_*, TERM, SHELL,
 * TMPDIR, TZ) plus its configured `env`, never Toolhost's own variables (provider keys, database URL); its stderr
 * goes to a bounded buffer.
 */
import { createHash } from "node:crypto";
import type { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import type { ToolRegistryStore } from "../../core/registry.js";
import type { Logger } from "../../core/types.js";
import { VERSION } from "../../version.js";
import {
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  type McpServerConfig,
  type McpServerSource,
  type NamedMcpServerConfig,
} from "./config.js";
import type { RemoteTool } from "./imported-tool.js";
import { importedToolName } from "./naming.js";

/** Connection state of one server. */
export type McpServerState = "connecting" | "connected" | "failed" | "disabled";

/** One imported tool as status shows it. */
export interface ImportedToolStatus {
  /** Registry name (`mcp__<server>__<tool>`). */
  name: string;
  /** Name on the server. */
  remoteName: string;
  /** sha256 of the tool's name, description and input schema as announced. */
  contentHash: string;
  annotations?: Record<string, unknown>;
}

/** Status of one configured server, as the admin API and CLI show it. */
export interface McpServerStatus {
  name: string;
  source: McpServerSource;
  transport: "stdio" | "http";
  /** The command line or URL (header and env values are never shown). */
  target: string;
  trusted: boolean;
  state: McpServerState;
  lastError: string | null;
  /** Last lines the server wrote to stderr (stdio servers; bounded). */
  stderrTail: string;
  /** Tools skipped or renamed and why (a bad schema, a name collision). */
  warnings: string[];
  tools: ImportedToolStatus[];
  serverInfo: { name: string; version: string } | null;
  protocolVersion: string | null;
  connectedAt: string | null;
}

/**
 * What a connection needs beyond this module: the MCP client SDK, zod, and the imported-tool builder (with ajv for
 * the servers' schemas). Loaded on the first connection, so a process with no external server configured (or one
 * that never connects) does not load them; the loaded copy is kept for the synchronous applyTools.
 */
async function loadClientSdk() {
  const [sdk, stdio, z, importedTool, schema] = await Promise.all([
    import("@modelcontextprotocol/client"),
    import("@modelcontextprotocol/client/stdio"),
    import("zod/v4"),
    import("./imported-tool.js"),
    import("./schema.js"),
  ]);
  return {
    Client: sdk.Client,
    StreamableHTTPClientTransport: sdk.StreamableHTTPClientTransport,
    StdioClientTransport: stdio.StdioClientTransport,
    /** A tools/list result, checked only for its outline (each tool is checked on its own in applyTools). */
    lenientToolList: z
      .object({ tools: z.array(z.record(z.string(), z.unknown())), nextCursor: z.string().optional() })
      .passthrough(),
    buildImportedTool: importedTool.buildImportedTool,
    ImportedSchemaError: schema.ImportedSchemaError,
  };
}
type ClientSdk = Awaited<ReturnType<typeof loadClientSdk>>;
let clientSdkLoading: Promise<ClientSdk> | undefined;
let clientSdk: ClientSdk | undefined;
function clientSdkReady(): Promise<ClientSdk> {
  clientSdkLoading ??= loadClientSdk().then((loaded) => (clientSdk = loaded));
  return clientSdkLoading;
}

/** Most tools/list pages read from one server (a server paging forever must not hang the import). */
const MAX_LIST_PAGES = 100;

/** Most bytes of a server's stderr kept. */
export const STDERR_TAIL_BYTES = 8 * 1024;

/** Environment variables a stdio server inherits from Toolhost (besides its configured `env`). */
export const INHERITED_ENV_VARS = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "LANG",
  "LANGUAGE",
  "TERM",
  "SHELL",
  "TMPDIR",
  "TZ",
];

/** The minimal environment of a stdio server: the inherited variables that are set, LC_*, plus `configured`. */
export function minimalEnvironment(
  configured: Record<string, string> | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (INHERITED_ENV_VARS.includes(key) || key.startsWith("LC_")) out[key] = value;
  }
  return { ...out, ...(configured ?? {}) };
}

/** Hash of what a model is told about a tool: name, description and input schema. */
export function toolContentHash(tool: { name: string; description?: string; inputSchema?: unknown }): string {
  return createHash("sha256")
    .update(JSON.stringify([tool.name, tool.description ?? "", tool.inputSchema ?? null]))
    .digest("hex");
}

class BoundedText {
  #text = "";
  constructor(private readonly max: number) {}
  push(chunk: string): void {
    this.#text += chunk;
    if (this.#text.length > this.max) this.#text = this.#text.slice(this.#text.length - this.max);
  }
  toString(): string {
    return this.#text;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** One configured server and its connection. */
class ServerConnection {
  state: McpServerState = "connecting";
  lastError: string | null = null;
  readonly stderr = new BoundedText(STDERR_TAIL_BYTES);
  warnings: string[] = [];
  tools = new Map<string, ImportedToolStatus>();
  serverInfo: { name: string; version: string } | null = null;
  protocolVersion: string | null = null;
  connectedAt: string | null = null;
  client: Client | undefined;
  #connecting: Promise<void> | undefined;
  #closing = false;
  #refreshing: Promise<void> | undefined;
  #refreshAgain = false;

  constructor(
    readonly named: NamedMcpServerConfig,
    private readonly manager: McpClientManager,
  ) {
    if (named.config.disabled) this.state = "disabled";
  }

  get config(): McpServerConfig {
    return this.named.config;
  }

  status(): McpServerStatus {
    const c = this.config;
    return {
      name: this.named.name,
      source: this.named.source,
      transport: c.command ? "stdio" : "http",
      target: c.command ? [c.command, ...(c.args ?? [])].join(" ") : (c.url ?? ""),
      trusted: c.trusted === true,
      state: this.state,
      lastError: this.lastError,
      stderrTail: this.stderr.toString(),
      warnings: [...this.warnings],
      tools: [...this.tools.values()],
      serverInfo: this.serverInfo,
      protocolVersion: this.protocolVersion,
      connectedAt: this.connectedAt,
    };
  }

  /** Connects (once at a time); resolves when connected or failed, never rejects. */
  /** Whether a connection was ever attempted. */
  attempted = false;

  connect(): Promise<void> {
    if (this.state === "disabled" || this.#closing) return Promise.resolve();
    this.attempted = true;
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connect(): Promise<void> {
    this.state = "connecting";
    const c = this.config;
    const { Client, StdioClientTransport, StreamableHTTPClientTransport } = await clientSdkReady();
    const client = new Client({ name: "toolhost", version: VERSION });
    let transport: StdioClientTransport | StreamableHTTPClientTransport;
    if (c.command) {
      const stdio = new StdioClientTransport({
        command: c.command,
        args: c.args ?? [],
        env: minimalEnvironment(c.env),
        ...(c.cwd ? { cwd: c.cwd } : {}),
        stderr: "pipe",
      });
      stdio.stderr?.on("data", (chunk: Buffer) => this.stderr.push(chunk.toString()));
      transport = stdio;
    } else {
      transport = new StreamableHTTPClientTransport(new URL(c.url as string), {
        requestInit: { headers: { ...(c.headers ?? {}) } },
      });
    }
    client.onclose = () => {
      if (this.client !== client || this.#closing) return;
      this.client = undefined;
      this.state = "failed";
      this.lastError = c.command
        ? "The server process exited or closed its connection."
        : "The connection to the server closed.";
      this.manager.logger?.warn({ server: this.named.name }, "MCP server connection closed");
    };
    client.setNotificationHandler("notifications/tools/list_changed", () => {
      void this.refresh();
    });
    try {
      const timeoutMs = c.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
      await withTimeout(
        (async () => {
          await client.connect(transport);
          if (this.#closing) throw new Error("closed while connecting");
          this.client = client;
          await this.#listAndRegister(client);
        })(),
        timeoutMs,
        "Connecting, initializing and listing tools",
      );
      const version = client.getServerVersion();
      this.serverInfo = version ? { name: version.name, version: version.version } : null;
      this.protocolVersion = (transport as { protocolVersion?: string }).protocolVersion ?? null;
      this.state = "connected";
      this.lastError = null;
      this.connectedAt = new Date().toISOString();
    } catch (error) {
      this.client = undefined;
      if (this.#closing) {
        await client.close().catch(() => {});
        return;
      }
      this.state = "failed";
      this.lastError = (error as Error)?.message ?? String(error);
      this.manager.logger?.warn({ server: this.named.name, err: this.lastError }, "MCP server failed to connect");
      await client.close().catch(() => {});
    }
  }

  /** Re-lists the tools; coalesces notifications that arrive while a refresh runs into one more refresh. */
  refresh(): Promise<void> {
    if (this.#refreshing) {
      this.#refreshAgain = true;
      return this.#refreshing;
    }
    this.#refreshing = (async () => {
      do {
        this.#refreshAgain = false;
        const client = this.client;
        if (!client) return;
        try {
          await this.#listAndRegister(client);
        } catch (error) {
          this.lastError = `Refreshing the tool list failed: ${(error as Error).message}`;
        }
      } while (this.#refreshAgain);
    })().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #listAndRegister(client: Client): Promise<void> {
    const remote: RemoteTool[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      // Listed leniently: the SDK's own result check would reject the whole list for one malformed tool, where
      // Toolhost skips just that tool (applyTools).
      const page = await client.request(
        { method: "tools/list", ...(cursor ? { params: { cursor } } : {}) },
        (await clientSdkReady()).lenientToolList,
      );
      remote.push(...(page.tools as unknown as RemoteTool[]));
      cursor = page.nextCursor;
    } while (cursor && ++pages < MAX_LIST_PAGES);
    this.manager.applyTools(this, remote);
  }

  /** The connected client, reconnecting once when the server had failed. Throws when it cannot connect. */
  async ensureClient(): Promise<Client> {
    if (this.state === "disabled") throw new Error(`MCP server "${this.named.name}" is disabled.`);
    if (!this.client) await this.connect();
    if (!this.client) {
      throw new Error(`MCP server "${this.named.name}" is not connected: ${this.lastError ?? "unknown error"}`);
    }
    return this.client;
  }

  async close(): Promise<void> {
    this.#closing = true;
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => {});
  }
}

/** Options of the McpClientManager. */
export interface McpClientManagerOptions {
  registry: ToolRegistryStore;
  logger?: Logger;
  /** Loads the configured servers (config file + database); called by start and reload. */
  loadConfigs: () => Promise<{ servers: NamedMcpServerConfig[]; errors: { name: string; message: string }[] }>;
}

/** Connects to external MCP servers and keeps their tools in the registry (see the module comment). */
export class McpClientManager {
  readonly registry: ToolRegistryStore;
  readonly logger: Logger | undefined;
  readonly #loadConfigs: McpClientManagerOptions["loadConfigs"];
  readonly #servers = new Map<string, ServerConnection>();
  #configErrors: { name: string; message: string }[] = [];
  /** Registry name → the server that owns it (names this manager registered). */
  readonly #owned = new Map<string, ServerConnection>();

  constructor(options: McpClientManagerOptions) {
    this.registry = options.registry;
    this.logger = options.logger;
    this.#loadConfigs = options.loadConfigs;
  }

  #started = false;
  /** Which servers this manager connects (all when undefined); see start(). */
  #only: ((server: string) => boolean) | undefined;

  /**
   * Loads the configuration and connects every enabled server in the background; returns at once. With `only`, just
   * the servers it accepts (by name) connect, now and on later reloads; the others are listed, never connected
   * (their state stays `connecting`, not attempted) — for a command that needs one server's tools.
   */
  async start(options: { only?: (server: string) => boolean } = {}): Promise<void> {
    this.#started = true;
    this.#only = options.only;
    await this.reload();
    // Servers loaded before the start (e.g. by an add) connect now.
    for (const connection of this.#servers.values())
      if (!connection.attempted && this.#wanted(connection.named.name)) void connection.connect();
  }

  #wanted(server: string): boolean {
    return this.#only === undefined || this.#only(server);
  }

  /**
   * Re-reads the configuration: servers that disappeared or changed are disconnected (their tools removed), new
   * ones connect in the background once the manager is started. Resolves once the configuration is applied, not
   * when servers are connected.
   */
  async reload(): Promise<void> {
    let loaded: Awaited<ReturnType<McpClientManagerOptions["loadConfigs"]>>;
    try {
      loaded = await this.#loadConfigs();
    } catch (error) {
      this.#configErrors = [{ name: "(configuration)", message: (error as Error).message }];
      return;
    }
    this.#configErrors = loaded.errors;
    const wanted = new Map(loaded.servers.map((s) => [s.name, s]));
    for (const [name, connection] of this.#servers) {
      const next = wanted.get(name);
      if (!next || JSON.stringify(next) !== JSON.stringify(connection.named)) {
        this.#servers.delete(name);
        this.#dropTools(connection);
        void connection.close();
      }
    }
    for (const named of loaded.servers) {
      if (this.#servers.has(named.name)) continue;
      const connection = new ServerConnection(named, this);
      this.#servers.set(named.name, connection);
      if (this.#started && this.#wanted(named.name)) void connection.connect();
    }
  }

  /** Status of every configured server (and of config entries that were rejected), sorted by name. */
  statuses(): McpServerStatus[] {
    const list = [...this.#servers.values()].map((s) => s.status());
    for (const error of this.#configErrors) {
      list.push({
        name: error.name,
        source: "config-file",
        transport: "stdio",
        target: "",
        trusted: false,
        state: "failed",
        lastError: error.message,
        stderrTail: "",
        warnings: [],
        tools: [],
        serverInfo: null,
        protocolVersion: null,
        connectedAt: null,
      });
    }
    return list.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Status of one server, or undefined. */
  status(name: string): McpServerStatus | undefined {
    return this.statuses().find((s) => s.name === name);
  }

  /** Resolves once no server is `connecting` (or after `timeoutMs`); for the CLI's status and for tests. */
  async settled(timeoutMs = DEFAULT_CONNECT_TIMEOUT_MS + 1000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ([...this.#servers.values()].some((s) => s.attempted && s.state === "connecting") && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Reconnects one server now (e.g. after fixing it); resolves when connected or failed. */
  async reconnect(name: string): Promise<McpServerStatus | undefined> {
    const connection = this.#servers.get(name);
    if (!connection) return undefined;
    await connection.close();
    const fresh = new ServerConnection(connection.named, this);
    this.#servers.set(name, fresh);
    this.#transferTools(connection, fresh);
    await fresh.connect();
    return fresh.status();
  }

  /** Calls a tool on a server (reconnecting once if it had failed). See imported-tool.ts for the result shape. */
  async callTool(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Awaited<ReturnType<Client["callTool"]>>> {
    const connection = this.#servers.get(server);
    if (!connection) throw new Error(`MCP server "${server}" is no longer configured.`);
    const client = await connection.ensureClient();
    return client.callTool(
      { name: tool, arguments: args },
      { signal, timeout: connection.config.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS },
    );
  }

  /** The call time budget (ms) of a server's tools. */
  callTimeoutMs(server: string): number {
    return this.#servers.get(server)?.config.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  }

  /** Disconnects every server and removes their tools from the registry. */
  async close(): Promise<void> {
    const all = [...this.#servers.values()];
    this.#servers.clear();
    for (const connection of all) this.#dropTools(connection);
    await Promise.allSettled(all.map((c) => c.close()));
  }

  /**
   * Replaces the tools a server contributes with `remote`: new and changed tools are (re)registered, vanished ones
   * removed, unchanged ones left alone. A tool whose schema cannot be offered, or whose name collides with another
   * tool, is skipped with a warning in the server's status; the others still load.
   */
  applyTools(connection: ServerConnection, remote: RemoteTool[]): void {
    // Loaded by the connection that listed these tools.
    if (!clientSdk) throw new Error("applyTools before the MCP client was loaded (tools come from a connection)");
    const { buildImportedTool, ImportedSchemaError } = clientSdk;
    const server = connection.named.name;
    const warnings: string[] = [];
    const next = new Map<string, ImportedToolStatus>();
    const sorted = [...remote].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const tool of sorted) {
      if (typeof tool?.name !== "string" || tool.name === "") {
        warnings.push("Skipped a tool without a name.");
        continue;
      }
      const name = importedToolName(server, tool.name);
      if (next.has(name)) {
        warnings.push(`Skipped "${tool.name}": its name maps to ${name}, like another tool of this server.`);
        continue;
      }
      const owner = this.#owned.get(name);
      if ((owner && owner !== connection) || (!owner && this.registry.get(name))) {
        warnings.push(`Skipped "${tool.name}": ${name} is already taken by another tool.`);
        continue;
      }
      const contentHash = toolContentHash(tool);
      const previous = connection.tools.get(name);
      if (previous && previous.contentHash === contentHash && this.registry.get(name)) {
        next.set(name, previous);
        continue;
      }
      let registered: ReturnType<ClientSdk["buildImportedTool"]>;
      try {
        registered = buildImportedTool({
          manager: this,
          server,
          trusted: connection.config.trusted === true,
          registryName: name,
          tool,
          contentHash,
        });
      } catch (error) {
        const why = error instanceof ImportedSchemaError ? error.message : String((error as Error)?.message ?? error);
        warnings.push(`Skipped "${tool.name}": ${why}.`);
        continue;
      }
      if (this.registry.get(name)) this.registry.unregister(name);
      this.registry.register(registered);
      this.#owned.set(name, connection);
      next.set(name, {
        name,
        remoteName: tool.name,
        contentHash,
        ...(tool.annotations ? { annotations: { ...tool.annotations } } : {}),
      });
    }
    for (const name of connection.tools.keys()) {
      if (!next.has(name) && this.#owned.get(name) === connection) {
        this.registry.unregister(name);
        this.#owned.delete(name);
      }
    }
    connection.tools = next;
    connection.warnings = warnings;
    for (const warning of warnings) this.logger?.warn({ server }, warning);
  }

  #dropTools(connection: ServerConnection): void {
    for (const name of connection.tools.keys()) {
      if (this.#owned.get(name) === connection) {
        this.registry.unregister(name);
        this.#owned.delete(name);
      }
    }
    connection.tools = new Map();
  }

  #transferTools(from: ServerConnection, to: ServerConnection): void {
    to.tools = from.tools;
    for (const name of to.tools.keys()) if (this.#owned.get(name) === from) this.#owned.set(name, to);
  }
}
