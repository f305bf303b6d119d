// kjob dashboard: helpers shared by the pages. Everything is built with
// DOM calls and textContent, so no value from the deployment is ever
// parsed as HTML.
"use strict";

const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

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

// span formats a positive duration in ms: "42s", "3m5s", "2h4m", "1d3h".
function span(ms) {
  let s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? (s % 60) + "s" : "");
  if (s < 86400) return Math.floor(s / 3600) + "h" + (Math.floor(s / 60) % 60 ? (Math.floor(s / 60) % 60) + "m" : "");
  return Math.floor(s / 86400) + "d" + (Math.floor(s / 3600) % 24 ? (Math.floor(s / 3600) % 24) + "h" : "");
}

function fmtDur(ms) { return ms < 0 ? span(ms) + " ago" : "in " + span(ms); }

// secs formats a duration in seconds with a precision that fits: µs, ms,
// s with decimals, then span.
function secs(s) {
  if (s === null || s === undefined) return "-";
  if (s === 0) return "0s";
  if (s < 0.001) return Math.round(s * 1e6) + "µs";
  if (s < 1) return (Math.round(s * 10000) / 10) + "ms";
  if (s < 60) return (Math.round(s * 100) / 100) + "s";
  return span(s * 1000);
}

function isSet(t) { return t && !t.startsWith("0001-01-01"); }
function rel(t) { return isSet(t) ? fmtDur(new Date(t).getTime() - Date.now()) : "-"; }
function ago(t) {
  if (!isSet(t)) return "-";
  const ms = Date.now() - new Date(t).getTime();
  return ms < 1000 ? "just now" : fmtDur(-ms);
}
function utc(t) { return isSet(t) ? t.replace(".000Z", "Z") : "-"; }
function outcome(o) {
  if (o === "skipped-replay") o = "skipped (replay)"; // a run a replay moved past (dedupe.RunSkippedReplay)
  return el("span", o || "-", "outcome " + String(o || "").split(" ")[0]);
}

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

// lineChart draws one line per key of series over time into an <svg>
// (viewBox 0 0 800 H). pts: [{t: ms, v: {key: value}}]; fmt labels the y
// axis. Returns the keys, sorted, for a legend.
function lineChart(chart, pts, end, spanMS, fmt, attr, minTop) {
  const W = 800, H = Number(chart.getAttribute("viewBox").split(" ")[3]), L = 54, R = 8, T = 10, B = 22;
  const keys = [...new Set(pts.flatMap((p) => Object.keys(p.v)))].sort((a, b) => Number(a) - Number(b));
  let top = 0;
  for (const p of pts) for (const k of keys) if (p.v[k] > top) top = p.v[k];
  top = niceTop(Math.max(top, minTop || 0));
  const x = (t) => L + (W - L - R) * (1 - (end - t) / spanMS);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const nodes = [];
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    nodes.push(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const t = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" });
    t.textContent = fmt(v);
    nodes.push(t);
  }
  for (let i = 0; i <= 4; i++) {
    const t = svg("text", { x: L + (W - L - R) * i / 4, y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "axis" });
    t.textContent = i === 4 ? "now" : "-" + span(spanMS * (4 - i) / 4);
    nodes.push(t);
  }
  keys.forEach((k, i) => {
    // A negative value means it could not be computed: no point.
    const coords = pts.filter((p) => k in p.v && p.v[k] >= 0).map((p) => x(p.t).toFixed(1) + "," + y(p.v[k]).toFixed(1));
    const a = { points: coords.join(" "), stroke: palette[i % palette.length] };
    a[attr] = k;
    nodes.push(svg("polyline", a));
  });
  chart.replaceChildren(...nodes);
  return { keys, top };
}

// niceTop rounds a chart's maximum up to 1, 2 or 5 times a power of ten.
function niceTop(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function legend(id, keys, label) {
  $(id).replaceChildren(...keys.map((k, i) => {
    const s = el("span", label(k));
    const sw = el("i");
    sw.style.background = palette[i % palette.length];
    s.prepend(sw);
    return s;
  }));
}

// Actions: the session (user and CSRF token) and a POST helper.
let session = null;

async function loadSession() {
  try {
    const r = await fetch("api/session", { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) return null;
    const s = await r.json();
    session = s.actions ? s : null;
  } catch (e) {
    session = null;
  }
  for (const e of document.querySelectorAll(".actions-only")) e.hidden = !session;
  const who = $("who");
  if (who) who.textContent = session ? "signed in as " + session.user : "read-only";
  return session;
}

// act POSTs an action and returns {ok, status, body}.
async function act(name, body) {
  const r = await fetch("api/actions/" + name, {
    method: "POST", credentials: "same-origin", cache: "no-store",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": session ? session.csrf_token : "" },
    body: JSON.stringify(body),
  });
  let b = {};
  try { b = await r.json(); } catch (e) { b = { error: r.statusText }; }
  return { ok: r.ok, status: r.status, body: b };
}

// showResult writes an action's result into the element with id.
function showResult(id, res) {
  const e = $(id);
  e.hidden = false;
  e.className = "result " + (res.ok ? "ok" : "bad");
  e.textContent = res.ok ? (res.body.detail || "done") : "HTTP " + res.status + ": " + (res.body.error || "failed");
}
