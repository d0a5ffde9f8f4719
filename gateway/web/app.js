// The gateway's page: live jobs (job.subscribe), queues (queue.stats), actors
// (actor.list), the pipeline report (stats.report), and a form to run jobs.
// It uses the generated client (/client/hero-client.js), which reconnects and
// resumes the subscription by itself; this file only draws what it is told.

import { HeroClient, RpcError, Unauthenticated } from "/client/hero-client.js";

const KEY_STORAGE = "hero-gateway-key";
const POLL_MS = 2000;
const REPORT_MS = 15000;
const MAX_JOBS = 200;
const MAX_EVENTS = 60;
const TERMINAL = new Set(["finished", "error", "stopped", "timeout", "dlq"]);

const $ = (id) => document.getElementById(id);

/** An element with text (never innerHTML: job output is untrusted). */
function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

const short = (id) => (id && id.length > 12 ? id.slice(0, 12) + "…" : id || "");
const clock = (ms) => (ms ? new Date(ms).toLocaleTimeString() : "");
const num = (v, digits = 2) => (typeof v === "number" ? v.toFixed(digits) : "–");
function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

const ago = (seconds) => Math.max(0, seconds).toFixed(0);
const percent = (v) => (typeof v === "number" ? `${(v * 100).toFixed(0)} %` : "–");

function statusBadge(status) {
  return el("span", { class: `status status-${status}`, text: status });
}

// -- state -------------------------------------------------------------------------------

/** @type {HeroClient | null} */
let hero = null;
let stream = null;
let pollTimer = null;
let lastReport = 0;
let selected = null;
/** job_id → {job_id, script_type, status, actor, attempt, updated, first} */
const jobs = new Map();

function notice(text) {
  const box = $("notice");
  box.hidden = !text;
  box.textContent = text || "";
}

function explain(err) {
  if (err instanceof Unauthenticated || (err instanceof RpcError && err.code === -32004)) {
    return "This gateway needs an API key: enter one above.";
  }
  if (err instanceof RpcError) return `${err.message} (code ${err.code})`;
  return err && err.message ? err.message : String(err);
}

// -- connection --------------------------------------------------------------------------

function wsUrl() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}/ws`;
}

async function start() {
  if (hero) {
    const old = hero;
    hero = null;
    stream = null;
    await old.close();
  }
  const key = sessionStorage.getItem(KEY_STORAGE) || undefined;
  $("key").value = key || "";
  const client = new HeroClient(wsUrl(), { key, onStatus: (s, d) => onStatus(client, s, d) });
  hero = client;
  try {
    await client.connect();
  } catch (err) {
    if (hero === client) notice(explain(err));
  }
}

function onStatus(client, status, detail) {
  if (client !== hero) return;
  const pill = $("conn");
  pill.dataset.state = status;
  pill.textContent =
    status === "open" && client.reconnects ? `connected (reconnected ×${client.reconnects})`
      : status === "open" ? "connected"
      : status;
  if (status === "open") onOpen(client);
  if (status === "failed") notice(explain(detail));
}

async function onOpen(client) {
  try {
    const me = await client.authWhoami();
    $("who").textContent = me.scope === "anonymous" ? "no auth" : `${me.name} (${me.scope})`;
    notice("");
  } catch (err) {
    $("who").textContent = "";
    notice(explain(err));
    return;
  }
  if (!stream) {
    try {
      stream = await client.subscribe({}, { onEvent: onEvent });
    } catch (err) {
      notice(`Live events unavailable: ${explain(err)}`);
    }
    await loadJobs(client);
  }
  refresh();
  if (pollTimer === null) pollTimer = setInterval(refresh, POLL_MS);
}

// -- jobs --------------------------------------------------------------------------------

async function loadJobs(client) {
  try {
    const page = await client.jobList({ limit: 25 });
    for (const job of page.jobs.slice().reverse()) {
      const when = Date.parse(job.updated_at || job.created_at || "") || Date.now();
      const first = Date.parse(job.created_at || "") || when;
      upsert({
        job_id: job.id,
        script_type: job.script_type,
        status: job.status,
        actor: job.actor ?? null,
        attempt: job.attempt ?? 0,
        updated: when,
        first,
      }, false);
    }
    drawJobs();
  } catch (err) {
    notice(explain(err));
  }
}

function upsert(fields, draw = true) {
  const known = jobs.get(fields.job_id);
  const job = known ? { ...known, ...fields, first: known.first } : { ...fields };
  if (known && fields.updated < known.updated) return; // an older event (list after events)
  jobs.set(job.job_id, job);
  if (jobs.size > MAX_JOBS) {
    const oldest = [...jobs.values()].sort((a, b) => a.first - b.first)[0];
    jobs.delete(oldest.job_id);
  }
  if (draw) drawJobs();
}

function onEvent(event) {
  upsert({
    job_id: event.job_id,
    script_type: event.script_type,
    status: event.status,
    actor: event.actor,
    attempt: event.attempt,
    updated: event.ts,
    first: event.ts,
  });
  const list = $("events");
  list.prepend(
    el("li", {}, [
      el("span", { class: "muted", text: clock(event.ts) + " " }),
      el("span", { class: "mono", text: short(event.job_id) }),
      " ",
      statusBadge(event.event),
      event.actor ? el("span", { class: "muted", text: " on " + event.actor }) : "",
      event.error ? el("span", { class: "error", text: " " + event.error }) : "",
    ]),
  );
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  if (event.job_id === selected) {
    $("output-status").replaceChildren(statusBadge(event.status));
    if (TERMINAL.has(event.status)) showOutput(event.job_id);
  }
}

function drawJobs() {
  const rows = [...jobs.values()].sort((a, b) => b.first - a.first);
  $("jobs-empty").hidden = rows.length > 0;
  $("jobs").tBodies[0].replaceChildren(
    ...rows.map((job) => {
      const stop = TERMINAL.has(job.status)
        ? ""
        : el("button", {
            class: "stop",
            type: "button",
            text: "Stop",
            title: "job.stop",
            onclick: (e) => {
              e.stopPropagation();
              stopJob(job.job_id, e.currentTarget);
            },
          });
      return el(
        "tr",
        {
          "data-job-id": job.job_id,
          "data-status": job.status,
          class: job.job_id === selected ? "selected" : null,
          onclick: () => showOutput(job.job_id),
        },
        [
          el("td", { class: "mono", text: short(job.job_id), title: job.job_id }),
          el("td", { text: job.script_type }),
          el("td", {}, [statusBadge(job.status)]),
          el("td", { class: "muted", text: job.actor || "" }),
          el("td", { class: "num", text: job.attempt ?? "" }),
          el("td", { class: "muted", text: clock(job.updated) }),
          el("td", {}, [stop]),
        ],
      );
    }),
  );
}

async function stopJob(jobId, button) {
  button.disabled = true;
  try {
    const state = await hero.jobStop({ job_id: jobId });
    upsert({ job_id: jobId, status: state.status, updated: Date.now() });
  } catch (err) {
    button.disabled = false;
    notice(`Could not stop ${short(jobId)}: ${explain(err)}`);
  }
}

async function showOutput(jobId) {
  selected = jobId;
  drawJobs();
  $("output-job").textContent = jobId;
  try {
    const result = await hero.jobOutput({ job_id: jobId });
    if (selected !== jobId) return;
    $("output-status").replaceChildren(statusBadge(result.status));
    $("output").textContent =
      result.output ?? (TERMINAL.has(result.status) ? "(no output)" : "(running…)");
    const error = $("output-error");
    error.hidden = !result.error;
    error.textContent = result.error || "";
  } catch (err) {
    $("output").textContent = explain(err);
  }
}

async function submitJob(event) {
  event.preventDefault();
  const button = $("run");
  const problem = $("submit-error");
  problem.textContent = "";
  const spec = {
    script: $("script").value,
    script_type: $("script_type").value.trim(),
    priority: Number($("priority").value),
  };
  const group = $("group").value.trim();
  const instance = $("instance").value.trim();
  if (group) spec.group = group;
  if (instance) spec.instance = instance;
  button.disabled = true;
  try {
    const created = await hero.jobCreate({ job: spec });
    upsert({
      job_id: created.job_id,
      script_type: spec.script_type,
      status: created.status,
      actor: null,
      attempt: 0,
      updated: Date.now(),
      first: Date.now(),
    });
    selected = created.job_id;
    $("output-job").textContent = created.job_id;
    $("output-status").replaceChildren(statusBadge(created.status));
    $("output").textContent = "(waiting for an actor…)";
    $("output-error").hidden = true;
    await hero.jobStart({ job_id: created.job_id });
  } catch (err) {
    problem.textContent = explain(err);
    if (err instanceof RpcError && err.data) problem.textContent += " " + JSON.stringify(err.data);
  } finally {
    button.disabled = false;
  }
}

// -- queues, actors, report ----------------------------------------------------------------

let refreshing = false;

async function refresh() {
  const client = hero;
  if (!client || !client.connected || refreshing) return;
  refreshing = true;
  try {
    const [queues, actors] = await Promise.all([client.queueStats(), client.actorList()]);
    drawQueues(queues.queues);
    drawActors(actors.actors);
    if (Date.now() - lastReport > REPORT_MS) {
      lastReport = Date.now();
      drawReport(await client.statsReport());
    }
  } catch (err) {
    // the next tick tries again; a lost connection shows in the status pill
  } finally {
    refreshing = false;
  }
}

function drawQueues(queues) {
  $("queues-empty").hidden = queues.length > 0;
  $("queues").tBodies[0].replaceChildren(
    ...queues.map((q) =>
      el("tr", { "data-queue": q.queue }, [
        el("td", { class: "mono", text: q.queue }),
        el("td", { class: "num", text: q.priority }),
        el("td", { class: "num", text: q.depth }),
        el("td", { class: "num", text: q.pending }),
        el("td", { class: "num", text: age(q.oldest_age) }),
        el("td", { class: "num", text: q.consumers }),
      ]),
    ),
  );
}

function drawActors(actors) {
  $("actors-empty").hidden = actors.length > 0;
  const now = Date.now() / 1000;
  $("actors").tBodies[0].replaceChildren(
    ...actors.map((a) =>
      el("tr", {}, [
        el("td", { text: a.script_type }),
        el("td", { text: a.group ?? "" }),
        el("td", { class: "mono", text: a.instance ?? "" }),
        el("td", { class: "muted", text: `${a.hostname} / ${a.pid}` }),
        el("td", { class: "muted", text: `${ago(now - a.last_heartbeat)} s ago` }),
      ]),
    ),
  );
}

function drawReport(report) {
  const section = $("report-section");
  section.hidden = !report;
  if (!report) return;
  $("report-when").textContent = report.generated_at ? `(generated ${report.generated_at})` : "";
  const types = Array.isArray(report.script_types) ? report.script_types : [];
  $("report").tBodies[0].replaceChildren(
    ...types.map((t) => {
      const rec = t.recommendation || {};
      return el("tr", {}, [
        el("td", { text: t.script_type }),
        el("td", { class: "num", text: t.arrivals ?? "–" }),
        el("td", { class: "num", text: num(t.arrival_rate, 3) }),
        el("td", { class: "num", text: t.wait ? num(t.wait.p95) + " s" : "–" }),
        el("td", { class: "num", text: t.run ? num(t.run.mean) + " s" : "–" }),
        el("td", { class: "num", text: percent(t.utilisation) }),
        el("td", { class: "num", text: t.actors_seen ?? "–" }),
        el("td", { class: "num", text: rec.actors ?? "–", title: rec.reason || "" }),
      ]);
    }),
  );
  $("report-raw").textContent = JSON.stringify(report, null, 2);
}

// -- wiring ------------------------------------------------------------------------------

$("submit").addEventListener("submit", submitJob);
$("auth").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("key").value.trim();
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
  start();
});
$("forget").addEventListener("click", () => {
  sessionStorage.removeItem(KEY_STORAGE);
  start();
});

start();
