// The operator console: live jobs with filters (job.list + job.subscribe), a job
// detail view, a live chart of queue depth and throughput (queue.stats), actors
// (actor.list), events, the dead-letter queues for admins, and the pipeline
// report with its charts (stats.report). It uses the generated client
// (/client/hero-client.js), which reconnects and resumes subscriptions by itself.

import { HeroClient } from "/client/hero-client.js";
import { Admin } from "/web/admin.js";
import { JobDetail } from "/web/detail.js";
import {
  $,
  PROGRESS_EVENTS,
  TERMINAL,
  age,
  clock,
  el,
  explain,
  short,
  statusBadge,
} from "/web/dom.js";
import { LiveChart } from "/web/live.js";
import { drawReport } from "/web/report.js";

const KEY_STORAGE = "hero-gateway-key";
const keyGiven = () => Boolean(sessionStorage.getItem(KEY_STORAGE));
const POLL_MS = 2000;
const REPORT_MS = 15000;
const MAX_JOBS = 200;
const MAX_EVENTS = 60;
/** How far back the Events panel replays on load (the events stream keeps them). */
const EVENTS_BACK_MS = 15 * 60 * 1000;

// -- state -------------------------------------------------------------------------------

/** @type {HeroClient | null} */
let hero = null;
let identity = null;
let stream = null;
let pollTimer = null;
let lastReport = 0;
/** The newest update job.list showed (server time): replayed events of jobs it did
 * not list and older than this are history (e.g. purged jobs), not table rows. */
let listedUpTo = 0;
/** job_id → {job_id, script_type, status, caller_id, actor, attempt, updated, first} */
const jobs = new Map();
const detail = new JobDetail();
const live = new LiveChart($("live-chart"));
const admin = new Admin((jobId) => openJob(jobId));

function notice(text) {
  const box = $("notice");
  box.hidden = !text;
  box.textContent = text || "";
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
    await detail.close();
    await old.close();
  }
  // another key may see other jobs: nothing of the previous identity stays on screen
  jobs.clear();
  drawJobs();
  $("events").replaceChildren();
  $("detail-section").hidden = true;
  const key = sessionStorage.getItem(KEY_STORAGE) || undefined;
  $("key").value = key || "";
  const client = new HeroClient(wsUrl(), { key, onStatus: (s, d) => onStatus(client, s, d) });
  hero = client;
  try {
    await client.connect();
  } catch (err) {
    if (hero === client) notice(explain(err, keyGiven()));
  }
}

function onStatus(client, status, detailed) {
  if (client !== hero) return;
  const pill = $("conn");
  pill.dataset.state = status;
  pill.textContent =
    status === "open" && client.reconnects ? `connected (reconnected ×${client.reconnects})`
      : status === "open" ? "connected"
      : status;
  if (status === "open") onOpen(client);
  if (status === "failed") notice(explain(detailed, keyGiven()));
}

async function onOpen(client) {
  try {
    identity = await client.authWhoami();
    $("who").textContent =
      identity.scope === "anonymous" ? "no auth" : `${identity.name} (${identity.scope})`;
    notice("");
  } catch (err) {
    $("who").textContent = "";
    notice(explain(err));
    return;
  }
  admin.use(client, identity);
  const user = identity.scope === "user";
  $("f-caller").disabled = user;
  if (user) $("f-caller").value = identity.caller_id || "";
  if (!stream) {
    await loadJobs(client);
    try {
      // replayed from a while back, so the Events panel is not empty after a reload
      const since = `${Math.max(Date.now() - EVENTS_BACK_MS, 0)}-0`;
      stream = await client.subscribe({ since }, { onEvent });
    } catch (err) {
      notice(`Live events unavailable: ${explain(err)}`);
    }
  }
  refresh();
  if (pollTimer === null) pollTimer = setInterval(refresh, POLL_MS);
}

// -- jobs and filters ---------------------------------------------------------------------

function filters() {
  const status = $("f-status").value;
  const scriptType = $("f-type").value.trim();
  const caller = $("f-caller").value.trim();
  return { status: status || null, script_type: scriptType || null, caller_id: caller || null };
}

function matches(job, f = filters()) {
  return (
    (!f.status || job.status === f.status) &&
    (!f.script_type || job.script_type === f.script_type) &&
    (!f.caller_id || job.caller_id === f.caller_id)
  );
}

async function loadJobs(client) {
  const f = filters();
  const params = { limit: 50 };
  for (const [name, value] of Object.entries(f)) if (value) params[name] = value;
  if (identity && identity.scope === "user") delete params.caller_id; // always its own
  try {
    const page = await client.jobList(params);
    jobs.clear();
    listedUpTo = 0;
    for (const job of page.jobs.slice().reverse()) {
      const when = Date.parse(job.updated_at || job.created_at || "") || Date.now();
      listedUpTo = Math.max(listedUpTo, when);
      upsert({
        job_id: job.id,
        script_type: job.script_type,
        status: job.status,
        caller_id: job.caller_id ?? null,
        actor: job.actor ?? null,
        attempt: job.attempt ?? 0,
        updated: when,
        first: Date.parse(job.created_at || "") || when,
      }, false);
    }
    drawJobs();
  } catch (err) {
    notice(explain(err));
  }
}

function upsert(fields, draw = true) {
  const known = jobs.get(fields.job_id);
  if (known && fields.updated < known.updated) return; // an older event (list after events)
  const job = known ? { ...known, ...fields, first: known.first } : { ...fields };
  jobs.set(job.job_id, job);
  if (jobs.size > MAX_JOBS) {
    const oldest = [...jobs.values()].sort((a, b) => a.first - b.first)[0];
    jobs.delete(oldest.job_id);
  }
  if (draw) drawJobs();
}

function onEvent(event) {
  live.onEvent(event);
  if (PROGRESS_EVENTS.has(event.event)) return; // the detail view shows those
  if (jobs.has(event.job_id) || event.ts >= listedUpTo) {
    upsert({
      job_id: event.job_id,
      script_type: event.script_type,
      status: event.status,
      caller_id: event.caller_id ?? null,
      actor: event.actor,
      attempt: event.attempt,
      updated: event.ts,
      first: event.ts,
    });
  }
  const list = $("events");
  list.prepend(
    el("li", { "data-job-id": event.job_id }, [
      el("span", { class: "muted", text: clock(event.ts) + " " }),
      el("span", { class: "mono", text: short(event.job_id) }),
      " ",
      statusBadge(event.event),
      event.actor ? el("span", { class: "muted", text: " on " + event.actor }) : "",
      event.error ? el("span", { class: "error", text: " " + event.error }) : "",
    ]),
  );
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
}

function drawJobs() {
  const f = filters();
  const rows = [...jobs.values()].filter((job) => matches(job, f)).sort((a, b) => b.first - a.first);
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
          class: job.job_id === detail.jobId ? "selected" : null,
          onclick: () => openJob(job.job_id),
        },
        [
          el("td", { class: "mono", text: short(job.job_id), title: job.job_id }),
          el("td", { text: job.script_type }),
          el("td", {}, [statusBadge(job.status)]),
          el("td", { class: "muted", text: job.caller_id || "" }),
          el("td", { class: "muted", text: job.actor || "" }),
          el("td", { class: "num", text: job.attempt ?? "" }),
          el("td", { class: "muted", text: clock(job.updated) }),
          el("td", {}, [stop]),
        ],
      );
    }),
  );
}

async function openJob(jobId) {
  const opening = detail.open(hero, jobId);
  drawJobs();
  await opening;
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
      caller_id: identity && identity.scope === "user" ? identity.caller_id : null,
      actor: null,
      attempt: 0,
      updated: Date.now(),
      first: Date.now(),
    });
    await hero.jobStart({ job_id: created.job_id });
    await openJob(created.job_id);
  } catch (err) {
    problem.textContent = explain(err);
    if (err && err.data) problem.textContent += " " + JSON.stringify(err.data);
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
    live.add(queues.queues);
    drawQueues(queues.queues);
    drawActors(actors.actors);
    await admin.refresh();
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
        el("td", { class: "muted", text: `${Math.max(0, now - a.last_heartbeat).toFixed(0)} s ago` }),
      ]),
    ),
  );
}

// -- wiring ------------------------------------------------------------------------------

$("submit").addEventListener("submit", submitJob);
$("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  if (hero) loadJobs(hero);
});
$("f-status").addEventListener("change", () => hero && loadJobs(hero));
$("f-clear").addEventListener("click", () => {
  $("f-status").value = "";
  $("f-type").value = "";
  if (!$("f-caller").disabled) $("f-caller").value = "";
  if (hero) loadJobs(hero);
});
$("detail-close").addEventListener("click", async () => {
  await detail.close();
  $("detail-section").hidden = true;
  drawJobs();
});
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
