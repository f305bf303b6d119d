// kjob dashboard, a job's page: its runs from the run history, a chart of
// their durations, success rate, p50/p95 duration, and with the actions
// on, trigger now, pause and resume.
"use strict";

const name = new URLSearchParams(location.search).get("name") || "";
let page = null;

async function load() {
  try {
    const r = await fetch("api/job?name=" + encodeURIComponent(name) + "&limit=200", { cache: "no-store", credentials: "same-origin" });
    const b = await r.json();
    if (!r.ok) { $("errors").replaceChildren(el("li", b.error || r.statusText)); return; }
    render(b);
  } catch (e) {
    $("errors").replaceChildren(el("li", "cannot reach the dashboard: " + e));
  }
}

const failed = new Set(["failed", "dead-lettered", "abandoned"]);

function render(p) {
  page = p;
  $("updated").textContent = new Date().toLocaleTimeString();
  const st = p.stats;
  $("success-rate").textContent = st.attempts ? (Math.round(1000 * st.success_rate) / 10) + "%" : "-";
  $("success-meta").textContent = st.attempts ? (st.by_outcome.done || 0) + " done of " + st.attempts + " attempts" : "no attempt recorded";
  $("p50").textContent = st.by_outcome.done ? secs(p.p50_seconds) : "-";
  $("p95").textContent = st.by_outcome.done ? secs(p.p95_seconds) : "-";
  const tl = p.time_lag;
  $("job-lag").textContent = tl ? (tl.at_least ? "≥ " : "") + secs(tl.age_seconds) : "-";
  $("job-lag-meta").textContent = tl && tl.oldest ? "oldest unsettled: " + tl.oldest.id + " (" + tl.oldest.status + ")" : "no due window waits";
  const j = p.job;
  $("schedule").textContent = j ? (j.schedule || "?") : "unknown";
  const paused = j && j.pause ? "paused by " + j.pause.by + " since " + utc(j.pause.at) + (j.pause.note ? " (" + j.pause.note + ")" : "") : "paused";
  $("schedule-meta").textContent = j ? (j.timezone || "") + " · " + (j.paused ? paused : j.enabled ? "enabled" : "disabled") +
    ((j.next || [])[0] ? " · next " + rel(j.next[0]) : "") : "not in the schedules file";
  $("errors").replaceChildren(...(p.runs_error ? [el("li", "runs: " + p.runs_error)] : []));
  $("runs-count").textContent = "(" + p.runs.length + ", newest first)";
  fillTable("runs", p.runs.map((r) => [
    { text: utc(r.finished), title: "started " + utc(r.started) }, { text: r.window_id, cls: "id", title: r.window_id }, r.schedule_version ? "v" + r.schedule_version : "-", r.trigger || "-", outcome(r.outcome),
    { text: secs(r.duration_seconds), cls: "num" }, r.attempt || "-", r.token || "-", r.worker || "-", { text: r.error || "", cls: "id", title: r.error || "" }]));
  drawDurations(p);
  if (session) {
    $("pause").disabled = !!(j && j.paused);
    $("resume").disabled = !(j && j.paused);
  }
}

// drawDurations plots each run's duration at the time it finished, with
// the p50 and p95 of the done runs as lines.
function drawDurations(p) {
  const chart = $("duration-chart");
  const W = 800, H = 220, L = 54, R = 8, T = 10, B = 22;
  const runs = p.runs.filter((r) => isSet(r.finished));
  const nodes = [];
  if (runs.length === 0) { chart.replaceChildren(); $("chart-span").textContent = "(no runs)"; return; }
  const ts = runs.map((r) => new Date(r.finished).getTime());
  let lo = Math.min(...ts), hi = Math.max(...ts);
  if (hi - lo < 60000) { lo = hi - 60000; }
  const top = niceTop(Math.max(...runs.map((r) => r.duration_seconds), p.p95_seconds || 0));
  const x = (t) => L + (W - L - R) * (t - lo) / (hi - lo);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    nodes.push(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const t = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" });
    t.textContent = secs(v);
    nodes.push(t);
  }
  for (let i = 0; i <= 4; i++) {
    const t = svg("text", { x: L + (W - L - R) * i / 4, y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "axis" });
    t.textContent = new Date(lo + (hi - lo) * i / 4).toLocaleTimeString();
    nodes.push(t);
  }
  if (p.stats.by_outcome.done) {
    for (const [q, v] of [["p50", p.p50_seconds], ["p95", p.p95_seconds]]) {
      nodes.push(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "q " + q }));
    }
  }
  for (const r of runs) {
    const c = svg("circle", { cx: x(new Date(r.finished).getTime()).toFixed(1), cy: y(r.duration_seconds).toFixed(1), r: 3.5,
      class: "run " + (r.outcome === "done" ? "done" : failed.has(r.outcome) ? "failed" : "other") });
    const title = svg("title", {});
    title.textContent = r.window_id + ": " + r.outcome + " in " + secs(r.duration_seconds);
    c.appendChild(title);
    nodes.push(c);
  }
  chart.replaceChildren(...nodes);
  $("chart-span").textContent = "(" + runs.length + " runs over " + span(hi - lo) + ", max " + secs(top) + ")";
}

// Pause and resume are changes of the job's spec: a new version, in the
// change log with the signed-in user and the note (required to pause).
function setupActions() {
  for (const [id, action, ask] of [["trigger", "trigger", "Publish a manual window of " + name + " now?"],
    ["pause", "pause", "Pause " + name + "? The producer publishes none of its windows until it is resumed. Why (recorded in the change log)?"],
    ["resume", "resume", "Resume " + name + "? Windows that fell due while it was paused are not caught up. Note (optional):"]]) {
    $(id).addEventListener("click", async () => {
      const body = { job: name };
      if (action === "trigger") {
        if (!confirm(ask)) return;
      } else {
        const note = prompt(ask, "");
        if (note === null) return;
        if (note) body.note = note;
      }
      $(id).disabled = true;
      const res = await act(action, body);
      showResult("action-result", res);
      $(id).disabled = false;
      setTimeout(load, 500);
    });
  }
}

$("job-name").textContent = "· " + name;
document.title = "kjob · " + name;
$("json-link").href = "api/job?name=" + encodeURIComponent(name);
loadSession().then((s) => { if (s) setupActions(); load(); });
setInterval(load, 3000);
