/**
 * The end-to-end chat scenario shared by the CLI and HTTP tests: a scripted fake model that checks the tool definitions
 * it receives, lists a real directory with list_directory, reads a file it found with read_file, and answers with text
 * from that file. Talks to Toolhost only through a provider's wire format.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import type { FakeRequest, FakeTurn } from "../fakes/provider-server.js";

/** A line only the scenario's source file contains; the final answer must quote it. */
export const SECRET_LINE = "The launch code is PELICAN-7731.";

/** Where the secret lives, relative to the project (grep reports it relative to the chat working directory). */
export const SECRET_FILE = "src/config/launch.ts";

/** Creates the project directory the chat binds (`prefix` absolute, or under the temp directory). */
export function makeProject(prefix = "toolhost-e2e-project-"): string {
  const dir = mkdtempSync(isAbsolute(prefix) ? prefix : join(tmpdir(), prefix));
  writeFileSync(join(dir, "README.md"), "# Demo project\nSee src/.\n");
  mkdirSync(join(dir, "src", "config"), { recursive: true });
  writeFileSync(join(dir, "src", "index.ts"), 'export { launchCode } from "./config/launch.js";\n');
  writeFileSync(
    join(dir, "src", "config", "launch.ts"),
    `// ${SECRET_LINE}\nexport const launchCode = "PELICAN-7731";\n`,
  );
  return dir;
}

function parseResult(request: FakeRequest, tool: string): any {
  const result = request.lastToolResults[0];
  if (!result) throw new Error(`expected the ${tool} result in the request`);
  if (result.isError) throw new Error(`${tool} failed: ${result.content}`);
  return JSON.parse(result.content);
}

/**
 * The four-turn script of a model that explores before answering. Turn 1 checks that list_directory, grep and
 * read_file are offered with the expected schema shape (the strict dialect on OpenAI Responses) and that the
 * system prompt announces `project`, then lists the directory; turn 2 greps the `src` directory it found for the
 * `launchCode` symbol; turn 3 reads the file grep reported (its path passed straight through); turn 4 quotes the
 * secret line from read_file's content.
 */
export function scenarioScript(provider: string, project: string): FakeTurn[] {
  return [
    {
      kind: "tools",
      text: "Let me look at the directory.",
      calls: [{ name: "list_directory", arguments: { path: "." } }],
      expect: (request) => {
        const names = request.tools.map((t) => t.name);
        for (const needed of ["list_directory", "grep", "read_file"]) {
          if (!names.includes(needed)) throw new Error(`tool ${needed} not offered; got ${names.join(", ")}`);
        }
        for (const tool of request.tools.filter((t) => ["list_directory", "grep", "read_file"].includes(t.name))) {
          const schema = tool.parameters as {
            type?: unknown;
            properties?: Record<string, unknown>;
            required?: string[];
            additionalProperties?: unknown;
          };
          if (schema?.type !== "object" || !schema.properties?.path)
            throw new Error(`tool ${tool.name}: unexpected schema shape`);
          if (provider === "openai") {
            // Responses strict dialect: strict flag, closed objects, every property required.
            if (tool.strict !== true) throw new Error(`tool ${tool.name} was not sent strict`);
            if (schema.additionalProperties !== false)
              throw new Error(`tool ${tool.name}: additionalProperties is not false`);
            const missing = Object.keys(schema.properties).filter((k) => !schema.required?.includes(k));
            if (missing.length > 0)
              throw new Error(`tool ${tool.name}: not required in strict mode: ${missing.join(", ")}`);
          }
        }
        if (!request.system?.includes(project))
          throw new Error("the system prompt does not announce the working directory");
        if (!request.lastUserText.includes("launch")) throw new Error(`unexpected user text: ${request.lastUserText}`);
      },
    },
    (request) => {
      const listing = parseResult(request, "list_directory");
      const dir = (listing.entries as { name: string; type: string }[]).find(
        (e) => e.type === "directory" && e.name === "src",
      );
      if (!dir) return { kind: "text", text: "I found no source directory." };
      // Strict models send null for the optional keys they skip.
      const args =
        provider === "openai"
          ? { pattern: "launchCode", path: dir.name, glob: null, caseInsensitive: null }
          : { pattern: "launchCode", path: dir.name };
      return { kind: "tools", calls: [{ name: "grep", arguments: args }] };
    },
    (request) => {
      const grep = parseResult(request, "grep");
      const files = [...new Set((grep.matches as { file: string }[]).map((m) => m.file))].sort();
      const definition = files.find((f) => f.includes("config"));
      if (!definition) return { kind: "text", text: `grep found no definition (${files.join(", ")}).` };
      return { kind: "tools", calls: [{ name: "read_file", arguments: { path: definition } }] };
    },
    (request) => {
      const read = parseResult(request, "read_file");
      const line = String(read.content)
        .split("\n")
        .find((l) => l.includes("launch code"));
      return {
        kind: "text",
        text: `I read ${read.path}. It says: ${line?.replace(/^\s*\d+\s*[\t|:→]?\s*(\/\/\s*)?/, "") ?? "nothing"}`,
      };
    },
  ];
}
