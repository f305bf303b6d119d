// kjob dashboard, main page: renders the state pushed on /api/events (or
// polled from /api/state) and, with the actions on, the dead letters, the
// replay form and the audit log.
"use strict";

let last = null; // the last state received
let plan = null; // the replay plan waiting for its confirmation

function jobLink(name) {
  const a = el("a", name);
  a.href = "job.html?name=" + encodeURIComponent(name);
  return a;
}

function ageText(tl, atLeast) {
  return (atLeast ? "≥ " : "") + secs(tl);
}

function render(st) {
  last = st;
  const snap = st.snapshot || {};
  $("namespace").textContent = st.namespace ? "· " + st.namespace : "";
  $("updated").textContent = new Date(st.at).toLocaleTimeString();
  $("interval").textContent = (st.interval_ms / 1000) + "s";
  $("mode").textContent = st.actions ? "actions on" : "read-only";

  // Time lag: the headline. A part that could not be read shows
  // "unknown", never a zero value.
  const tl = st.time_lag;
  if (tl) {
    $("time-lag").textContent = ageText(tl.age_seconds, tl.at_least);
    $("time-lag-meta").textContent = tl.oldest ? "oldest: " + tl.oldest.id + " (" + tl.oldest.status + ")" : "no due window waits";
    let windows = 0;
    for (const p of tl.partitions || []) windows += p.windows;
    $("total-lag").textContent = (tl.at_least ? "≥ " : "") + windows;
  } else {
    $("time-lag").textContent = "unknown";
    $("time-lag-meta").textContent = st.time_lag_error || "the time lag is not configured";
    $("total-lag").textContent = "unknown";
  }
  const g = snap.group;
  $("total-lag-meta").textContent = "window records not yet committed" + (g && !snap.group_error ? " (offsets: " + g.total_lag + ")" : "");

  const l = snap.leader;
  $("leader-holder").textContent = snap.leader_error ? "unknown" : l ? l.holder : "none";
  $("leader-meta").textContent = snap.leader_error ? snap.leader_error : l ? "epoch " + l.epoch + " · since " + utc(l.since) : "no producer holds the lease";
  $("group-state").textContent = snap.group_error ? "unknown" : g ? g.state : "no group";
  $("group-meta").textContent = snap.group_error ? snap.group_error : g ? g.name + " · " + (g.members || []).length + " member(s)" : "no worker has joined yet";
  $("dead-letters").textContent = snap.dead_letters_error ? "unknown" : snap.dead_letters;

  $("stalls").replaceChildren(...(snap.stalls || []).map((x) => el("li",
    "Partition " + x.partition + " cannot move" + (x.offset >= 0 ? " at offset " + x.offset : "") + " since " + utc(x.since) + " (" + x.worker + "): " + x.reason)));
  $("errors").replaceChildren(...(st.errors || []).map((e) => el("li", e)));

  fillTable("members", (g && g.members || []).map((m) => [
    m.client_id, { text: m.address || "-", title: "member " + m.member_id + " from " + m.host }, (m.partitions || []).join(", ") || "-"]));
  const tlp = {};
  for (const p of (tl && tl.partitions) || []) tlp[p.partition] = p;
  fillTable("partitions", (g && g.partitions || []).map((p) => {
    const t = tlp[p.partition];
    return [p.partition, p.owner || "-",
      t ? ageText(t.age_seconds, t.at_least) : "?", t ? (t.at_least ? "≥ " : "") + t.windows : "?",
      t && t.oldest ? { text: t.oldest.id + " (" + t.oldest.status + ")", cls: "id", title: t.oldest.id } : (t ? "-" : "?"),
      p.committed < 0 ? "-" : p.committed, p.end, p.lag];
  }));

  const tlj = {};
  for (const j of (tl && tl.jobs) || []) tlj[j.job] = j;
  fillTable("jobs", (snap.jobs || []).map((j) => {
    const state = j.spec_unknown ? "unknown" : !j.in_file ? "no spec" : j.paused_unknown ? "unknown" : j.pause ?
      { text: "paused", cls: "paused", title: "by " + j.pause.by + " since " + utc(j.pause.at) + (j.pause.note ? ": " + j.pause.note : "") } :
      j.paused ? "paused" : j.enabled ? "enabled" : "disabled";
    const next = (j.next || [])[0];
    const lw = j.last;
    const t = tlj[j.name];
    return [
      jobLink(j.name), j.schedule || "-", j.timezone || "-", state, j.partition_unknown ? "?" : j.partition,
      next ? { text: rel(next), title: utc(next), cls: "rel" } : "-",
      lw ? { text: lw.id, cls: "id", title: "published " + utc(lw.published_at) } : "-",
      j.last_unknown ? "unknown" : lw ? outcome(lw.outcome) : "-",
      t ? ageText(t.age_seconds, t.at_least) : "-",
    ];
  }));

  fillTable("recent", (st.recent || []).map((r) => [
    r.id ? { text: r.id, cls: "id", title: r.id } : { text: "invalid record: " + r.invalid, cls: "id", title: r.invalid },
    r.trigger || "-", r.partition, outcome(r.outcome), r.token || "-", r.attempts || "-", r.worker || "-",
    { text: ago(r.published_at), title: utc(r.published_at) },
    { text: r.updated_at ? ago(r.updated_at) : "-", title: utc(r.updated_at || "") },
  ]));

  drawCharts(st);
}

function drawCharts(st) {
  const pts = st.lag || [];
  const end = new Date(st.at).getTime();
  const first = pts.length ? new Date(pts[0].at).getTime() : end;
  const spanMS = Math.max(end - first, 60000);
  const ages = pts.filter((p) => p.ages).map((p) => ({ t: new Date(p.at).getTime(), v: p.ages }));
  const a = lineChart($("age-chart"), ages, end, spanMS, secs, "data-partition", 2);
  legend("age-legend", a.keys, (k) => "partition " + k);
  let maxAge = 0;
  for (const p of ages) for (const k in p.v) maxAge = Math.max(maxAge, p.v[k]);
  $("age-span").textContent = "(last " + span(spanMS) + ", max " + secs(maxAge) + ")";
  const offs = pts.map((p) => ({ t: new Date(p.at).getTime(), v: p.partitions || {} }));
  const o = lineChart($("lag-chart"), offs, end, spanMS, (v) => String(Math.round(v * 10) / 10), "data-partition", 4);
  legend("lag-legend", o.keys, (k) => "partition " + k);
  let maxLag = 0;
  for (const p of offs) for (const k in p.v) maxLag = Math.max(maxLag, p.v[k]);
  $("lag-span").textContent = "(offsets, last " + span(spanMS) + ", max " + maxLag + ")";
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
  setTimeout(poll, last ? last.interval_ms : 2000);
}

function connect() {
  if (!window.EventSource) { poll(); return; }
  const es = new EventSource("api/events");
  es.addEventListener("state", (ev) => { render(JSON.parse(ev.data)); setConn("live", "live"); });
  es.onerror = () => setConn("connecting", "reconnecting");
}

// Dead letters, with a redrive button for each letter a redrive would
// republish.
async function loadLetters() {
  const r = await fetch("api/deadletters", { cache: "no-store", credentials: "same-origin" });
  const b = await r.json();
  if (!r.ok) { showResult("dlq-result", { ok: false, status: r.status, body: b }); return; }
  fillTable("dlq", (b.letters || []).map((d) => {
    let cell = el("span", d.skip ? "left out: " + d.skip : d.with ? "with letter " + d.with : "", "meta");
    if (!d.skip && !d.with) {
      cell = el("button", "Redrive");
      cell.type = "button";
      cell.dataset.letter = d.id;
      cell.addEventListener("click", async () => {
        if (!confirm("Redrive dead letter " + d.id + " (" + (d.window_id || "undecodable") + ")? Its window runs again.")) return;
        cell.disabled = true;
        const res = await act("redrive", { letter: d.id });
        showResult("dlq-result", res);
        loadLetters();
        loadAudit();
      });
    }
    return [d.id, { text: d.window_id || "(undecodable)", cls: "id", title: d.window_id || d.value || "" }, { text: d.reason, cls: "id", title: d.reason },
      d.window_state ? d.window_state.status + " (token " + d.window_state.token + ")" : "none",
      d.redriven ? utc(d.redriven.at) : "-", cell];
  }));
}

async function loadAudit() {
  const r = await fetch("api/audit", { cache: "no-store", credentials: "same-origin" });
  if (!r.ok) return;
  const b = await r.json();
  fillTable("audit", (b.records || []).map((a) => [utc(a.at), a.who, a.action, a.target, outcome(a.outcome), { text: a.detail || "", cls: "id", title: a.detail || "" }]));
}

function replayBody() {
  const body = { group: $("replay-group").value.trim(), mode: $("replay-mode").value, value: $("replay-value").value.trim(), rerun: $("replay-rerun").checked };
  const job = $("replay-job").value.trim();
  if (job) body.job = job;
  return body;
}

function showPlan(p) {
  $("replay-plan-view").hidden = false;
  fillTable("replay-table", p.partitions.map((x) => [x.partition, x.owner || "-", x.before < 0 ? "-" : x.before, x.target, x.replayed, x.log_start, x.log_end,
    x.clamped ? "clamped to " + x.clamped : ""]));
  const notes = [];
  notes.push(p.online ? "Group " + p.group + " (" + p.state + "): through the control topic, each partition's owner seeks and commits." :
    "Group " + p.group + " has no members: offsets are committed directly.");
  if (p.spec.rerun) notes.push("Done markers of " + (p.rerun || []).length + " replayed windows will be cleared, so they run again.");
  else {
    if ((p.retry || []).length) notes.push("Records of " + p.retry.length + " failed or dead-lettered window(s) in the range will be cleared, so they run again: " + p.retry.map((r) => r.id).join(", "));
    notes.push("Windows already done are skipped when re-delivered.");
  }
  $("replay-notes").textContent = notes.join(" ");
}

function setupActions() {
  $("dlq-reload").addEventListener("click", loadLetters);
  $("replay-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("replay-plan-view").hidden = true;
    plan = null;
    const res = await act("replay-plan", replayBody());
    showResult("replay-result", res);
    if (res.ok) { plan = res.body.plan_id; showPlan(res.body.plan); }
    loadAudit();
  });
  $("replay-execute").addEventListener("click", async () => {
    if (!plan || !confirm("Execute this replay? The workers' offsets move and the windows in the range are delivered again.")) return;
    const res = await act("replay-execute", { plan: plan });
    plan = null;
    $("replay-plan-view").hidden = true;
    showResult("replay-result", res);
    loadAudit();
  });
  loadLetters();
  loadAudit();
}

// Relative times ("in 3s", "12s ago") move on between updates.
setInterval(() => { if (last) render(last); }, 1000);
connect();
loadSession().then((s) => { if (s) setupActions(); });
