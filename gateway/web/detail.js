// The job detail view: everything about one job, kept live while it is open.
//
// job.get gives the record (script, env var names — never their values —, output,
// error, times), job.logs the log so far. A subscription to this one job, replayed
// from its creation, draws the timeline and keeps it live: `log` events append
// their `lines` to the log pane, `progress` events move the bar, and a terminal
// event reloads the record for the final output and error.

import { $, el, TERMINAL, clock, explain, statusBadge } from "/web/dom.js";

const META = [
  ["script_type", "Type"],
  ["caller_id", "Caller"],
  ["context_id", "Context"],
  ["group", "Group"],
  ["instance", "Instance"],
  ["priority", "Priority"],
  ["attempt", "Attempt"],
  ["retries", "Retries"],
  ["timeout", "Timeout (s)"],
  ["actor", "Actor"],
  ["queue", "Queue"],
  ["created_at", "Created"],
  ["started_at", "Started"],
  ["finished_at", "Finished"],
];

export class JobDetail {
  constructor() {
    this.jobId = null;
    this.stream = null;
    this.loaded = ""; // the job.logs answer, which replayed log events repeat
    this.cursor = 0; // how far into `loaded` the log events have been matched
  }

  /** Show `jobId` (from a fresh `hero` connection). */
  async open(hero, jobId) {
    await this.close();
    this.jobId = jobId;
    $("detail-section").hidden = false;
    $("detail-id").textContent = jobId;
    $("detail-timeline").replaceChildren();
    $("detail-log").textContent = "";
    this.progress(null, "");
    let job;
    try {
      job = await hero.jobGet({ job_id: jobId });
    } catch (err) {
      $("detail-output").textContent = explain(err);
      return;
    }
    if (this.jobId !== jobId) return;
    this.draw(job);
    const created = Date.parse(job.created_at || "") || Date.now();
    this.loaded = "";
    this.cursor = 0;
    try {
      const logs = await hero.jobLogs({ job_id: jobId });
      if (this.jobId !== jobId) return;
      this.loaded = logs.logs || "";
      $("detail-log").textContent = this.loaded;
    } catch (err) {
      $("detail-log").textContent = `(no logs: ${explain(err)})`;
    }
    try {
      const stream = await hero.subscribe(
        { job_ids: [jobId], since: `${Math.max(created - 1000, 0)}-0` },
        { onEvent: (event) => this.onEvent(hero, event) },
      );
      if (this.jobId === jobId) this.stream = stream;
      else await stream.close();
    } catch (err) {
      $("detail-timeline").append(el("li", { class: "error", text: explain(err) }));
    }
  }

  async close() {
    const stream = this.stream;
    this.stream = null;
    this.jobId = null;
    if (stream) await stream.close();
  }

  draw(job) {
    $("detail-status").replaceChildren(statusBadge(job.status));
    $("detail-section").dataset.status = job.status;
    $("detail-meta").replaceChildren(
      ...META.filter(([name]) => job[name] !== null && job[name] !== undefined && job[name] !== "")
        .map(([name, label]) => el("div", {}, [el("dt", { text: label }), el("dd", { text: job[name] })])),
    );
    const names = Object.keys(job.env_vars || {}).sort();
    $("detail-env").textContent = names.length ? names.join(", ") : "none";
    const prereqs = job.prerequisites || [];
    $("detail-prereqs").textContent = prereqs.length ? prereqs.join(", ") : "none";
    $("detail-script").textContent = job.script ?? "";
    $("detail-output").textContent =
      job.output ?? (TERMINAL.has(job.status) ? "(no output)" : "(running…)");
    const error = $("detail-error");
    error.hidden = !job.error;
    error.textContent = job.error || "";
    if (TERMINAL.has(job.status)) this.progress(job.status === "finished" ? 1 : null, "");
  }

  progress(value, message) {
    const bar = $("detail-progress");
    bar.hidden = value === null;
    if (value !== null) bar.value = Math.max(0, Math.min(1, value));
    $("detail-progress-message").textContent = message || "";
  }

  /** Lines of a `log` event, unless job.logs already had them: the replay from
   * the job's creation repeats what job.logs returned, in the same order, so each
   * event is matched against the loaded text from where the previous one ended
   * (no clock involved; a line printed twice is matched twice). */
  appendLog(text) {
    const found = this.loaded.indexOf(text, this.cursor);
    if (found >= 0) {
      this.cursor = found + text.length;
      return;
    }
    this.cursor = this.loaded.length; // past what was loaded: everything is new now
    const pane = $("detail-log");
    const joined = pane.textContent && !pane.textContent.endsWith("\n") ? "\n" + text : text;
    pane.textContent += joined;
    pane.scrollTop = pane.scrollHeight;
  }

  onEvent(hero, event) {
    if (event.job_id !== this.jobId) return;
    if (event.event === "log") {
      if (event.lines) this.appendLog(String(event.lines));
      return;
    }
    if (event.event === "progress") {
      this.progress(Number(event.progress), event.message);
      return;
    }
    $("detail-timeline").append(
      el("li", { "data-event": event.event }, [
        el("span", { class: "muted", text: clock(event.ts) + " " }),
        statusBadge(event.event),
        event.actor ? el("span", { class: "muted", text: ` on ${event.actor}` }) : "",
        event.attempt ? el("span", { class: "muted", text: ` attempt ${event.attempt}` }) : "",
        event.error ? el("span", { class: "error", text: ` ${event.error}` }) : "",
      ]),
    );
    $("detail-status").replaceChildren(statusBadge(event.status));
    $("detail-section").dataset.status = event.status;
    if (TERMINAL.has(event.status)) {
      const jobId = this.jobId;
      hero.jobGet({ job_id: jobId }).then(
        (job) => this.jobId === jobId && this.draw(job),
        () => {},
      );
    }
  }
}
