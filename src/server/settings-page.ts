/**
 * The settings page served at `/`: one self-contained HTML document (no build step, no external assets) over the
 * same JSON API as every other client (GET /api/me, GET/PUT /api/settings/tools), so the API's rules and errors
 * apply. A person pastes a token (kept in sessionStorage only), sees who they are signed in as, filters the tools,
 * and opens one to edit it.
 *
 * Every setting is rendered from its descriptor, whatever the tool: `boolean` as a checkbox, `string` as a text
 * field (a menu when it has allowed values), `integer`/`number` as a number field with its range and unit,
 * `string[]` as a list of text fields (add, remove), and `object[]` as a table with one row per entry whose cells
 * are rendered by the same rules from the descriptor's `fields`. Each setting shows its description, a reset to
 * its default, and the API's validation error next to it; a number field shows its range beside it and is marked
 * while its value lies outside. Settings an admin locked, and admin-only settings for a non-admin, are shown
 * read-only with the reason. An admin can open another user's settings and change them (through
 * PUT /api/admin/users/:user/settings/tools/:tool, locked for that user unless "Lock what I save" is off) and remove
 * locks. Every save sends the shown version as If-Match: a 412 (changed meanwhile) overwrites nothing and shows the
 * tool as it is now. Sign out forgets the token. The layout works down to phone width (about 400 px).
 */
export const SETTINGS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Toolhost settings</title>
<style>
  :root { --line: #d9d9e0; --muted: #60606c; --err: #b00020; --ok: #0a7a2f; --accent: #2f5bd3; }
  * { box-sizing: border-box; }
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2rem auto; max-width: 64rem; padding: 0 1rem; color: #1b1b1f; }
  h1 { font-size: 1.25rem; margin: 0 0 .6rem; }
  .muted { color: var(--muted); } .err { color: var(--err); white-space: pre-wrap; } .ok { color: var(--ok); }
  #bar { display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; margin-bottom: .6rem; }
  #login { display: flex; gap: .4rem; } #token { width: 22rem; }
  #whoami { font-weight: 600; } #filter { width: 16rem; }
  input[type=text], input[type=number], input[type=password], input[type=search], select { padding: .25rem .35rem; border: 1px solid #b9b9c4; border-radius: 4px; font: inherit; }
  button { font: inherit; padding: .2rem .7rem; border: 1px solid #b9b9c4; border-radius: 4px; background: #f4f4f8; cursor: pointer; }
  button:disabled { cursor: default; opacity: .5; }
  details.tool { border: 1px solid var(--line); border-radius: 6px; margin: .35rem 0; }
  details.tool > summary { display: flex; gap: .7rem; align-items: center; padding: .35rem .7rem; cursor: pointer; list-style: none; }
  details.tool > summary::-webkit-details-marker { display: none; }
  details.tool > summary::before { content: "\\25B8"; color: var(--muted); }
  details.tool[open] > summary::before { content: "\\25BE"; }
  .name { font-weight: 600; font-family: ui-monospace, monospace; } .title { color: var(--muted); flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .tag { font-size: .72rem; border-radius: 4px; padding: 0 .35rem; background: #eef; white-space: nowrap; }
  .tag.warn { background: #fff1d6; } .tag.lock { background: #f1e6ff; }
  .body { padding: .2rem .9rem .7rem 1.9rem; border-top: 1px solid var(--line); }
  .field { display: grid; grid-template-columns: 13rem 1fr auto; gap: .15rem .8rem; padding: .4rem 0; border-bottom: 1px dashed #ececf2; }
  .field:last-of-type { border-bottom: 0; }
  .field > label { font-family: ui-monospace, monospace; font-size: .86rem; padding-top: .2rem; word-break: break-word; }
  .field .desc { grid-column: 2 / 4; font-size: .82rem; color: var(--muted); }
  .field .error { grid-column: 2 / 4; font-size: .82rem; }
  .field .reset { align-self: start; }
  .field .control input[type=text] { width: 100%; } .field .control input[type=number] { width: 9rem; }
  .list .item { display: flex; gap: .3rem; margin-bottom: .2rem; } .list .item input { flex: 1; }
  table.rows { border-collapse: collapse; width: 100%; } table.rows th { text-align: left; font-weight: 500; font-size: .78rem; color: var(--muted); }
  table.rows td { padding: .15rem .25rem .15rem 0; vertical-align: top; } table.rows td input[type=text] { width: 100%; }
  .actions { display: flex; gap: .6rem; align-items: center; margin-top: .5rem; }
  .unavailable { font-size: .85rem; margin: .3rem 0; }
  .range { font-size: .78rem; color: var(--muted); margin-left: .4rem; white-space: nowrap; }
  input:invalid { border-color: var(--err); outline-color: var(--err); }
  .rows-editor { overflow-x: auto; }
  #signout[hidden], #lock-label[hidden] { display: none; }
  /* Phone width: one column, nothing wider than the screen. */
  @media (max-width: 640px) {
    body { margin: .6rem auto; padding: 0 .5rem; }
    #login, #token, #filter, #viewas { width: 100%; } #token, #viewas-user { flex: 1; min-width: 0; }
    #viewas { display: flex; flex-wrap: wrap; gap: .3rem; }
    details.tool > summary { flex-wrap: wrap; gap: .3rem .5rem; padding: .35rem .5rem; }
    .title { flex-basis: 100%; order: 5; white-space: normal; }
    .body { padding: .2rem .5rem .6rem .6rem; }
    .field { grid-template-columns: minmax(0, 1fr) auto; }
    .field > label { grid-column: 1 / 2; } .field .reset { grid-column: 2; grid-row: 1; }
    .field .control, .field .desc, .field .error { grid-column: 1 / 3; min-width: 0; }
    .list .item input { min-width: 0; }
    table.rows td input[type=text] { min-width: 6rem; }
  }
</style>
</head>
<body>
<h1>Toolhost — tool settings</h1>
<div id="bar">
  <form id="login"><input id="token" type="password" placeholder="API token th_…" autocomplete="off" aria-label="API token"> <button>Sign in</button></form>
  <span id="whoami" class="muted"></span> <button type="button" id="signout" hidden>Sign out</button>
  <input id="filter" type="search" placeholder="Filter tools and settings…" aria-label="Filter" hidden>
  <form id="viewas" hidden><input id="viewas-user" type="text" placeholder="user id" aria-label="Another user" size="12"> <button>Open their settings</button> <label id="lock-label" hidden title="Lock what you save for this user, so they cannot change it back"><input type="checkbox" id="lock-changes" checked> Lock what I save</label> <button type="button" id="viewas-back" hidden>Back to my settings</button></form>
</div>
<p id="viewing" class="tag lock" hidden></p>
<p id="status" class="muted">Paste an API token (printed on the server's first start, or <code>toolhost token create --user NAME</code>).</p>
<div id="tools"></div>
<script>
"use strict";
const $ = (s, root = document) => root.querySelector(s);
const $$ = (s, root = document) => [...root.querySelectorAll(s)];
const el = (tag, props = {}, ...children) => { const e = document.createElement(tag); for (const [k, v] of Object.entries(props)) { if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else if (k in e) e[k] = v; else e.setAttribute(k, v); } e.append(...children); return e; };
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
let me = null; let tools = [];
// An admin may open another user's settings: change them (locked for that user unless "Lock what I save" is off)
// and remove the locks admins set for them.
let viewUser = null;
const settingsPath = () => viewUser ? "/api/admin/users/" + encodeURIComponent(viewUser) + "/settings/tools" : "/api/settings/tools";
const status = (text, cls = "muted") => { const s = $("#status"); s.textContent = text; s.className = cls; };
const token = () => sessionStorage.getItem("toolhost-token") || "";
class ApiError extends Error { constructor(body, status) { super((body.error && (body.error.code + ": " + body.error.message)) || ("HTTP " + status)); this.body = body; this.status = status; } }
async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { ...init.headers, "authorization": "Bearer " + token(), "content-type": "application/json" } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(body, res.status);
  return body;
}

// ---- one renderer per descriptor type; each returns { node, read() } ----
function scalarInput(d, value, disabled) {
  let input;
  if (d.type === "boolean") { input = el("input", { type: "checkbox", checked: !!value }); }
  else if (d.type === "string" && d.allowedValues) {
    input = el("select");
    for (const v of d.allowedValues) input.append(el("option", { value: v, text: v, selected: v === value }));
  } else if (d.type === "integer" || d.type === "number") {
    input = el("input", { type: "number", value: value ?? "" });
    if (d.min !== undefined) input.min = d.min; if (d.max !== undefined) input.max = d.max;
    input.step = d.type === "integer" ? "1" : "any";
    // The range is shown beside the input, and a value outside it is marked before saving.
    if (d.min !== undefined || d.max !== undefined) {
      const range = (d.min ?? "…") + "–" + (d.max ?? "…") + (d.unit ? " " + d.unit : "");
      input.title = "From " + (d.min ?? "any") + " to " + (d.max ?? "any") + (d.unit ? " " + d.unit : "");
      input.disabled = disabled;
      const read = () => input.value.trim() === "" ? null : Number(input.value);
      return { node: el("span", { class: "number" }, input, el("span", { class: "range", text: range })), read, input };
    }
  } else { input = el("input", { type: "text", value: value ?? "" }); }
  input.disabled = disabled;
  const read = () => d.type === "boolean" ? input.checked
    : (d.type === "integer" || d.type === "number") ? (input.value.trim() === "" ? null : Number(input.value))
    : input.value;
  return { node: input, read };
}
function listEditor(d, value, disabled) {
  const box = el("div", { class: "list" });
  const items = el("div", { class: "items" });
  const addItem = (text) => {
    const input = el("input", { type: "text", value: text, disabled, "aria-label": d.name + " entry" });
    const remove = el("button", { type: "button", class: "remove", text: "Remove", disabled, title: "Remove this entry" });
    const row = el("div", { class: "item" }, input, remove);
    remove.onclick = () => row.remove();
    items.append(row);
    return input;
  };
  for (const v of Array.isArray(value) ? value : []) addItem(String(v));
  const add = el("button", { type: "button", class: "add", text: "Add", disabled });
  add.onclick = () => addItem("").focus();
  box.append(items, add);
  return { node: box, read: () => $$(".item input", items).map((i) => i.value.trim()).filter((v) => v !== "") };
}
function rowsEditor(d, value, disabled) {
  const fields = d.fields || [];
  const table = el("table", { class: "rows" });
  const head = el("tr"); for (const f of fields) head.append(el("th", { text: f.name, title: f.description })); head.append(el("th"));
  const body = el("tbody");
  table.append(el("thead", {}, head), body);
  const readers = new Map();
  const addRow = (entry) => {
    const tr = el("tr", { class: "row" }); const cells = [];
    for (const f of fields) {
      const v = entry && f.name in entry ? entry[f.name] : f.default;
      const c = renderControl(f, v, disabled);
      cells.push([f, c.read]);
      tr.append(el("td", { "data-field": f.name }, c.node));
    }
    const remove = el("button", { type: "button", class: "remove", text: "Remove", disabled });
    remove.onclick = () => { readers.delete(tr); tr.remove(); };
    tr.append(el("td", {}, remove));
    readers.set(tr, cells);
    body.append(tr);
  };
  for (const entry of Array.isArray(value) ? value : []) addRow(entry);
  const add = el("button", { type: "button", class: "add", text: "Add row", disabled });
  add.onclick = () => addRow(null);
  const box = el("div", { class: "rows-editor" }, table, add);
  const read = () => [...readers.values()].map((cells) => {
    const entry = {};
    for (const [f, r] of cells) { const v = r(); if (!(f.default !== undefined && same(v, f.default) && (v === "" || (Array.isArray(v) && v.length === 0)))) entry[f.name] = v; }
    return entry;
  });
  return { node: box, read };
}
function renderControl(d, value, disabled) {
  if (d.type === "string[]") return listEditor(d, value, disabled);
  if (d.type === "object[]") return rowsEditor(d, value, disabled);
  return scalarInput(d, value, disabled);
}

// ---- one tool ----
function lockedReason(tool, d) {
  // An admin editing another user's settings may change everything; locks are shown beside the value.
  if (viewUser) return "";
  // Admins may change anything, their own locks included; locks bind the users they were set for.
  if ((tool.lockedKeys || []).includes(d.name) && !(me && me.admin)) return "Set for you by an admin";
  if (d.adminOnly && !(me && me.admin)) return "Only an admin can change this";
  return "";
}
function renderField(tool, d, card) {
  const reason = lockedReason(tool, d);
  const value = tool.parameters[d.name];
  const control = renderControl(d, value, !!reason);
  const id = "f-" + tool.name + "-" + d.name;
  if (control.input) control.input.id = id;
  else if (control.node.tagName === "INPUT" || control.node.tagName === "SELECT") control.node.id = id;
  const range = d.min !== undefined || d.max !== undefined
    ? (d.type === "string[]" || d.type === "object[]" ? " At most " + d.max + " entries." : " Range " + (d.min ?? "…") + "–" + (d.max ?? "…") + (d.unit ? " " + d.unit : "") + ".")
    : (d.unit ? " In " + d.unit + "." : "");
  const reset = el("button", { type: "button", class: "reset", text: "Reset", title: "Back to the default: " + JSON.stringify(d.default) });
  reset.disabled = !!reason || d.default === undefined || same(value, d.default);
  reset.onclick = () => save(tool, card, { parameters: { [d.name]: null } }, "Reset " + d.name + " to its default.");
  const label = el("label", { htmlFor: id, text: d.name });
  const tags = el("span");
  if (reason) tags.append(" ", el("span", { class: "tag lock", text: reason }));
  if (viewUser && (tool.lockedKeys || []).includes(d.name)) tags.append(" ", el("span", { class: "tag lock", text: "Locked for " + viewUser + " by an admin" }), " ", unlockButton(tool, d.name, card));
  const field = el("div", { class: "field", "data-param": d.name },
    label, el("div", { class: "control" }, control.node, tags), reset,
    el("div", { class: "desc", text: d.description + range }),
    el("div", { class: "error err", role: "alert" }));
  field.readValue = control.read;
  field.editable = !reason;
  return field;
}
function renderTool(tool) {
  const card = el("details", { class: "tool", "data-tool": tool.name });
  const enabled = el("input", { type: "checkbox", class: "enabled", checked: tool.enabled, title: "Enabled" });
  const lockedEnabled = (tool.lockedKeys || []).includes("enabled") && !(me && me.admin);
  enabled.disabled = !tool.canDisable && tool.enabled || lockedEnabled || (!tool.enabled && tool.enablingRequiresAdmin && !(me && me.admin));
  enabled.onclick = (ev) => ev.stopPropagation();
  enabled.onchange = () => save(tool, card, { enabled: enabled.checked }, enabled.checked ? "Enabled." : "Disabled.");
  const summary = el("summary", {}, enabled, el("span", { class: "name", text: tool.name }), el("span", { class: "title", text: tool.title }), el("span", { class: "tag", text: tool.category }));
  if (tool.unavailableReason) summary.append(el("span", { class: "tag warn", text: "not configured" }));
  if (lockedEnabled) summary.append(el("span", { class: "tag lock", text: "on/off set by an admin" }));
  if (viewUser && (tool.lockedKeys || []).includes("enabled")) summary.append(unlockButton(tool, "enabled", card));
  else if (tool.enablingRequiresAdmin && !(me && me.admin) && !tool.enabled) summary.append(el("span", { class: "tag lock", text: "an admin enables this" }));
  const stateMsg = el("span", { class: "state muted" });
  summary.append(stateMsg);
  const body = el("div", { class: "body" }, el("p", { class: "muted", text: tool.description }));
  if (tool.unavailableReason) body.append(el("p", { class: "unavailable err", text: "Not offered to models on this server: " + tool.unavailableReason }));
  for (const d of tool.parameterDescriptors) body.append(renderField(tool, d, card));
  const saveButton = el("button", { type: "button", class: "save", text: "Save" });
  saveButton.onclick = () => {
    const parameters = {};
    for (const f of $$(".field", body)) {
      if (!f.editable) continue;
      const v = f.readValue(); const name = f.dataset.param;
      if (!same(v, tool.parameters[name])) parameters[name] = v;
    }
    if (!Object.keys(parameters).length) { message(card, "Nothing changed.", "muted"); return; }
    save(tool, card, { parameters }, "Saved.");
  };
  if (tool.parameterDescriptors.length) body.append(el("div", { class: "actions" }, saveButton, el("span", { class: "msg", role: "status" })));
  card.append(summary, body);
  card.searchText = [tool.name, tool.title, tool.description, ...tool.parameterDescriptors.map((d) => d.name + " " + d.description)].join(" ").toLowerCase();
  return card;
}
function unlockButton(tool, key, card) {
  const button = el("button", { type: "button", class: "unlock", text: "Unlock", title: "Let " + viewUser + " change " + key + " again (the value stays)" });
  button.onclick = async (ev) => {
    ev.preventDefault(); ev.stopPropagation();
    try {
      const path = "/api/admin/users/" + encodeURIComponent(viewUser) + "/settings/tools/" + encodeURIComponent(tool.name) + "/locks?key=" + encodeURIComponent(key);
      const answer = await api(path, { method: "DELETE" });
      replaceTool(card, answer.tool);
      message($('details.tool[data-tool="' + CSS.escape(tool.name) + '"]'), "Unlocked " + key + ".", "ok", true);
    } catch (e) { message(card, e.message, "err", true); }
  };
  return button;
}
function replaceTool(card, updated) {
  const i = tools.findIndex((t) => t.name === updated.name); tools[i] = updated;
  const fresh = renderTool(updated); fresh.open = card.open;
  card.replaceWith(fresh); applyFilter();
  return fresh;
}
function message(card, text, cls, inSummary) {
  const msg = (!inSummary && $(".msg", card)) || $(".state", card);
  msg.textContent = text; msg.className = (msg.classList.contains("state") ? "state " : "msg ") + cls;
}
async function save(tool, card, body, done) {
  for (const e of $$(".field .error", card)) e.textContent = "";
  try {
    // Another user's settings go through the admin route, locked for them unless "Lock what I save" is off.
    const path = viewUser
      ? "/api/admin/users/" + encodeURIComponent(viewUser) + "/settings/tools/" + encodeURIComponent(tool.name)
      : "/api/settings/tools/" + encodeURIComponent(tool.name);
    const sent = viewUser ? { ...body, lock: $("#lock-changes").checked } : body;
    // Only onto the settings this card shows: a change made meanwhile (another tab, an admin, an "allow always"
    // answer) is never overwritten by values edited from an older copy.
    const ifMatch = { "If-Match": '"' + tool.version + '"' };
    let updated;
    try { updated = await api(path, { method: "PUT", headers: ifMatch, body: JSON.stringify(sent) }); }
    catch (e) {
      if (e.status !== 412) throw e;
      const fresh = replaceTool(card, await api(path));
      message(fresh, "Not saved: these settings changed since the page showed them (another tab, an admin, or an “allow always” answer). They are shown as they are now; make your change again.", "err", "enabled" in body);
      return;
    }
    const fresh = replaceTool(card, updated);
    message(fresh, done, "ok", "enabled" in body);
  } catch (e) {
    const details = (e.body && e.body.error && e.body.error.details) || {};
    const names = [].concat(details.parameters || [], details.parameter || []);
    const target = names.map((n) => $('.field[data-param="' + CSS.escape(n) + '"] .error', card)).find(Boolean);
    if (target) { target.textContent = e.message; card.open = true; }
    if ("enabled" in body) { $(".enabled", card).checked = tool.enabled; message(card, e.message, "err", true); }
    else message(card, target ? "Not saved: see the message next to the setting." : e.message, "err");
  }
}
function applyFilter() {
  const q = $("#filter").value.trim().toLowerCase();
  let shown = 0;
  for (const card of $$("details.tool")) { const hit = !q || card.searchText.includes(q); card.hidden = !hit; if (hit) shown++; }
  if (tools.length) status(shown === tools.length ? tools.length + " tools." : shown + " of " + tools.length + " tools match.");
}
async function load() {
  try {
    status("Loading…");
    me = await api("/api/me");
    $("#whoami").textContent = "Signed in as " + me.userId + (me.admin ? " (admin)" : "");
    $("#whoami").className = "";
    tools = (await api(settingsPath())).tools;
    const root = $("#tools"); root.textContent = "";
    for (const tool of tools) root.append(renderTool(tool));
    $("#filter").hidden = false; $("#viewas").hidden = !me.admin; applyFilter();
    $("#viewing").hidden = !viewUser; $("#viewas-back").hidden = !viewUser; $("#lock-label").hidden = !viewUser;
    $("#viewing").textContent = viewUser ? "Viewing " + viewUser + "'s settings as an admin: what you save applies to " + viewUser + " (locked for them while “Lock what I save” is ticked)" + "; Unlock removes a lock an admin set for them." : "";
    $("#signout").hidden = false;
  } catch (e) { status(e.message, "err"); if (!viewUser) $("#whoami").textContent = ""; }
}
$("#viewas").onsubmit = (ev) => { ev.preventDefault(); viewUser = $("#viewas-user").value.trim() || null; load(); };
$("#viewas-back").onclick = () => { viewUser = null; $("#viewas-user").value = ""; load(); };
$("#login").onsubmit = (ev) => { ev.preventDefault(); sessionStorage.setItem("toolhost-token", $("#token").value.trim()); $("#token").value = ""; load(); };
$("#filter").oninput = applyFilter;
$("#signout").onclick = () => {
  sessionStorage.removeItem("toolhost-token"); me = null; tools = []; viewUser = null;
  $("#tools").textContent = ""; $("#whoami").textContent = ""; $("#signout").hidden = true; $("#filter").hidden = true;
  $("#viewas").hidden = true; $("#viewing").hidden = true; $("#lock-label").hidden = true;
  status("Signed out. Paste an API token to sign in again.");
};
if (token()) load();
</script>
</body>
</html>
`;
