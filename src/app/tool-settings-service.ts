/**
 * Tool settings application service (routes → service → registry, settings policy, repository). Shared by the HTTP
 * routes and the CLI so both apply the same rules and raise the same errors.
 */

import { prepareApprovalPolicy, refuseCostlyRules } from "../core/approval/policy.js";
import { AccessDeniedError, BrandedError, errorBrand, NotFoundError, ToolSettingsError } from "../core/errors.js";
import { redactValue } from "../core/redact.js";
import type { ToolRegistryStore } from "../core/registry.js";
import {
  checkSettingValue,
  getSafeEffectiveToolSettings,
  getToolDefinition,
  mergeToolSettings,
  normalizeToolParameters,
  salvageToolParameters,
} from "../core/settings-policy.js";
import {
  canonicalJson,
  type ToolSettingsStore,
  unchangedSettings,
  type VersionedToolSettings,
} from "../core/stores.js";
import { deriveToolAnnotations } from "../core/tool-annotations.js";
import type {
  AuditSink,
  ExternalToolOrigin,
  Logger,
  RegisteredTool,
  ToolAnnotationHints,
  ToolCategory,
  ToolDefinition,
  ToolParameterDescriptor,
} from "../core/types.js";
import { refuseLoosening, withImpliedSettings, withLockImplications } from "./setting-implications.js";

/** One tool with the user's effective settings (ToolSettingsDescriptor). */
export interface ToolSettingsDescriptor {
  name: string;
  title: string;
  description: string;
  category: ToolCategory;
  enabled: boolean;
  enabledByDefault: boolean;
  canDisable: boolean;
  /** Only an admin may enable this tool. */
  enablingRequiresAdmin: boolean;
  /** Keys ("enabled", parameter names) an admin set for this user; only an admin may change them. */
  lockedKeys: string[];
  /** The stored row's version: 0 before the first write, +1 on every write; the API's ETag. */
  version: number;
  /** Effective parameter values (defaults < saved). */
  parameters: Record<string, unknown>;
  defaultParameters: Record<string, unknown>;
  parameterDescriptors: ToolParameterDescriptor[];
  /** The definition a model is offered with these settings. */
  definition: ToolDefinition;
  /** Behaviour hints (read-only, destructive, idempotent, open-world), declared or derived. */
  annotations: Required<ToolAnnotationHints>;
  /** Set for tools imported from an external MCP server: which server and tool, trusted or not, content hash. */
  external?: ExternalToolOrigin;
  /**
   * Present when the tool cannot work on this host as configured (e.g. no API key): it is then not offered to
   * models even when enabled. Says what to set.
   */
  unavailableReason?: string;
}

/** A descriptor as API clients see it: without its `validate` function, at every level of `fields`. */
function publicDescriptor(descriptor: ToolParameterDescriptor): ToolParameterDescriptor {
  const { validate: _validate, fields, ...rest } = descriptor;
  return fields ? { ...rest, fields: fields.map(publicDescriptor) } : rest;
}

/**
 * Body of a settings update (UpdateToolSettingsBody). A parameter set to null is reset to its default.
 */
export interface UpdateToolSettingsBody {
  enabled?: boolean;
  parameters?: Record<string, unknown>;
}

/** Users whose serialized settings list is kept (least recently used dropped first). */
const LIST_CACHE_USERS = 1000;

/** The parts of a tool's settings descriptor that depend only on its registration (never on a user). */
type StaticDescriptorPart = Pick<
  ToolSettingsDescriptor,
  | "name"
  | "title"
  | "description"
  | "category"
  | "enabledByDefault"
  | "canDisable"
  | "enablingRequiresAdmin"
  | "defaultParameters"
  | "parameterDescriptors"
  | "definition"
  | "annotations"
  | "external"
>;

const staticParts = new WeakMap<RegisteredTool, StaticDescriptorPart>();

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
    Object.freeze(value);
  }
  return value;
}

/**
 * Computed once per registered tool (registered tools are immutable) and shared, deeply frozen, by every
 * descriptor: the settings list is read on every page load and chat start, and rebuilding these parts per tool
 * per request was most of its cost.
 */
function staticPart(tool: RegisteredTool): StaticDescriptorPart {
  let part = staticParts.get(tool);
  if (!part) {
    const m = tool.settings;
    part = deepFreeze({
      name: tool.definition.name,
      title: m.title,
      description: m.description,
      category: m.category,
      enabledByDefault: m.enabledByDefault,
      canDisable: m.canDisable,
      enablingRequiresAdmin: m.enablingRequiresAdmin === true,
      defaultParameters: structuredClone(m.defaultParameters),
      parameterDescriptors: m.parameterDescriptors.map(publicDescriptor).map((d) => structuredClone(d)),
      definition: structuredClone(tool.definition),
      annotations: deriveToolAnnotations(tool),
      ...(m.external ? { external: { ...m.external } } : {}),
    });
    staticParts.set(tool, part);
  }
  return part;
}

function unavailable(tool: RegisteredTool, services: Record<string, unknown>): { unavailableReason?: string } {
  const reason = tool.unavailableReason?.(services);
  return reason ? { unavailableReason: reason } : {};
}

/** Options of {@link ToolSettingsService.update}. */
export interface UpdateToolSettingsOptions {
  /** The caller is an admin: may change adminOnly values and locked keys; what they set is locked for the user. */
  admin: boolean;
  /**
   * Apply only if the stored version (the ETag) is still this one (or one of these; an empty list never matches);
   * else SettingsVersionConflictError.
   */
  ifMatch?: number | readonly number[];
  /** Who makes the change, for the audit (default: the user whose settings change). */
  actor?: string;
  /**
   * Record the keys an admin sets as locks for the user (default: `admin`). Pass false when an admin changes their
   * own settings, or another admin's: locks are what an admin sets for a user who is not one, so that user
   * cannot lift them. An admin's reset (null) of a key lifts its lock either way.
   */
  lock?: boolean;
}

/** Thrown inside an update's transaction when it would change nothing, to leave without writing. */
class NoChange {
  constructor(readonly current: VersionedToolSettings | undefined) {}
}

/**
 * The stored settings changed since the caller read them (`If-Match` named an older version): HTTP 412. Read
 * the settings again (GET returns the current version as the ETag), reapply the change and retry.
 */
export class SettingsVersionConflictError extends BrandedError {
  static override readonly brand: symbol = errorBrand("SettingsVersionConflictError");
  readonly code = "precondition_failed";
  constructor(
    readonly tool: string,
    readonly expected: number | readonly number[],
    readonly actual: number,
  ) {
    const since =
      typeof expected === "number" || expected.length === 1
        ? `changed since version ${expected}`
        : expected.length === 0
          ? "are not at a version If-Match names"
          : `are at none of the versions ${expected.join(", ")}`;
    super(`The settings of "${tool}" ${since} (now ${actual}); GET them again and retry with If-Match: "${actual}".`);
  }

  /** `{tool, expected, actual}`: which settings, the version(s) the caller named and the stored one. */
  get details(): { tool: string; expected: number | readonly number[]; actual: number } {
    return { tool: this.tool, expected: this.expected, actual: this.actual };
  }
}

/** Reads and changes per-user tool settings. */
export class ToolSettingsService {
  constructor(
    private readonly registry: ToolRegistryStore,
    private readonly store: ToolSettingsStore,
    private readonly logger: Logger,
    /** The host's services, for tools' availability checks (RegisteredTool.unavailableReason). */
    private readonly services: Record<string, unknown> = {},
    private readonly audit?: AuditSink,
  ) {}

  readonly #listCache = new Map<string, { key: string; json: string }>();

  #describe(tool: RegisteredTool, saved: VersionedToolSettings | undefined): ToolSettingsDescriptor {
    const effective = getSafeEffectiveToolSettings(tool, saved, this.logger);
    const fixed = staticPart(tool);
    return {
      name: fixed.name,
      title: fixed.title,
      description: fixed.description,
      category: fixed.category,
      enabled: effective.enabled,
      enabledByDefault: fixed.enabledByDefault,
      canDisable: fixed.canDisable,
      enablingRequiresAdmin: fixed.enablingRequiresAdmin,
      lockedKeys: [...(saved?.locked ?? [])],
      version: saved?.version ?? 0,
      parameters: effective.values,
      defaultParameters: fixed.defaultParameters,
      parameterDescriptors: fixed.parameterDescriptors,
      definition: tool.buildDefinition ? getToolDefinition(tool, effective) : fixed.definition,
      annotations: fixed.annotations,
      ...(fixed.external ? { external: fixed.external } : {}),
      ...unavailable(tool, this.services),
    };
  }

  /**
   * The settings list as the JSON text `{"tools":[…]}` (what `GET /api/settings/tools` sends). The text is kept per
   * user and reused while nothing it depends on changed: the registered tools (registry generation), the user's
   * saved rows (each row's version, which every write bumps — also a write by another server instance, since the
   * rows are read on every call) and which tools are unavailable on this host.
   */
  async listJson(userId: string): Promise<string> {
    const saved = await this.store.getAll(userId);
    const tools = this.registry.list();
    let key: string | undefined = `${this.registry.generation}`;
    for (const [name, row] of saved) {
      if (typeof row.version !== "number") {
        key = undefined;
        break;
      }
      key += `|${name}:${row.version}`;
    }
    if (key !== undefined) {
      for (const tool of tools) key += `|${tool.unavailableReason?.(this.services) ?? ""}`;
      const hit = this.#listCache.get(userId);
      if (hit?.key === key) return hit.json;
    }
    const json = JSON.stringify({ tools: tools.map((tool) => this.#describe(tool, saved.get(tool.definition.name))) });
    if (key !== undefined) {
      this.#listCache.delete(userId);
      this.#listCache.set(userId, { key, json });
      if (this.#listCache.size > LIST_CACHE_USERS)
        this.#listCache.delete(this.#listCache.keys().next().value as string);
    }
    return json;
  }

  /** Every registered tool with the user's effective settings, sorted by name. */
  async list(userId: string): Promise<ToolSettingsDescriptor[]> {
    const saved = await this.store.getAll(userId);
    return this.registry.list().map((tool) => this.#describe(tool, saved.get(tool.definition.name)));
  }

  /** One tool's descriptor. Throws NotFoundError for an unknown tool. */
  async get(userId: string, toolName: string): Promise<ToolSettingsDescriptor> {
    const tool = this.#tool(toolName);
    return this.#describe(tool, await this.store.get(userId, toolName));
  }

  /**
   * Applies an update and persists it; returns the new descriptor. The read, the checks and the write run as one
   * atomic read-modify-write of the user's row ({@link ToolSettingsStore.modify}: one transaction with the row
   * locked), so concurrent updates of different keys all survive and an admin's lock is written together with its
   * value. Throws NotFoundError for an unknown tool, ToolParameterError for an invalid parameter,
   * ToolSettingsError for disabling a tool that cannot be disabled, AccessDeniedError when a non-admin
   * (`options.admin` false) enables a tool whose enabling requires an admin, changes an adminOnly parameter or a
   * key an admin locked, and SettingsVersionConflictError when `options.ifMatch` is given and differs from the
   * stored version. Only explicitly chosen values are stored, so a later change of a default still reaches the
   * user. Every change is audited (after commit) with `options.actor` (default `userId`) as the changer, old and
   * new values redacted. An update that changes nothing (the same values, enabled flag and locks) writes nothing:
   * the version (ETag) stays, and there is no audit line or change notification.
   */
  async update(
    userId: string,
    toolName: string,
    body: UpdateToolSettingsBody,
    options: UpdateToolSettingsOptions = { admin: false },
  ): Promise<ToolSettingsDescriptor> {
    const tool = this.#tool(toolName);
    // A value that only applies together with another setting brings that setting along (or is refused).
    body = withImpliedSettings(tool, body);
    // A lock binds what it implies: locking a value another setting could undo sets (and locks) that one too.
    if (options.admin && (options.lock ?? true)) body = withLockImplications(tool, body);
    // Approval rules carry examples checked on save; their shell parser loads asynchronously.
    await prepareApprovalPolicy();
    const requested = body.parameters ?? {};
    let old: VersionedToolSettings | undefined;
    let oldVersion = 0;
    const written = await this.store
      .modify(userId, toolName, (saved) => {
        oldVersion = saved?.version ?? 0;
        const expected = options.ifMatch;
        const current = saved?.version ?? 0;
        if (
          expected !== undefined &&
          (typeof expected === "number" ? expected !== current : !expected.includes(current))
        ) {
          throw new SettingsVersionConflictError(toolName, expected, current);
        }
        old = saved;
        const locked = new Set(saved?.locked ?? []);
        let touched = [...(body.enabled === undefined ? [] : ["enabled"]), ...Object.keys(requested)];
        const updates = { ...requested };
        if (!options.admin) {
          // Asking for the on/off state the tool already has, or for a value an admin-only or locked setting already
          // has, changes nothing, so it is no reason to refuse (an admin may have enabled a shell tool, or locked its
          // state, for this user; a client may send back the parameters it read). Such values are not written.
          const enabledNow = typeof saved?.enabled === "boolean" ? saved.enabled : tool.settings.enabledByDefault;
          if (body.enabled === enabledNow) touched = touched.filter((key) => key !== "enabled");
          else if (body.enabled === true && tool.settings.enablingRequiresAdmin) throw adminOnlyEnabling(tool);
          for (const key of unchangedGuardedKeys(tool, saved, requested, locked)) {
            delete updates[key];
            touched = touched.filter((k) => k !== key);
          }
          refuseAdminOnly(tool, Object.keys(updates));
          const blocked = touched.filter((key) => locked.has(key));
          if (blocked.length > 0) {
            throw new AccessDeniedError(
              `${blocked.map((b) => `"${b}"`).join(", ")} of "${toolName}" ${blocked.length > 1 ? "were" : "was"} set for you by an admin; only an admin can change ${blocked.length > 1 ? "them" : "it"}.`,
              { tool: toolName, parameters: blocked, rule: "admin_locked" },
            );
          }
          refuseLoosening(tool, saved, updates);
        }
        const resets = Object.keys(updates).filter((key) => updates[key] === null);
        for (const key of resets) delete updates[key];
        const salvaged = salvageToolParameters(tool, saved?.parameters ?? {});
        if (salvaged.dropped.length > 0) {
          this.logger.warn(
            { tool: toolName, userId, dropped: salvaged.dropped },
            "discarding invalid saved settings on update",
          );
        }
        const savedParameters = salvaged.parameters;
        // Rules too costly to match are refused before their examples are tried (that would be the costly match).
        refuseCostlyRules(tool, updates);
        // Validates names, types, ranges and canDisable; throws before anything is written.
        mergeToolSettings(
          tool,
          { enabled: saved?.enabled ?? null, parameters: savedParameters },
          { enabled: body.enabled, parameters: updates },
        );
        for (const key of resets) {
          if (!tool.settings.parameterDescriptors.some((d) => d.name === key))
            normalizeToolParameters(tool, { [key]: null });
          delete savedParameters[key];
        }
        const enabled = body.enabled ?? (typeof saved?.enabled === "boolean" ? saved.enabled : null);
        // What an admin sets for a non-admin is locked against that user; an admin's reset (null) unlocks it again,
        // whether or not this change locks.
        if (options.admin) {
          for (const key of resets) locked.delete(key);
          if (options.lock ?? true) for (const key of touched) if (!resets.includes(key)) locked.add(key);
        }
        const next = {
          enabled,
          parameters: { ...savedParameters, ...normalizeToolParameters(tool, updates) },
          locked: [...locked].sort(),
        };
        // Nothing to change: leave the transaction without writing (the version, the API's ETag, stays).
        if (unchangedSettings(saved, next)) throw new NoChange(saved);
        return next;
      })
      .catch((error: unknown) => {
        if (error instanceof NoChange)
          return error.current ?? { enabled: null, parameters: {}, locked: [], version: 0 };
        throw error;
      });
    // A change that changed nothing (the store wrote nothing, the version stayed): no audit line, no notification.
    if (written.version === oldVersion) return this.#describe(tool, written);
    await this.#audit(userId, toolName, options.actor, old, written);
    this.registry.changes.emit(userId);
    return this.#describe(tool, written);
  }

  /** Records a committed change (values, enabled flag, locks) in the audit, redacted; a failure is only logged. */
  async #audit(
    userId: string,
    toolName: string,
    actor: string | undefined,
    before: VersionedToolSettings | undefined,
    after: VersionedToolSettings,
  ): Promise<void> {
    const side = (row: VersionedToolSettings | undefined) => ({
      enabled: typeof row?.enabled === "boolean" ? row.enabled : null,
      parameters: redactValue(row?.parameters ?? {}) as Record<string, unknown>,
      locked: [...(row?.locked ?? [])],
    });
    try {
      await this.audit?.recordEvent?.({
        kind: "settings_change",
        userId,
        actor: actor ?? userId,
        tool: toolName,
        old: side(before),
        new: side(after),
      });
    } catch (error) {
      this.logger.error(
        { tool: toolName, userId, err: String(error) },
        "recording a settings change in the audit failed",
      );
    }
  }

  /**
   * Removes admin locks from the user's settings of a tool (all of them when `keys` is empty), keeping the values:
   * the user may change those keys again. Atomic like {@link update}. Returns the new descriptor and the keys that
   * were unlocked. Throws NotFoundError for an unknown tool and ToolSettingsError (`invalid_settings`) for a key the
   * tool does not have (neither "enabled" nor one of its parameters), naming the keys it has; nothing is written
   * then, nor when no named key was locked. An unlock is audited like an update (`options.actor` the changer). Callers
   * check that the caller is an admin.
   */
  async unlock(
    userId: string,
    toolName: string,
    keys: string[] = [],
    options: { actor?: string } = {},
  ): Promise<{ descriptor: ToolSettingsDescriptor; unlocked: string[] }> {
    const tool = this.#tool(toolName);
    const known = ["enabled", ...tool.settings.parameterDescriptors.map((d) => d.name)];
    const unknown = keys.filter((k) => !known.includes(k));
    if (unknown.length > 0) {
      throw new ToolSettingsError(
        `Unknown key${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => `"${k}"`).join(", ")} of "${toolName}": a lock is on "enabled" or on one of its parameters (${known.slice(1).join(", ") || "it has none"}).`,
        { tool: toolName, parameter: unknown[0], rule: "unknown parameter" },
      );
    }
    let unlocked: string[] = [];
    let before: VersionedToolSettings | undefined;
    const written = await this.store
      .modify(userId, toolName, (saved) => {
        before = saved;
        const locked = saved?.locked ?? [];
        unlocked = keys.length === 0 ? [...locked] : locked.filter((k) => keys.includes(k));
        // Nothing to unlock: leave the transaction without writing (the version, the API's ETag, stays).
        if (unlocked.length === 0) throw new NoChange(saved);
        return {
          enabled: typeof saved?.enabled === "boolean" ? saved.enabled : null,
          parameters: saved?.parameters ?? {},
          locked: locked.filter((k) => !unlocked.includes(k)),
        };
      })
      .catch((error: unknown) => {
        if (error instanceof NoChange)
          return error.current ?? { enabled: null, parameters: {}, locked: [], version: 0 };
        throw error;
      });
    if (unlocked.length > 0) {
      this.logger.info({ tool: toolName, userId, actor: options.actor, unlocked }, "admin locks removed");
      await this.#audit(userId, toolName, options.actor, before, written);
      this.registry.changes.emit(userId);
    }
    return { descriptor: this.#describe(tool, written), unlocked };
  }

  #tool(toolName: string): RegisteredTool {
    const tool = this.registry.get(toolName);
    if (!tool) {
      throw new NotFoundError(
        `Unknown tool "${toolName}". List the tools with GET /api/settings/tools or \`toolhost tools\`.`,
        {
          tool: toolName,
        },
      );
    }
    return tool;
  }
}

/** Refuses a non-admin's change of an admin-only parameter (enabling an admin-only tool is checked apart). */
function refuseAdminOnly(tool: RegisteredTool, keys: readonly string[]): void {
  const name = tool.definition.name;
  const guarded = new Set(tool.settings.parameterDescriptors.filter((d) => d.adminOnly).map((d) => d.name));
  const blocked = keys.filter((key) => guarded.has(key));
  if (blocked.length > 0) {
    throw new AccessDeniedError(
      `Only an admin can change ${blocked.map((b) => `"${b}"`).join(", ")} of "${name}": it widens what the tool can reach. Ask an admin (TOOLHOST_ADMIN_USERS).`,
      { tool: name, parameters: blocked, rule: "admin_only" },
    );
  }
}

/**
 * The admin-only or locked parameters of a non-admin's update that change nothing: set to the value they have now
 * (compared after validation, so a rule without its optional fields equals the stored one), or reset (null) while
 * nothing is saved for them.
 */
function unchangedGuardedKeys(
  tool: RegisteredTool,
  saved: VersionedToolSettings | undefined,
  requested: Record<string, unknown>,
  locked: ReadonlySet<string>,
): string[] {
  const name = tool.definition.name;
  const descriptors = new Map(tool.settings.parameterDescriptors.map((d) => [d.name, d]));
  const stored = saved?.parameters ?? {};
  let current: Record<string, unknown> | undefined;
  const out: string[] = [];
  for (const [key, value] of Object.entries(requested)) {
    const d = descriptors.get(key);
    if (!d || !(d.adminOnly || locked.has(key))) continue;
    if (value === null) {
      if (!Object.hasOwn(stored, key)) out.push(key);
      continue;
    }
    current ??= getSafeEffectiveToolSettings(tool, saved).values;
    try {
      if (canonicalJson(checkSettingValue(name, d, value)) === canonicalJson(current[key])) out.push(key);
    } catch {
      // an invalid value is a change (refused as one)
    }
  }
  return out;
}

/** The refusal of a non-admin's enabling of a tool only an admin may enable (a shell). */
function adminOnlyEnabling(tool: RegisteredTool): AccessDeniedError {
  const name = tool.definition.name;
  return new AccessDeniedError(
    `Only an admin can enable "${name}": it gives the model a shell on the server. Ask an admin (TOOLHOST_ADMIN_USERS) or use \`toolhost settings set ${name} --enable --user YOU\` on the server.`,
    { tool: name, rule: "admin_only" },
  );
}
