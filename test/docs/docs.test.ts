/**
 * The docs say what the code does: imports from "toolhost" exist, example models are the defaults, the error-code
 * list is complete, the README's links resolve, and the behaviours the docs describe hold.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { DEFAULT_CHAT_MODELS } from "../../src/app/chat-types.js";
import { CONFIG_VARIABLES } from "../../src/core/config.js";
import { HTTP_STATUS_BY_CODE, TOOL_ERROR_STATUS } from "../../src/server/http.js";
import { assertNoSsrf } from "../../src/tools/web/ssrf.js";
import { ENTRIES, type Entry, sourceModules } from "../api/entries.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const docs = [
  "README.md",
  ...readdirSync(`${root}docs`)
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
const text = (file: string) => readFileSync(`${root}${file}`, "utf8");
/** The tool error codes (listed in the README's tools paragraph, whose statuses it gives in prose). */
const TOOL_ERROR_CODES: string[] = Object.keys(TOOL_ERROR_STATUS);

describe("docs match the code", () => {
  it('every name the docs import from "toolhost" (or its subpaths) is exported by that entry', async () => {
    const entries: Record<string, { runtime: Record<string, unknown>; file: string }> = {};
    for (const entry of Object.keys(ENTRIES) as Entry[]) {
      entries[entry.slice("toolhost".length)] = { runtime: await sourceModules[entry](), file: ENTRIES[entry] };
    }
    const missing: string[] = [];
    let imports = 0;
    for (const file of docs) {
      for (const m of text(file).matchAll(/import\s*(type\s*)?\{([^}]+)\}\s*from\s*"toolhost([^"]*)"/g)) {
        imports++;
        const entry = entries[m[3]!];
        if (!entry) {
          missing.push(`${file}: "toolhost${m[3]}" is not an entry of the package (exports map)`);
          continue;
        }
        // Types exist only in the entry file's text: every name there is written out (no `export *`).
        const declared = text(entry.file);
        for (const raw of m[2]!.split(",")) {
          const typeOnly = Boolean(m[1]) || /^\s*type\s/.test(raw);
          const name = raw
            .trim()
            .replace(/^type\s+/, "")
            .split(/\s+as\s+/)[0]!;
          if (!name) continue;
          const exported = typeOnly ? new RegExp(`\\b${name}\\b`).test(declared) : name in entry.runtime;
          if (
            !exported &&
            !(/^[A-Z]/.test(name) && new RegExp(`\\btype ${name}\\b|^\\s+${name},$`, "m").test(declared))
          )
            missing.push(`${file}: ${name} (from "toolhost${m[3]}")`);
        }
      }
    }
    expect(imports).toBeGreaterThan(3);
    expect(missing).toEqual([]);
  });

  it("example models are the providers' defaults (except local servers' own model names)", () => {
    const wrong: string[] = [];
    for (const file of docs) {
      for (const m of text(file).matchAll(/--provider (openai|gemini|anthropic) --model (\S+?)[`"\s]/g)) {
        const expected = DEFAULT_CHAT_MODELS[m[1] as keyof typeof DEFAULT_CHAT_MODELS];
        if (m[2] !== expected) wrong.push(`${file}: ${m[1]} ${m[2]} (default ${expected})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("the README lists every error code the API answers with, each classified code with its status", () => {
    const readme = text("README.md");
    // The server's status table: tool error codes are listed in the tools' paragraph; every other code is named
    // with its status, e.g. `chat_busy` (409.
    for (const [code, status] of Object.entries(HTTP_STATUS_BY_CODE)) {
      if (TOOL_ERROR_CODES.includes(code)) expect(readme).toContain(`\`${code}\``);
      else expect(readme, `README: \`${code}\` (${status}`).toMatch(new RegExp(`\`${code}\` \\(${status}`));
    }
    // Codes the HTTP layer itself answers.
    for (const code of ["bad_request", "unauthorized", "payload_too_large", "request_timeout", "shutting_down"]) {
      expect(readme).toContain(`\`${code}\``);
    }
  });

  it("the README's relative links point at files that exist; no foreign runtime is named", () => {
    for (const m of text("README.md").matchAll(/\]\(((?!https?:)[^)#]+)/g))
      expect(existsSync(`${root}${m[1]}`)).toBe(true);
    for (const file of docs) expect(text(file)).not.toMatch(/\bBun\./);
  });

  it("docs/web.md on ranges and localhost: a CIDR admits the literal, not the localhost name; the name admits it", async () => {
    const resolver = async () => ["127.0.0.1"];
    await expect(assertNoSsrf("http://127.0.0.1/", { allowedHosts: ["127.0.0.0/8"], resolver })).resolves.toBeTruthy();
    await expect(assertNoSsrf("http://localhost/", { allowedHosts: ["127.0.0.0/8"], resolver })).rejects.toMatchObject({
      code: "access_denied",
    });
    await expect(assertNoSsrf("http://localhost/", { allowedHosts: ["localhost"], resolver })).resolves.toBeTruthy();
    // A name that resolves into a listed range is admitted, as the doc says.
    await expect(
      assertNoSsrf("http://intranet.test/", { allowedHosts: ["10.0.0.0/8"], resolver: async () => ["10.1.2.3"] }),
    ).resolves.toBeTruthy();
  });

  it("the README's configuration table names exactly the variables the configuration reader reads", () => {
    const readme = text("README.md");
    const section = readme.slice(
      readme.indexOf("## Configuration"),
      readme.indexOf("\n## ", readme.indexOf("## Configuration") + 5),
    );
    const table = section.split("\n").filter((line) => line.startsWith("| `TOOLHOST_"));
    const documented = new Set(table.flatMap((line) => line.split(" | ")[0]!.match(/TOOLHOST_[A-Z0-9_]+/g) ?? []));
    expect([...documented].sort()).toEqual([...new Set(Object.values(CONFIG_VARIABLES))].sort());
  });

  it("docs/providers-mapping.md: registerTool refuses a dotted name", async () => {
    const { ToolRegistryStore } = (await sourceModules.toolhost()) as typeof import("../../src/index.js");
    const registry = new ToolRegistryStore();
    expect(() =>
      registry.register({
        definition: { name: "files.read", description: "x", parameters: { type: "object", properties: {} } },
        settings: {} as never,
        execute: async () => null,
      } as never),
    ).toThrow(/Invalid tool name "files\.read"/);
  });
});
