// The GPU console page: polls ../api/console and renders it; no framework (docs/console.md).
"use strict";

const API = "../api/console";
const POLL_MS = 5000;
const xsrf = document.querySelector('meta[name="xsrf-token"]').content;
let data = null;
let sort = { key: "idle_seconds", dir: -1 };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

async function poll() {
  try {
    const r = await fetch(API, { headers: { "X-XSRFToken": xsrf }, credentials: "same-origin" });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      document.getElementById("status").textContent = `The console answered ${r.status}: ${body.message || r.statusText}`;
      return;
    }
    data = await r.json();
    render();
  } catch (e) {
    document.getElementById("status").textContent = `Cannot reach the gpuaas service: ${e}`;
  }
}

function render() {
  const d = data;
  const scope = d.visible_teams ? `teams ${d.visible_teams.join(", ")}` : "all teams";
  const decided = d.decided_at ? `plan of ${when(d.decided_at)}` : "no reclaim cycle yet";
  const err = d.last_error ? ` · last cycle failed: ${d.last_error}` : "";
  document.getElementById("status").textContent =
    `Showing ${scope} · reclaim ${d.reclaim} · ${decided}${err} · updated ${when(d.now)}`;
  renderTeams(d.teams);
  renderFilters(d.workbenches);
  renderWorkbenches();
  renderEvents(d);
  document.getElementById("policy-in-force").textContent =
    (d.policy.file ? `${d.policy.file}\n` : "") + (d.policy.in_force || "No policy in force: nothing is reclaimed.") +
    (d.policy.error ? `\nThe file as it is now is invalid (the last good policy stays):\n${d.policy.error}` : "");
}

function renderTeams(teams) {
  const box = document.getElementById("teams");
  box.replaceChildren();
  const most = Math.max(0.0001, ...teams.map((t) => t.today.allocated_hours));
  for (const t of teams) {
    const h = t.today;
    const bar = el("div", { class: "bar", role: "img",
      "aria-label": `${t.team}: ${h.allocated_hours} GPU-h allocated today, ${h.busy_hours} busy, ${h.idle_hours} idle` });
    const other = Math.max(0, h.allocated_hours - h.busy_hours - h.idle_hours);
    for (const [cls, v] of [["busy", h.busy_hours], ["idle", h.idle_hours], ["other", other]]) {
      const part = el("span", { class: cls, title: `${cls}: ${v.toFixed(2)} GPU-h` });
      part.style.width = `${(100 * v) / most}%`;
      bar.append(part);
    }
    const rows = t.flavors.map((f) => el("tr", {}, el("td", {}, f.flavor), el("td", {}, f.resource),
      el("td", {}, f.shown.nominal), el("td", {}, f.shown.notebooks), el("td", {}, f.shown.training),
      el("td", {}, f.shown.borrowed), el("td", {}, f.shown.lent)));
    const q = t.queued;
    box.append(el("div", { class: "team", "data-team": t.team },
      el("h3", {}, t.team),
      el("p", {}, `Now: ${t.now.servers} GPU workbench(es) holding ${t.now.allocated} GPU-eq. (${t.now.busy} busy, ${t.now.idle} idle, ${t.now.unknown} unknown). ` +
        `Queued: ${q.workloads} workload(s), ${q.gpu_equivalents} GPU-eq.` +
        (q.oldest_wait_seconds !== null ? `, oldest waiting ${duration(q.oldest_wait_seconds)}` : "") + "."),
      el("p", {}, `Today: ${h.allocated_hours.toFixed(2)} GPU-h allocated, ${h.busy_hours.toFixed(2)} busy, ${h.idle_hours.toFixed(2)} idle`),
      bar,
      rows.length ? el("table", { class: "quota" },
        el("thead", {}, el("tr", {}, ...["Flavor", "Resource", "Quota", "Notebooks", "Training", "Borrowed", "Lent"].map((x) => el("th", {}, x)))),
        el("tbody", {}, ...rows)) : el("p", { class: "hint" }, "No GPU quota of its own.")));
  }
  if (!teams.length) box.append(el("p", { class: "hint" }, "No teams."));
}

function fill(id, values) {
  const sel = document.getElementById(id);
  const keep = sel.value;
  const have = new Set([...sel.options].map((o) => o.value));
  for (const v of [...new Set(values)].sort()) if (v && !have.has(v)) sel.append(el("option", {}, v));
  sel.value = keep;
}

function renderFilters(rows) {
  fill("f-team", rows.map((r) => r.team));
  fill("f-offering", rows.map((r) => r.offering || r.kind));
}

function filtered() {
  const v = (id) => document.getElementById(id).value;
  const text = v("f-text").toLowerCase();
  return data.workbenches.filter((r) =>
    (!v("f-team") || r.team === v("f-team")) &&
    (!v("f-activity") || r.activity === v("f-activity")) &&
    (!v("f-offering") || (r.offering || r.kind) === v("f-offering")) &&
    (!v("f-action") || r.action === v("f-action")) &&
    (!text || `${r.key} ${r.reason} ${r.signal}`.toLowerCase().includes(text)));
}

function renderWorkbenches() {
  if (!data) return;
  const rows = filtered();
  const { key, dir } = sort;
  rows.sort((a, b) => {
    const x = a[key] ?? "", y = b[key] ?? "";
    return (x < y ? -1 : x > y ? 1 : 0) * dir || a.key.localeCompare(b.key);
  });
  document.getElementById("wb-count").textContent = `(${rows.length} of ${data.workbenches.length})`;
  const body = document.querySelector("#workbenches tbody");
  body.replaceChildren(...rows.map((r) => el("tr", { "data-key": r.key },
    el("td", {}, r.key), el("td", {}, r.team), el("td", {}, `${r.offering || r.kind} (${r.gpu_equivalents})`),
    el("td", {}, duration(r.age_seconds)),
    el("td", { title: r.signal }, `${r.activity}: ${r.signal}`),
    el("td", {}, r.activity === "idle" ? duration(r.idle_seconds) : r.activity === "unknown" ? `unknown ${duration(r.unknown_seconds)}` : ""),
    el("td", {}, r.policy || "none"),
    el("td", { class: `act-${r.action}` }, r.action + (r.dry_run && r.action !== "skip" ? " (dry run)" : "")),
    el("td", {}, when(r.reclaim_at)),
    el("td", { class: "reason" }, `${r.code}: ${r.reason}`))));
  for (const th of document.querySelectorAll("#workbenches th")) {
    th.className = th.dataset.key === key ? (dir > 0 ? "sorted-asc" : "sorted-desc") : "";
  }
}

function renderEvents(d) {
  const rg = d.regret;
  document.getElementById("regret").textContent = rg
    ? `Regret: ${rg.returned_within_window} of ${rg.reclaims} reclaimed users started a server again within ${duration(rg.window_seconds)}.`
    : "";
  document.querySelector("#handoffs tbody").replaceChildren(...d.handoffs.map((h) => el("tr", {},
    el("td", {}, h.workload), el("td", {}, h.team), el("td", {}, when(h.reclaimed_at)),
    el("td", {}, when(h.admitted_at)), el("td", {}, duration(h.latency_seconds)),
    el("td", { title: h.reason }, h.status))));
  document.querySelector("#events tbody").replaceChildren(...d.events.map((e) => el("tr", { class: e.regret ? "regret" : "" },
    el("td", {}, when(e.at)),
    el("td", { title: e.reason }, e.event + (e.result ? ` ${e.result}` : "")),
    el("td", {}, e.server ? `${e.user}/${e.server}` : e.user), el("td", {}, e.team),
    el("td", {}, e.offering), el("td", {}, e.gpu_equivalents),
    el("td", {}, e.workload + (e.latency_seconds !== null ? ` (admitted after ${duration(e.latency_seconds)})` : "")),
    el("td", {}, e.returned_after_seconds !== null ? duration(e.returned_after_seconds) + (e.regret ? " (regret)" : "") : ""))));
}

async function runPreview() {
  const out = document.getElementById("preview-result");
  out.replaceChildren(el("p", {}, "Checking…"));
  const r = await fetch("../api/console/preview", {
    method: "POST", credentials: "same-origin",
    headers: { "X-XSRFToken": xsrf, "Content-Type": "text/plain; charset=utf-8" },
    body: document.getElementById("policy-text").value,
  });
  const body = await r.json().catch(() => ({ message: r.statusText }));
  if (r.status === 400 && body.errors) {
    out.replaceChildren(el("p", {}, "The policy is not valid:"),
      el("ul", { class: "errors" }, ...body.errors.map((e) => el("li", {}, el("code", {}, e.path), `: ${e.message}`))));
    return;
  }
  if (!r.ok) {
    out.replaceChildren(el("p", {}, `The preview answered ${r.status}: ${body.message}`));
    return;
  }
  const s = body.summary, now = body.summary_in_force || {};
  const line = (x) => `reclaim ${x.reclaim ?? 0}, warn ${x.warn ?? 0}, waiting ${x.wait ?? 0}, left alone ${x.skip ?? 0}`;
  out.replaceChildren(
    el("p", {}, `With this policy, now: ${line(s)}. In force: ${line(now)}. Nothing was changed.`),
    el("pre", {}, body.policy),
    el("table", { id: "preview-changes" },
      el("thead", {}, el("tr", {}, el("th", {}, "Workbench"), el("th", {}, "In force"), el("th", {}, "With this policy"), el("th", {}, "Why"))),
      el("tbody", {}, ...body.workbenches.filter((w) => w.action !== "skip" || body.changed.some((c) => c.key === w.key)).map((w) => {
        const c = body.changed.find((x) => x.key === w.key);
        return el("tr", {}, el("td", {}, w.key), el("td", {}, c ? c.now : w.action), el("td", { class: `act-${w.action}` }, w.action), el("td", { class: "reason" }, `${w.code}: ${w.reason}`));
      }))));
}

function exportLinks() {
  const input = document.getElementById("export-day");
  if (!input.value) input.value = new Date().toISOString().slice(0, 10);
  const q = (fmt) => `../api/console/export?day=${encodeURIComponent(input.value)}&format=${fmt}`;
  document.getElementById("export-csv").href = q("csv");
  document.getElementById("export-json").href = q("json");
}

document.addEventListener("DOMContentLoaded", () => {
  for (const th of document.querySelectorAll("#workbenches th[data-key]")) {
    th.addEventListener("click", () => {
      sort = { key: th.dataset.key, dir: sort.key === th.dataset.key ? -sort.dir : 1 };
      renderWorkbenches();
    });
  }
  for (const id of ["f-team", "f-activity", "f-offering", "f-action", "f-text"]) {
    document.getElementById(id).addEventListener("input", renderWorkbenches);
  }
  document.getElementById("preview").addEventListener("click", runPreview);
  document.getElementById("export-day").addEventListener("change", exportLinks);
  exportLinks();
  poll();
  setInterval(poll, POLL_MS);
});
