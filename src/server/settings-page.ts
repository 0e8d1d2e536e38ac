/**
 * The settings page served at `/`: a single self-contained HTML document (no build step, no external assets)
 * that lets a person paste their token, see every tool with its effective settings, toggle tools and edit
 * parameters. It talks to the same JSON API (GET/PUT /api/settings/tools), so the API's rules and errors apply.
 * The token is kept in sessionStorage only.
 */
export const SETTINGS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Toolhost settings</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #1b1b1f; }
  h1 { font-size: 1.4rem; } .muted { color: #666; } .err { color: #b00020; white-space: pre-wrap; } .ok { color: #0a7a2f; }
  .tool { border: 1px solid #ddd; border-radius: 8px; padding: .8rem 1rem; margin: .8rem 0; }
  .tool header { display: flex; gap: .8rem; align-items: baseline; } .tool h2 { font-size: 1.05rem; margin: 0; }
  .tag { font-size: .75rem; background: #eef; border-radius: 4px; padding: 0 .4rem; }
  label.param { display: grid; grid-template-columns: 14rem 1fr; gap: .6rem; margin: .3rem 0; align-items: center; }
  input[type=text], input[type=number], input[type=password] { width: 100%; padding: .3rem; box-sizing: border-box; }
  button { padding: .35rem .9rem; }
</style>
</head>
<body>
<h1>Toolhost — tool settings</h1>
<p class="muted">Paste an API token (printed on the server's first start, or <code>toolhost token create --user NAME</code>).</p>
<form id="login"><input id="token" type="password" placeholder="th_…" autocomplete="off"> <button>Load tools</button></form>
<p id="status" class="muted"></p>
<div id="tools"></div>
<script>
const $ = (s) => document.querySelector(s);
const status = (text, cls = "muted") => { const el = $("#status"); el.textContent = text; el.className = cls; };
const token = () => sessionStorage.getItem("toolhost-token") || "";
async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { "authorization": "Bearer " + token(), "content-type": "application/json" } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error((body.error && (body.error.code + ": " + body.error.message)) || ("HTTP " + res.status));
  return body;
}
function field(tool, d) {
  const value = tool.parameters[d.name];
  const label = document.createElement("label");
  label.className = "param";
  const range = d.min !== undefined || d.max !== undefined ? " (" + (d.min ?? "") + "–" + (d.max ?? "") + (d.unit ? " " + d.unit : "") + ")" : "";
  label.innerHTML = "<span></span>";
  label.firstChild.textContent = d.name + range;
  label.title = d.description;
  let input;
  if (d.type === "boolean") { input = document.createElement("input"); input.type = "checkbox"; input.checked = !!value; }
  else if (d.allowedValues && d.type === "string") {
    input = document.createElement("select");
    for (const v of d.allowedValues) { const o = document.createElement("option"); o.value = o.textContent = v; o.selected = v === value; input.append(o); }
  } else {
    input = document.createElement("input");
    input.type = d.type === "integer" || d.type === "number" ? "number" : "text";
    input.value = d.type === "string[]" ? JSON.stringify(value ?? []) : (value ?? "");
  }
  input.dataset.name = d.name; input.dataset.type = d.type;
  if ((tool.lockedKeys || []).includes(d.name)) { input.disabled = true; label.title = "Set for you by an admin."; }
  label.append(input);
  return label;
}
function readValue(input) {
  const t = input.dataset.type;
  if (t === "boolean") return input.checked;
  if (t === "integer" || t === "number") return input.value === "" ? null : Number(input.value);
  if (t === "string[]") { try { return JSON.parse(input.value); } catch { return input.value; } }
  return input.value;
}
function render(tools) {
  const root = $("#tools"); root.textContent = "";
  for (const tool of tools) {
    const box = document.createElement("section"); box.className = "tool";
    box.innerHTML = '<header><h2></h2><span class="tag"></span><label><input type="checkbox" class="enabled"> enabled</label></header><p class="muted desc"></p><div class="params"></div><button>Save</button> <span class="msg"></span>';
    box.querySelector("h2").textContent = tool.name;
    box.querySelector(".tag").textContent = tool.category;
    box.querySelector(".desc").textContent = tool.description;
    const enabled = box.querySelector(".enabled"); enabled.checked = tool.enabled; enabled.disabled = !tool.canDisable || (tool.lockedKeys || []).includes("enabled");
    for (const d of tool.parameterDescriptors) box.querySelector(".params").append(field(tool, d));
    box.querySelector("button").onclick = async () => {
      const msg = box.querySelector(".msg");
      // Send only what changed: some settings are admin-only, and resending them unchanged must not be refused.
      const parameters = {};
      for (const input of box.querySelectorAll("[data-name]")) {
        const value = readValue(input);
        if (JSON.stringify(value) !== JSON.stringify(tool.parameters[input.dataset.name])) parameters[input.dataset.name] = value;
      }
      const body = {};
      if (enabled.checked !== tool.enabled) body.enabled = enabled.checked;
      if (Object.keys(parameters).length) body.parameters = parameters;
      if (!Object.keys(body).length) { msg.textContent = "Nothing changed."; msg.className = "msg muted"; return; }
      try {
        const updated = await api("/api/settings/tools/" + encodeURIComponent(tool.name), { method: "PUT", body: JSON.stringify(body) });
        Object.assign(tool, updated);
        msg.textContent = "Saved."; msg.className = "msg ok";
      } catch (e) { msg.textContent = e.message; msg.className = "msg err"; }
    };
    root.append(box);
  }
}
async function load() {
  try { status("Loading…"); const { tools } = await api("/api/settings/tools"); render(tools); status(tools.length + " tools."); }
  catch (e) { status(e.message, "err"); }
}
$("#login").onsubmit = (ev) => { ev.preventDefault(); sessionStorage.setItem("toolhost-token", $("#token").value.trim()); load(); };
if (token()) load();
</script>
</body>
</html>
`;
