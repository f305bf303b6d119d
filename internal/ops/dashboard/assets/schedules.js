// kjob dashboard: the schedules page. Without ?job= it lists the jobs of
// the schedules topic; with ?job=NAME it shows one job's spec, its history
// and (signed in) the form that changes it.
"use strict";

const params = new URLSearchParams(location.search);
const job = params.get("job");
let current = null; // the record shown: edits expect its version

function errors(list) {
  $("errors").replaceChildren(...list.map((e) => el("li", e)));
}

function jobLink(name) {
  const a = el("a", name);
  a.href = "schedules.html?job=" + encodeURIComponent(name);
  return a;
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store", credentials: "same-origin" });
  let b = {};
  try { b = await r.json(); } catch (e) { b = { error: r.statusText }; }
  return { ok: r.ok, status: r.status, body: b };
}

async function loadList() {
  const r = await getJSON("api/schedules");
  if (!r.ok) { errors(["HTTP " + r.status + ": " + (r.body.error || "failed")]); return; }
  errors(r.body.malformed || []);
  $("count").textContent = r.body.jobs.length + " jobs";
  fillTable("schedules", r.body.jobs.map((j) => [
    jobLink(j.job), j.schedule || (j.at ? "at " + j.at : "-"), j.handler, "v" + j.version,
    j.paused ? { text: "paused: " + (j.paused.note || "yes"), cls: "paused", title: "by " + j.paused.by + " at " + utc(j.paused.at) } : "no",
    j.enabled ? "yes" : { text: "no", cls: "paused" }, j.set_by, j.source, { text: ago(j.set_at), title: utc(j.set_at) },
  ]));
}

// describe renders an action's result; a refusal shows its field, value
// and reason, or for a conflict who changed the job, and how to go on.
function describe(res) {
  if (res.ok) return res.body.detail || "done";
  const f = res.body.refusal;
  let s = "HTTP " + res.status + ": " + (res.body.error || "failed");
  if (f) {
    if (f.kind === "conflict") {
      s = "Conflict: the schedule changed since this page read it. It is now at version " + f.current +
        (f.set_by ? ", set by " + f.set_by : "") + (res.body.refusal_source ? " through " + res.body.refusal_source : "") +
        (isSet(f.set_at) ? " at " + utc(f.set_at) : "") + ". Reload the page to see the change, then apply yours again.";
    } else if (f.kind === "invalid") {
      s = "Invalid: " + (f.field ? "field " + f.field : "the spec") + (f.value ? " = " + JSON.stringify(f.value) : "") + ": " + f.reason;
    } else {
      s = f.kind + ": " + f.reason;
    }
  }
  return s;
}

function show(id, res) {
  const e = $(id);
  e.hidden = false;
  e.className = "result " + (res.ok ? "ok" : "bad");
  e.textContent = describe(res);
}

async function loadJob() {
  $("list-view").hidden = true;
  $("title").textContent = "schedule " + job;
  $("json-link").href = "api/schedule?name=" + encodeURIComponent(job);
  const r = await getJSON("api/schedule?name=" + encodeURIComponent(job));
  if (!r.ok) { errors(["HTTP " + r.status + ": " + (r.body.error || "failed")]); return; }
  const v = r.body;
  current = v.record || null;
  errors(v.history_error ? [v.history_error] : []);
  $("job-view").hidden = false;
  $("history-view").hidden = false;
  if (current) {
    $("job-meta").textContent = "version " + current.version + " · set by " + current.set_by + " through " + v.source + " · " +
      utc(current.set_at) + (current.note ? " · note: " + current.note : "") +
      (isSet(current.effective_from) ? " · effective from " + utc(current.effective_from) : "");
    $("expect").textContent = String(current.version);
    $("edit-spec").value = JSON.stringify(current.spec, null, 2);
  } else {
    $("job-meta").textContent = v.deleted ? "deleted at version " + v.deleted : "not in the schedules topic";
    $("job-actions").remove();
  }
  fillTable("fields", (v.field_order || Object.keys(v.fields)).filter((k) => k in v.fields).map((k) => [k, { text: v.fields[k], cls: "id" }]));
  fillTable("history", v.history.slice().reverse().map((c) => [
    { text: utc(c.at), title: ago(c.at) }, c.op, "v" + c.version_before + " → v" + c.version_after, c.actor, c.source_text,
    c.note || "-", diffList(c.diff || []), revertButton(c),
  ]));
}

// revertButton sets the job back to the spec a change left (signed in
// only): a new version, with the version the page showed expected, so a
// change made meanwhile is a conflict, not overwritten. (A deleted job is
// created again, from its spec in the history, not reverted.)
function revertButton(c) {
  if (!session || !current || c.op === "delete" || c.version_after === current.version) return "";
  const b = el("button", "revert to v" + c.version_after);
  b.dataset.version = String(c.version_after);
  b.addEventListener("click", () => {
    if (!confirm("Set " + job + " back to its spec of version " + c.version_after + "?")) return;
    submit("schedule-revert", { job, to_version: c.version_after, expect_version: current.version, note: $("note").value });
  });
  return b;
}

function diffList(diff) {
  const ul = el("ul", null, "diff");
  for (const d of diff) {
    const li = el("li");
    li.append(el("b", d.field + ": "), el("del", d.before || "(none)"), " → ", el("ins", d.after || "(none)"));
    ul.appendChild(li);
  }
  return ul;
}

async function submit(name, body) {
  const res = await act(name, body);
  show("action-result", res);
  if (res.ok) await loadJob();
}

async function main() {
  // Each view keeps only its own form (loadSession shows .actions-only).
  if (job) $("create-view").remove(); else $("job-actions").remove();
  await loadSession();
  if (!job) {
    await loadList();
    $("create").addEventListener("click", async () => {
      let spec;
      try { spec = JSON.parse($("create-spec").value); } catch (e) {
        show("create-result", { ok: false, status: 400, body: { error: "the spec is not JSON: " + e.message } });
        return;
      }
      const res = await act("schedule-create", { job: $("create-job").value.trim(), spec, note: $("create-note").value });
      show("create-result", res);
      if (res.ok) await loadList();
    });
    return;
  }
  await loadJob();
  if (!$("update")) return;
  const expect = () => current ? current.version : 0;
  $("update").addEventListener("click", () => {
    let spec;
    try { spec = JSON.parse($("edit-spec").value); } catch (e) {
      show("action-result", { ok: false, status: 400, body: { error: "the spec is not JSON: " + e.message } });
      return;
    }
    submit("schedule-update", { job, spec, expect_version: expect(), note: $("note").value });
  });
  $("pause").addEventListener("click", () => submit("schedule-pause", { job, expect_version: expect(), note: $("note").value }));
  $("resume").addEventListener("click", () => submit("schedule-resume", { job, expect_version: expect(), note: $("note").value }));
  $("delete").addEventListener("click", () => {
    if (confirm("Delete schedule " + job + "?")) submit("schedule-delete", { job, expect_version: expect(), note: $("note").value });
  });
}

main();
