/**
 * Path and host rules, rule examples checked on save, patch paths, and secret redaction.
 */
import { mkdirSync, symlinkSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { evaluateApproval, patchPaths } from "../../src/core/approval/policy.js";
import { invalidRules, matchHostRule, matchPathRule } from "../../src/core/approval/rules.js";
import { redactText, redactValue } from "../../src/core/redact.js";
import { defaultRegistry } from "../../src/core/registry.js";
import type { ApprovalSubject } from "../../src/core/types.js";
import { registerBuiltinTools } from "../../src/tools/index.js";
import { tempDir } from "../helpers/server.js";

registerBuiltinTools();

const tool = (name: string) => {
  const t = defaultRegistry.get(name);
  if (!t) throw new Error(`no tool ${name}`);
  return t;
};

describe("path rules", () => {
  it("resolve relative globs against the working directory, ~ against the home directory", () => {
    expect(matchPathRule("notes/**", "/w/notes/a.md", "/w")).toBe(true);
    expect(matchPathRule("notes", "/w/notes/deep/a.md", "/w")).toBe(true);
    expect(matchPathRule("notes/**", "/w/src/notes/a.md", "/w")).toBe(false);
    expect(matchPathRule("*.md", "/w/a.md", "/w")).toBe(true);
    expect(matchPathRule("~/.ssh/**", join(homedir(), ".ssh/id_ed25519"), "/w")).toBe(true);
    expect(matchPathRule("/etc/**", "/etc/passwd", "/w")).toBe(true);
    expect(matchPathRule("/etc/**", "/etcetera/x", "/w")).toBe(false);
  });

  it("a deny rule also catches a path that reaches the denied place through a symlink", async () => {
    const dir = tempDir("toolhost-approval-link-");
    mkdirSync(join(dir, "secrets"));
    symlinkSync(join(dir, "secrets"), join(dir, "innocent"));
    const verdict = await evaluateApproval(
      tool("write_file"),
      { path: "innocent/key.pem", content: "x" },
      { enabled: true, values: { approval: "allow", approvalRules: [{ decision: "deny", match: "secrets/**" }] } },
      { baseDirectory: dir },
    );
    expect(verdict.decision).toBe("deny");
  });

  it("apply_patch is matched on every file its patch names", async () => {
    const patch =
      "*** Begin Patch\n*** Update File: src/a.ts\n@@\n-a\n+b\n*** Add File: secrets/x\n+x\n*** End Patch\n";
    expect(patchPaths(patch)).toEqual(["src/a.ts", "secrets/x"]);
    expect(patchPaths("--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-a\n+b\n")).toEqual(["one.txt"]);
    const verdict = await evaluateApproval(
      tool("apply_patch"),
      { patch },
      { enabled: true, values: { approval: "allow", approvalRules: [{ decision: "deny", match: "secrets/**" }] } },
      { baseDirectory: "/w" },
    );
    expect(verdict).toMatchObject({ decision: "deny", rule: { match: "secrets/**" } });
  });
});

describe("apply_patch's rules see every file the tool would touch", () => {
  // Each patch is one apply_patch applies to secrets/…: the approval must read it as the tool does.
  const patches: [string, string][] = [
    [
      "a git rename without ---/+++ lines",
      "diff --git a/notes.txt b/secrets/x\nsimilarity index 100%\nrename from notes.txt\nrename to secrets/x\n",
    ],
    ["a new empty file (git header only)", "diff --git a/secrets/new b/secrets/new\nnew file mode 100644\n"],
    ["a git-quoted name", '--- /dev/null\n+++ "b/secrets/caf\\303\\251"\n@@ -0,0 +1 @@\n+x\n'],
    ["padded envelope markers", "*** Begin Patch\n   *** Add File: secrets/x\n+x\n*** End Patch\n"],
  ];
  it.each(patches)("%s", async (_what, patch) => {
    const verdict = await evaluateApproval(
      tool("apply_patch"),
      { patch },
      { enabled: true, values: { approval: "allow", approvalRules: [{ decision: "deny", match: "secrets/**" }] } },
      { baseDirectory: "/w" },
    );
    expect(verdict).toMatchObject({ decision: "deny", rule: { match: "secrets/**" } });
  });
});

describe("host rules", () => {
  it("match a host exactly or its subdomains", () => {
    expect(matchHostRule("example.com", "example.com")).toBe(true);
    expect(matchHostRule("example.com", "EXAMPLE.com.")).toBe(true);
    expect(matchHostRule("example.com", "api.example.com")).toBe(false);
    expect(matchHostRule("*.example.com", "api.example.com")).toBe(true);
    expect(matchHostRule("*.example.com", "example.com")).toBe(false);
    expect(matchHostRule("*.example.com", "badexample.com")).toBe(false);
  });

  it("web_fetch asks for an unparsable URL even when the setting allows", async () => {
    const verdict = await evaluateApproval(
      tool("web_fetch"),
      { url: "not a url" },
      {
        enabled: true,
        values: { approval: "allow", approvalRules: [{ decision: "allow", match: "example.com" }] },
      },
      { baseDirectory: "/w" },
    );
    expect(verdict.decision).toBe("ask");
    const hosted = await evaluateApproval(
      tool("web_fetch"),
      { url: "https://docs.example.com/x" },
      {
        enabled: true,
        values: { approval: "ask", approvalRules: [{ decision: "allow", match: "*.example.com" }] },
      },
      { baseDirectory: "/w" },
    );
    expect(hosted.decision).toBe("allow");
  });
});

describe("rule examples", () => {
  it("name the rule and the example that failed", () => {
    const path: ApprovalSubject = { kind: "path", arguments: ["path"] };
    expect(invalidRules(path, [{ decision: "ask", match: "notes/**", mustMatch: ["notes/a"] }])).toBeUndefined();
    expect(invalidRules(path, [{ decision: "ask", match: "notes/**", mustMatch: ["docs/a"] }])).toContain('"docs/a"');
    expect(invalidRules(path, [{ decision: "ask", match: "notes/**", mustNotMatch: ["notes/b"] }])).toContain(
      "must not match",
    );
    const host: ApprovalSubject = { kind: "host", argument: "url" };
    expect(
      invalidRules(host, [{ decision: "deny", match: "evil.example", mustMatch: ["https://evil.example/x"] }]),
    ).toBeUndefined();
    expect(invalidRules(host, [{ decision: "deny", match: "not a host" }])).toContain("host rule");
    const argv: ApprovalSubject = { kind: "shell", argument: "argv", dialect: "argv" };
    expect(invalidRules(argv, [{ decision: "deny", match: "git push; rm" }])).toContain("without shell operators");
  });

  it("is the tool setting's own validation: saving a failing rule is refused", () => {
    const rules = tool("write_file").settings.parameterDescriptors.find((d) => d.name === "approvalRules");
    expect(rules?.type).toBe("object[]");
    expect(rules?.validate?.([{ decision: "allow", match: "src/**", mustMatch: ["lib/x"] }])).toContain("lib/x");
  });
});

describe("redaction", () => {
  it("hides secrets in keys, headers, URLs, flags and well-known token formats", () => {
    expect(redactValue({ apiKey: "abc", nested: { password: "p", keep: "v", maxTokens: 5 } })).toEqual({
      apiKey: "[redacted]",
      nested: { password: "[redacted]", keep: "v", maxTokens: 5 },
    });
    expect(redactText("curl -H 'Authorization: Bearer abcdefghijkl' https://x")).not.toContain("abcdefghijkl");
    expect(redactText("git clone https://user:hunter2@example.com/r.git")).not.toContain("hunter2");
    expect(redactText("tool --password s3cret --name x")).toBe("tool --password [redacted] --name x");
    expect(redactText("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx node app.js")).not.toContain("sk-abcdef");
    expect(redactText("token th_AbCdEfGhIjKlMnOpQrStUvWxYz012345")).not.toContain("th_AbCd");
    expect(redactText("plain text stays")).toBe("plain text stays");
  });
});
