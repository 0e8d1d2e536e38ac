/**
 * The settings page in a real browser: Debian's Chromium driven by playwright-core against a real server on
 * loopback. What a person does: paste a token, see who they are, filter, toggle a tool, edit a list, edit a table
 * of rules, meet a validation error next to the field, reset a setting; a non-admin sees admin-only settings
 * read-only. Screenshots of the main states are kept in test-artifacts/settings-page/ (not committed).
 *
 * Without /usr/bin/chromium (or CHROMIUM_PATH) the file is skipped with a notice, so `npm test` still runs on a
 * machine without a browser; .ci/run installs Chromium and sets TOOLHOST_REQUIRE_BROWSER=1 to make it mandatory.
 */
import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available && process.env.TOOLHOST_REQUIRE_BROWSER === "1") {
  throw new Error(`Chromium is required (TOOLHOST_REQUIRE_BROWSER=1) but ${CHROMIUM} does not exist.`);
}
if (!available) console.warn(`settings page browser tests skipped: no Chromium at ${CHROMIUM} (set CHROMIUM_PATH).`);

const ARTIFACTS = fileURLToPath(new URL("../../test-artifacts/settings-page/", import.meta.url));
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

// One browser, one context and one tab for the file. Each test starts from a tab whose session storage (where the page
// keeps the token; it uses no other storage) is empty, as a new tab's would be. A new tab per test costs a new
// renderer process, ~0.5–1 s of CPU each; the tab that navigates again keeps its renderer.
let browser: Browser | undefined;
let context: BrowserContext | undefined;
let tab: Page | undefined;
async function freshTab(): Promise<Page> {
  if (!tab) {
    browser ??= await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
    context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    tab = await context.newPage();
  } else {
    // The origin the tab shows (every test server is on 127.0.0.1, each on a port of its own).
    await tab.evaluate("sessionStorage.clear()");
  }
  tab.setDefaultTimeout(8000);
  return tab;
}
afterAll(async () => {
  await context?.close();
  await browser?.close();
});

describe.skipIf(!available)("settings page (Chromium)", () => {
  let server: TestServer;
  let anaToken: string;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    server = await startTestServer();
    anaToken = (await server.ctx.tokens.create("ana", "browser test")).token;
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  const shot = (page: Page, name: string) => page.screenshot({ path: `${ARTIFACTS}${name}.png`, fullPage: true });
  const tool = (page: Page, name: string) => page.locator(`details.tool[data-tool="${name}"]`);
  const field = (page: Page, toolName: string, param: string) =>
    tool(page, toolName).locator(`.field[data-param="${param}"]`);
  const saved = async (name: string) =>
    (await (await server.api(`/api/settings/tools/${name}`)).json()) as {
      enabled: boolean;
      parameters: Record<string, unknown>;
    };

  async function signIn(page: Page, token: string) {
    await page.goto(server.server.url);
    await page.fill("#token", token);
    await page.click("#login button");
    await page.locator("details.tool").first().waitFor();
  }

  it("signs in with a pasted token, shows the user, filters, and stays compact", async () => {
    const page = await freshTab();
    await page.goto(server.server.url);
    await shot(page, "1-signed-out");
    await page.fill("#token", "th_not_a_real_token");
    await page.click("#login button");
    await expect.poll(() => page.textContent("#status")).toContain("unauthorized");

    await signIn(page, server.token);
    expect(await page.textContent("#whoami")).toBe("Signed in as local (admin)");
    const count = await page.locator("details.tool").count();
    expect(count).toBeGreaterThan(10);
    // Collapsed, every tool fits on about two screens.
    expect(await page.evaluate("document.body.scrollHeight")).toBeLessThan(1600);
    await shot(page, "2-tools");

    await page.fill("#filter", "timezone");
    expect(await page.locator("details.tool:not([hidden])").count()).toBe(1);
    expect(await page.locator("details.tool:not([hidden])").getAttribute("data-tool")).toBe("get_current_datetime");
    expect(await page.textContent("#status")).toBe(`1 of ${count} tools match.`);
    await tool(page, "get_current_datetime").locator("summary").click();
    // Descriptions are visible, not hidden in a tooltip.
    await expect
      .poll(() => field(page, "get_current_datetime", "defaultTimezone").locator(".desc").isVisible())
      .toBe(true);
    await shot(page, "3-filtered-open");
    await page.fill("#filter", "");
    expect(await page.locator("details.tool:not([hidden])").count()).toBe(count);
  });

  it("toggles a tool, edits a list and a table of rules, shows a validation error next to the field, resets", async () => {
    const page = await freshTab();
    await signIn(page, server.token);

    // Toggle: saved at once.
    await tool(page, "web_fetch").locator("input.enabled").uncheck();
    await expect.poll(() => tool(page, "web_fetch").locator(".state").textContent()).toBe("Disabled.");
    expect((await saved("web_fetch")).enabled).toBe(false);
    await tool(page, "web_fetch").locator("input.enabled").check();
    await expect.poll(async () => (await saved("web_fetch")).enabled).toBe(true);

    // A list, edited as a list.
    const card = tool(page, "list_directory");
    await card.locator("summary").click();
    const denied = field(page, "list_directory", "deniedPaths");
    await denied.locator("button.add").click();
    await denied.locator(".item input").last().fill("/srv/secret");
    await denied.locator("button.add").click();
    await denied.locator(".item input").last().fill("/srv/private");
    await card.locator("button.save").click();
    await expect.poll(() => tool(page, "list_directory").locator(".msg").textContent()).toBe("Saved.");
    expect((await saved("list_directory")).parameters.deniedPaths).toEqual(["/srv/secret", "/srv/private"]);
    // The card was refreshed from the answer: the entries are there as list items.
    expect(await field(page, "list_directory", "deniedPaths").locator(".item input").count()).toBe(2);
    await field(page, "list_directory", "deniedPaths").locator(".item button.remove").first().click();
    await tool(page, "list_directory").locator("button.save").click();
    await expect.poll(async () => (await saved("list_directory")).parameters.deniedPaths).toEqual(["/srv/private"]);

    // A validation error appears next to the field it concerns.
    const maxEntries = field(page, "list_directory", "maxEntries");
    await maxEntries.locator("input").fill("999999999");
    await tool(page, "list_directory").locator("button.save").click();
    await expect.poll(() => maxEntries.locator(".error").textContent()).toMatch(/invalid_settings/);
    await shot(page, "4-validation-error");

    // A valid value, then reset to the default.
    await maxEntries.locator("input").fill("7");
    await tool(page, "list_directory").locator("button.save").click();
    await expect.poll(async () => (await saved("list_directory")).parameters.maxEntries).toBe(7);
    // The page re-renders the card from the server's answer once it arrives, which can trail the stored value:
    // what the page shows is polled, not read once.
    const refreshed = field(page, "list_directory", "maxEntries");
    await expect.poll(() => refreshed.locator(".error").textContent()).toBe("");
    await expect.poll(() => refreshed.locator("button.reset").isDisabled()).toBe(false);
    await refreshed.locator("button.reset").click();
    await expect.poll(async () => (await saved("list_directory")).parameters.maxEntries).not.toBe(7);
    const defaultValue = (await saved("list_directory")).parameters.maxEntries;
    await expect
      .poll(() => field(page, "list_directory", "maxEntries").locator("input").inputValue())
      .toBe(String(defaultValue));
    await expect
      .poll(() => field(page, "list_directory", "maxEntries").locator("button.reset").isDisabled())
      .toBe(true);

    // A table of rules (object[]), rendered from its field descriptors.
    const rules = field(page, "list_directory", "approvalRules");
    await rules.locator("button.add").click();
    const row = rules.locator("tr.row").last();
    await row.locator('td[data-field="decision"] select').selectOption("deny");
    await row.locator('td[data-field="match"] input').fill("/srv/**");
    await tool(page, "list_directory").locator("button.save").click();
    await expect
      .poll(async () => (await saved("list_directory")).parameters.approvalRules)
      .toEqual([expect.objectContaining({ decision: "deny", match: "/srv/**" })]);
    await shot(page, "5-edited");
  });

  it("never saves over a change made since the card was shown: it shows the settings as they are now instead", async () => {
    const page = await freshTab();
    await signIn(page, server.token);
    const card = tool(page, "grep");
    await card.locator("summary").click();
    // Meanwhile another tab (or an admin, or an "allow always" answer) changes the same list.
    const other = await server.api("/api/settings/tools/grep", {
      method: "PUT",
      json: { parameters: { deniedPaths: ["/srv/elsewhere"] } },
    });
    expect(other.status).toBe(200);
    const denied = field(page, "grep", "deniedPaths");
    await denied.locator("button.add").click();
    await denied.locator(".item input").last().fill("/srv/mine");
    await card.locator("button.save").click();
    await expect.poll(() => tool(page, "grep").locator(".msg").textContent()).toMatch(/changed since the page/);
    // The other change survived, and the card now shows it.
    expect((await saved("grep")).parameters.deniedPaths).toEqual(["/srv/elsewhere"]);
    await expect
      .poll(() => field(page, "grep", "deniedPaths").locator(".item input").first().inputValue())
      .toBe("/srv/elsewhere");
    // Made again on what is there now, the change applies.
    const again = field(page, "grep", "deniedPaths");
    await again.locator("button.add").click();
    await again.locator(".item input").last().fill("/srv/mine");
    await tool(page, "grep").locator("button.save").click();
    await expect
      .poll(async () => (await saved("grep")).parameters.deniedPaths)
      .toEqual(["/srv/elsewhere", "/srv/mine"]);
  });

  it("shows a non-admin the admin-only settings read-only, with the reason", async () => {
    const page = await freshTab();
    await signIn(page, anaToken);
    expect(await page.textContent("#whoami")).toBe("Signed in as ana");
    await tool(page, "read_file").locator("summary").click();
    const allowed = field(page, "read_file", "allowedPaths");
    expect(await allowed.locator("button.add").isDisabled()).toBe(true);
    expect(await allowed.textContent()).toContain("Only an admin can change this");
    // What ana may change stays editable.
    expect(await field(page, "read_file", "deniedPaths").locator("button.add").isDisabled()).toBe(false);
    // Enabling a shell tool is for admins.
    expect(await tool(page, "shell_exec").locator("input.enabled").isDisabled()).toBe(true);
    await shot(page, "6-non-admin");
  });
});

describe.skipIf(!available)("settings page at phone width, 400 px (Chromium)", () => {
  let server: TestServer;
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    server = await startTestServer();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  /** Elements that stick out of the viewport on the right, or that have no width: none should. */
  const overflowing = (page: Page, selector: string) =>
    page.evaluate(
      ([sel, width]) =>
        [...(globalThis as any).document.querySelectorAll(sel)]
          .filter((e: any) => e.offsetParent !== null)
          .filter((e: any) => {
            const r = e.getBoundingClientRect();
            return r.right > width + 0.5 || r.width < 1;
          })
          .map((e: any) => e.outerHTML.slice(0, 80)),
      [selector, 400] as const,
    );

  it("fits the screen: no cut-off buttons, list inputs visible, ranges shown, and a sign-out", async () => {
    const page = await freshTab();
    await page.setViewportSize({ width: 400, height: 800 });
    try {
      await page.goto(server.server.url);
      await page.screenshot({ path: `${ARTIFACTS}8-narrow-signed-out.png`, fullPage: true });
      expect(await overflowing(page, "button, input")).toEqual([]);
      await page.fill("#token", server.token);
      await page.click("#login button");
      await page.locator("details.tool").first().waitFor();
      expect(await page.isVisible("#signout")).toBe(true);
      // Open the tools with lists, numbers and a table of rules.
      for (const name of ["read_file", "list_directory", "shell_exec"]) {
        await page.locator(`details.tool[data-tool="${name}"] summary`).click();
      }
      await page.locator('details.tool[data-tool="read_file"] .field[data-param="deniedPaths"] button.add').click();
      expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(400);
      expect(await overflowing(page, "button, input:not(.rows-editor input), select:not(.rows-editor select)")).toEqual(
        [],
      );
      const entry = page
        .locator('details.tool[data-tool="read_file"] .field[data-param="deniedPaths"] .item input')
        .first();
      expect((await entry.boundingBox())!.width).toBeGreaterThan(150);
      // A number shows its range before saving, and a value outside it is marked at once.
      const maxEntries = page.locator('details.tool[data-tool="list_directory"] .field[data-param="maxEntries"]');
      expect(await maxEntries.locator(".range").textContent()).toMatch(/^\d+–\d+/);
      await maxEntries.locator("input").fill("999999999");
      expect(
        await maxEntries
          .locator("input")
          .evaluate((i) => (i as unknown as { validity: { rangeOverflow: boolean } }).validity.rangeOverflow),
      ).toBe(true);
      await page.screenshot({ path: `${ARTIFACTS}9-narrow-open.png`, fullPage: true });
      await page.locator("#token").scrollIntoViewIfNeeded();
      await page.screenshot({ path: `${ARTIFACTS}10-narrow-top.png` });
      await maxEntries.scrollIntoViewIfNeeded();
      await page.screenshot({ path: `${ARTIFACTS}11-narrow-fields.png` });

      await page.click("#signout");
      expect(await page.locator("details.tool").count()).toBe(0);
      expect(await page.evaluate("sessionStorage.getItem('toolhost-token')")).toBeNull();
      expect(await page.textContent("#status")).toContain("Signed out");
    } finally {
      await page.setViewportSize({ width: 1100, height: 800 });
    }
  });
});

describe.skipIf(!available)("settings page: an admin removes a lock set for another user (Chromium)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    // An admin sets ana's denied paths: that is a lock on ana's account.
    await server.ctx.settings.update("ana", "read_file", { parameters: { deniedPaths: ["/srv/x"] } }, { admin: true });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("an admin changes ana's settings on the page: saved for ana through the admin route, locked unless unticked", async () => {
    const page = await freshTab();
    await page.goto(server.server.url);
    await page.fill("#token", server.token);
    await page.click("#login button");
    await page.locator("details.tool").first().waitFor();
    await page.fill("#viewas-user", "ana");
    await page.click("#viewas button");
    await expect.poll(() => page.locator("#viewing").textContent()).toContain("Viewing ana");
    const card = page.locator('details.tool[data-tool="list_directory"]');
    await card.locator("summary").click();
    await card.locator('.field[data-param="maxEntries"] input').fill("12");
    await card.locator("button.save").click();
    await expect
      .poll(async () => (await server.ctx.settings.get("ana", "list_directory")).parameters.maxEntries)
      .toBe(12);
    expect((await server.ctx.settings.get("ana", "list_directory")).lockedKeys).toEqual(["maxEntries"]);
    // The admin's own settings are untouched.
    expect((await server.ctx.settings.get("local", "list_directory")).parameters.maxEntries).not.toBe(12);
    await page.locator("#lock-changes").uncheck();
    const fresh = page.locator('details.tool[data-tool="list_directory"]');
    await fresh.locator('.field[data-param="maxResultLines"] input').fill("3000");
    await fresh.locator("button.save").click();
    await expect
      .poll(async () => (await server.ctx.settings.get("ana", "list_directory")).parameters.maxResultLines)
      .toBe(3000);
    expect((await server.ctx.settings.get("ana", "list_directory")).lockedKeys).toEqual(["maxEntries"]);
    await page.click("#viewas-back");
    await expect.poll(() => page.locator("#viewing").isHidden()).toBe(true);
  });

  it("shows ana's locks with an Unlock button; unlocking keeps the value and lifts the lock", async () => {
    const page = await freshTab();
    await page.goto(server.server.url);
    await page.fill("#token", server.token);
    await page.click("#login button");
    await page.locator("details.tool").first().waitFor();
    await page.fill("#viewas-user", "ana");
    await page.click("#viewas button");
    await expect.poll(() => page.locator("#viewing").textContent()).toContain("Viewing ana");
    const card = page.locator('details.tool[data-tool="read_file"]');
    await card.locator("summary").click();
    const field = card.locator('.field[data-param="deniedPaths"]');
    expect(await field.textContent()).toContain("Locked for ana by an admin");
    // The admin may change the value too (not read-only for them).
    expect(await field.locator("button.add").isDisabled()).toBe(false);
    expect(await field.locator(".item input").first().inputValue()).toBe("/srv/x");
    await page.screenshot({ path: `${ARTIFACTS}7-admin-unlock.png`, fullPage: true });
    await field.locator("button.unlock").click();
    await expect
      .poll(async () => (await server.ctx.settings.get("ana", "read_file")).lockedKeys)
      .not.toContain("deniedPaths");
    expect((await server.ctx.settings.get("ana", "read_file")).parameters.deniedPaths).toEqual(["/srv/x"]);
    await expect.poll(() => card.locator(".state").textContent()).toBe("Unlocked deniedPaths.");
    await page.click("#viewas-back");
    await expect.poll(() => page.locator("#viewing").isHidden()).toBe(true);
  });
});
