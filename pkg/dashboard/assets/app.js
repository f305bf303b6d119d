// kjob dashboard: renders the state pushed on /api/events (or polled from
// /api/state). Everything is built with DOM calls and textContent, so no
// value from the deployment is ever parsed as HTML.
"use strict";

const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];
let last = null; // the last state received
let pollTimer = null;

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

function fmtDur(ms) {
  const neg = ms < 0;
  let s = Math.round(Math.abs(ms) / 1000);
  let out;
  if (s < 60) out = s + "s";
  else if (s < 3600) out = Math.floor(s / 60) + "m" + (s % 60 ? (s % 60) + "s" : "");
  else if (s < 86400) out = Math.floor(s / 3600) + "h" + (Math.floor(s / 60) % 60 ? (Math.floor(s / 60) % 60) + "m" : "");
  else out = Math.floor(s / 86400) + "d" + (Math.floor(s / 3600) % 24 ? (Math.floor(s / 3600) % 24) + "h" : "");
  return neg ? out + " ago" : "in " + out;
}

function isSet(t) { return t && !t.startsWith("0001-01-01"); }

function rel(t) {
  if (!isSet(t)) return "-";
  return fmtDur(new Date(t).getTime() - Date.now());
}

function ago(t) {
  if (!isSet(t)) return "-";
  const ms = Date.now() - new Date(t).getTime();
  return ms < 1000 ? "just now" : fmtDur(-ms);
}

function utc(t) { return isSet(t) ? t.replace(".000Z", "Z") : "-"; }

function outcome(o) { return el("span", o || "-", "outcome " + String(o || "").split(" ")[0]); }

function fillTable(id, rows) {
  const body = $(id).tBodies[0];
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c);
      else if (c && typeof c === "object") { td.textContent = c.text; td.className = c.cls || ""; if (c.title) td.title = c.title; }
      else td.textContent = c === undefined || c === null ? "-" : String(c);
      tr.appendChild(td);
    }
    return tr;
  }));
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = el("td", "none", "meta");
    td.colSpan = $(id).tHead.rows[0].cells.length;
    tr.appendChild(td);
    body.appendChild(tr);
  }
}

function render(st) {
  last = st;
  const snap = st.snapshot || {};
  $("namespace").textContent = st.namespace ? "· " + st.namespace : "";
  $("updated").textContent = new Date(st.at).toLocaleTimeString();
  $("interval").textContent = (st.interval_ms / 1000) + "s";

  // Leader.
  // A part that could not be read shows "unknown", never a zero value.
  const l = snap.leader;
  $("leader-holder").textContent = snap.leader_error ? "unknown" : l ? l.holder : "none";
  $("leader-meta").textContent = snap.leader_error ? snap.leader_error : l ? "epoch " + l.epoch + " · since " + utc(l.since) : "no producer holds the lease";

  // Group.
  const g = snap.group;
  $("group-state").textContent = snap.group_error ? "unknown" : g ? g.state : "no group";
  $("group-meta").textContent = snap.group_error ? snap.group_error : g ? g.name + " · " + (g.members || []).length + " member(s)" : "no worker has joined yet";
  $("total-lag").textContent = g && !snap.group_error ? g.total_lag : "unknown";
  $("dead-letters").textContent = snap.dead_letters_error ? "unknown" : snap.dead_letters;

  // Errors.
  $("errors").replaceChildren(...(st.errors || []).map((e) => el("li", e)));

  fillTable("members", (g && g.members || []).map((m) => [m.client_id, m.host, (m.partitions || []).join(", ") || "-"]));
  fillTable("partitions", (g && g.partitions || []).map((p) => [p.partition, p.owner || "-", p.committed < 0 ? "-" : p.committed, p.end, p.lag]));

  fillTable("jobs", (snap.jobs || []).map((j) => {
    const state = !j.in_file ? "not in file" : j.paused_unknown ? "unknown" : j.paused ? "paused" : j.enabled ? "enabled" : "disabled";
    const next = (j.next || [])[0];
    const lw = j.last;
    return [
      j.name, j.schedule || "-", j.timezone || "-", state, j.partition_unknown ? "?" : j.partition,
      next ? { text: rel(next), title: utc(next), cls: "rel", } : "-",
      lw ? { text: lw.id, cls: "id", title: "published " + utc(lw.published_at) } : "-",
      j.last_unknown ? "unknown" : lw ? outcome(lw.outcome) : "-",
    ];
  }));

  fillTable("recent", (st.recent || []).map((r) => [
    r.id ? { text: r.id, cls: "id", title: r.id } : { text: "invalid record: " + r.invalid, cls: "id", title: r.invalid },
    r.trigger || "-", r.partition, outcome(r.outcome), r.token || "-", r.attempts || "-", r.worker || "-",
    { text: ago(r.published_at), title: utc(r.published_at) },
    { text: r.updated_at ? ago(r.updated_at) : "-", title: utc(r.updated_at || "") },
  ]));

  drawLag(st);
}

function drawLag(st) {
  const chart = $("lag-chart");
  const W = 800, H = 220, L = 44, R = 8, T = 10, B = 22;
  const pts = st.lag || [];
  const parts = new Set();
  for (const p of pts) for (const k in p.partitions) parts.add(k);
  const keys = [...parts].sort((a, b) => Number(a) - Number(b));
  let maxLag = 1;
  for (const p of pts) for (const k of keys) maxLag = Math.max(maxLag, p.partitions[k] || 0);
  const end = new Date(st.at).getTime();
  const first = pts.length ? new Date(pts[0].at).getTime() : end;
  const span = Math.max(end - first, 60000);
  const x = (t) => L + (W - L - R) * (1 - (end - t) / span);
  const y = (v) => T + (H - T - B) * (1 - v / maxLag);
  const nodes = [];
  for (let i = 0; i <= 4; i++) {
    const v = Math.round(maxLag * i / 4);
    nodes.push(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const t = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" });
    t.textContent = String(v);
    nodes.push(t);
  }
  for (let i = 0; i <= 4; i++) {
    const t = svg("text", { x: L + (W - L - R) * i / 4, y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "axis" });
    const back = span * (4 - i) / 4;
    t.textContent = i === 4 ? "now" : "-" + fmtDur(back).replace("in ", "");
    nodes.push(t);
  }
  keys.forEach((k, i) => {
    // A negative lag means kadm could not compute it: no point.
    const coords = pts.filter((p) => k in p.partitions && p.partitions[k] >= 0).map((p) => x(new Date(p.at).getTime()).toFixed(1) + "," + y(p.partitions[k]).toFixed(1));
    nodes.push(svg("polyline", { points: coords.join(" "), stroke: palette[i % palette.length], "data-partition": k }));
  });
  chart.replaceChildren(...nodes);
  $("lag-span").textContent = "(last " + fmtDur(span).replace("in ", "") + ", max " + maxLag + ")";
  $("lag-legend").replaceChildren(...keys.map((k, i) => {
    const s = el("span", "partition " + k);
    const sw = el("i");
    sw.style.background = palette[i % palette.length];
    s.prepend(sw);
    return s;
  }));
}

function setConn(cls, text) {
  const c = $("conn");
  c.className = "conn " + cls;
  c.textContent = text;
}

async function poll() {
  try {
    const r = await fetch("api/state", { cache: "no-store" });
    if (r.ok) { render(await r.json()); setConn("polling", "polling"); }
    else setConn("down", "no data yet");
  } catch (e) {
    setConn("down", "disconnected");
  }
  pollTimer = setTimeout(poll, last ? last.interval_ms : 2000);
}

function connect() {
  if (!window.EventSource) { poll(); return; }
  const es = new EventSource("api/events");
  es.addEventListener("state", (ev) => { render(JSON.parse(ev.data)); setConn("live", "live"); });
  es.onerror = () => setConn("connecting", "reconnecting");
}

// Relative times ("in 3s", "12s ago") move on between updates.
setInterval(() => { if (last) render(last); }, 1000);
connect();
