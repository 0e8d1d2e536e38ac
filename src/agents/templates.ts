/**
 * Agent templates: what a sub-agent is (description shown to the model, system prompt, provider and model, the
 * tools it may use, its turn and time limits). They come from the config file's `agents` map and from Markdown
 * files with YAML front matter in a templates directory; each is validated at load, and an error names the file
 * and the field. The built-in `general` template (the parent's provider, model and tools) always exists.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, join } from "node:path";
import type { parse as YamlParse } from "yaml";
import type { AgentTemplateSummary } from "../core/agents.js";
import { NotFoundError, quote, shorten, ToolSettingsError } from "../core/errors.js";

let yamlParse: typeof YamlParse | undefined;

/**
 * Parses YAML front matter. The yaml package loads (synchronously) on the first template file that has front
 * matter, so processes that never read a Markdown template (every CLI start) do not load it.
 */
function parseYaml(text: string): unknown {
  // createRequire: bundlers leave it alone, so yaml stays out of the CLI's startup chunks.
  yamlParse ??= (createRequire(import.meta.url)("yaml") as { parse: typeof YamlParse }).parse;
  return yamlParse(text);
}

/** A template with its system prompt. */
export interface AgentTemplate extends AgentTemplateSummary {
  systemPrompt: string;
}

/** The template that always exists: the parent's provider, model and tools, a general-purpose prompt. */
export const GENERAL_TEMPLATE: AgentTemplate = {
  id: "general",
  description:
    "A general-purpose sub-agent with your own provider, model and tools. Give it a self-contained task; it answers with its findings.",
  provider: null,
  model: null,
  tools: null,
  maxTurns: null,
  timeSeconds: null,
  source: "built-in",
  systemPrompt:
    "You are a sub-agent working on one task for another agent. Use your tools to do the task, then answer with a concise, self-contained report of what you found or did: the agent that spawned you sees only your final answer.",
};

/** Template ids: lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 64. */
const TEMPLATE_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

const FIELDS = ["id", "description", "systemPrompt", "provider", "model", "tools", "maxTurns", "timeSeconds"] as const;

/** What the validator needs to know about the installation. */
export interface TemplateValidation {
  /** Provider names a template may name. */
  providers: readonly string[];
  /** Registered tool names a template may list; unchecked when absent. */
  tools?: ReadonlySet<string>;
}

function fail(file: string, field: string, why: string): never {
  throw new ToolSettingsError(`Agent template ${file}: field "${field}" ${why}`, { file, field });
}

/**
 * Validates one template's fields (`raw` from the config map or a file's front matter). `where` names the file
 * (and key) in errors. Throws ToolSettingsError (`invalid_settings`) whose details hold `file` and `field`.
 */
export function validateTemplate(
  raw: unknown,
  where: string,
  options: TemplateValidation & { id?: string; systemPrompt?: string },
): AgentTemplate {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
    fail(where, "(template)", "must be an object with at least a description.");
  }
  const value = raw as Record<string, unknown>;
  for (const key of Object.keys(value)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      fail(where, key, `is not a template field. Use: ${FIELDS.join(", ")}.`);
    }
  }
  const id = value.id ?? options.id;
  if (typeof id !== "string" || !TEMPLATE_ID.test(id)) {
    fail(where, "id", "must be 1–64 lowercase letters, digits, '-' or '_' (e.g. code-reviewer).");
  }
  const description = value.description;
  if (typeof description !== "string" || description.trim() === "" || description.length > 1000) {
    fail(where, "description", "must be a non-empty string of at most 1000 characters (it is shown to the model).");
  }
  const systemPrompt = options.systemPrompt ?? value.systemPrompt;
  if (systemPrompt !== undefined && systemPrompt !== null && typeof systemPrompt !== "string") {
    fail(where, "systemPrompt", "must be a string.");
  }
  const provider = value.provider ?? null;
  if (provider !== null && (typeof provider !== "string" || !options.providers.includes(provider))) {
    fail(where, "provider", `must be one of ${options.providers.join(", ")} (or absent for the parent's).`);
  }
  const model = value.model ?? null;
  if (model !== null && (typeof model !== "string" || model.trim() === "")) {
    fail(where, "model", "must be a non-empty model id (or absent for the parent's).");
  }
  let tools: string[] | null = null;
  if (value.tools !== undefined && value.tools !== null && value.tools !== "*") {
    if (!Array.isArray(value.tools))
      fail(where, "tools", 'must be a list of tool names, or "*" for all of the parent\'s.');
    tools = [];
    value.tools.forEach((name, index) => {
      if (typeof name !== "string" || name === "") fail(where, `tools[${index}]`, "must be a tool name.");
      if (options.tools && !options.tools.has(name)) {
        fail(where, `tools[${index}]`, `names "${name}", which is not a registered tool.`);
      }
      tools?.push(name);
    });
  }
  const positive = (field: "maxTurns" | "timeSeconds", max: number): number | null => {
    const v = value[field];
    if (v === undefined || v === null) return null;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > max) {
      fail(where, field, `must be an integer from 1 to ${max}.`);
    }
    return v;
  };
  return {
    id,
    description: description.trim(),
    systemPrompt: (typeof systemPrompt === "string" && systemPrompt.trim()) || GENERAL_TEMPLATE.systemPrompt,
    provider: provider as string | null,
    model: model as string | null,
    tools,
    maxTurns: positive("maxTurns", 1000),
    timeSeconds: positive("timeSeconds", 86_400),
    source: where,
  };
}

/**
 * Parses a Markdown template: YAML front matter between `---` lines (the fields), then the body (the system
 * prompt). The id is the file name without `.md` (front matter naming one is refused).
 */
export function parseTemplateMarkdown(file: string, text: string, options: TemplateValidation): AgentTemplate {
  const match = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match) fail(file, "(front matter)", "is missing: start the file with a --- line, the fields, and another ---.");
  let front: unknown;
  try {
    front = parseYaml(match[1] ?? "");
  } catch (error) {
    fail(file, "(front matter)", `is not valid YAML: ${(error as Error).message.split("\n")[0]}`);
  }
  const body = (match[2] ?? "").trim();
  if (front && typeof front === "object" && "systemPrompt" in front) {
    fail(file, "systemPrompt", "belongs in the body of a Markdown template, after the front matter.");
  }
  if (front && typeof front === "object" && "id" in front) {
    fail(file, "id", "comes from the file name; remove it (rename the file to change the id).");
  }
  return validateTemplate(front, file, { ...options, id: basename(file).replace(/\.md$/i, ""), systemPrompt: body });
}

/** Where templates are read from. */
export interface TemplateSources {
  /** The config file's `agents` map (id → fields) and the file's path for errors. */
  config?: { file: string; agents: unknown };
  /** A directory of `*.md` templates; a missing directory holds none. */
  directory?: string;
}

/**
 * Loads every template: `general`, then the config file's, then the directory's (sorted by file name). A later
 * definition of an id replaces an earlier one, except `general`, which may be redefined but never removed.
 * Throws ToolSettingsError naming the file and field of the first invalid (or unreadable) template.
 */
export function loadAgentTemplates(sources: TemplateSources, options: TemplateValidation): AgentTemplate[] {
  const byId = new Map<string, AgentTemplate>([[GENERAL_TEMPLATE.id, GENERAL_TEMPLATE]]);
  if (sources.config && sources.config.agents !== undefined) {
    const { file, agents } = sources.config;
    if (!agents || typeof agents !== "object" || Array.isArray(agents)) {
      fail(
        file,
        "agents",
        'must be an object mapping template ids to templates, e.g. {"reviewer": {"description": "…"}}.',
      );
    }
    for (const [id, raw] of Object.entries(agents as Record<string, unknown>)) {
      const where = `${file} (agents.${id})`;
      if (raw && typeof raw === "object" && "id" in raw) fail(where, "id", "comes from the map key; remove it.");
      byId.set(id, validateTemplate(raw, where, { ...options, id }));
    }
  }
  const dir = sources.directory;
  if (dir && existsSync(dir) && statSync(dir).isDirectory()) {
    for (const name of readdirSync(dir).sort()) {
      if (!name.toLowerCase().endsWith(".md")) continue;
      const file = join(dir, name);
      let text: string;
      try {
        text = readFileSync(file, "utf8");
      } catch (error) {
        fail(
          file,
          "(file)",
          `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): make it a readable file or remove it.`,
        );
      }
      const template = parseTemplateMarkdown(file, text, options);
      byId.set(template.id, template);
    }
  }
  return [...byId.values()];
}

/** The summary of a template (no system prompt), as the model and the API see it. */
export function summarizeTemplate(t: AgentTemplate): AgentTemplateSummary {
  const { systemPrompt: _prompt, ...summary } = t;
  return summary;
}

/**
 * The templates of this installation, loaded once (and again on `reload()`). A load error is kept and thrown by
 * every lookup, so a broken template is reported where it is used (and at server start) without stopping other
 * commands.
 */
export class AgentTemplateCatalog {
  #templates: AgentTemplate[] | undefined;
  #error: Error | undefined;

  constructor(private readonly load: () => AgentTemplate[]) {}

  /** Reloads from the sources; returns the error instead of throwing. */
  reload(): Error | undefined {
    try {
      this.#templates = this.load();
      this.#error = undefined;
    } catch (error) {
      this.#templates = undefined;
      this.#error = error as Error;
    }
    return this.#error;
  }

  /** The load error, if the last load failed. */
  get error(): Error | undefined {
    if (!this.#templates && !this.#error) this.reload();
    return this.#error;
  }

  /** Every template. Throws the load error. */
  list(): AgentTemplate[] {
    if (!this.#templates && !this.#error) this.reload();
    if (this.#error) throw this.#error;
    return this.#templates ?? [GENERAL_TEMPLATE];
  }

  /** One template. Throws NotFoundError naming the ones that exist, or the load error. */
  get(id: string): AgentTemplate {
    const all = this.list();
    const found = all.find((t) => t.id === id);
    if (!found) {
      throw new NotFoundError(`No agent template ${quote(id)}. Use one of: ${all.map((t) => t.id).join(", ")}.`, {
        template: shorten(id),
      });
    }
    return found;
  }
}
