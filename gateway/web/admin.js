// Admin only: the dead-letter queues with replay (queue.dlq.list / queue.dlq.replay)
// and purging ended jobs (job.purge). Hidden for user keys, which may use neither.

import { $, el, age, clock, explain, short } from "/web/dom.js";

export class Admin {
  constructor(onOpenJob) {
    this.onOpenJob = onOpenJob;
    this.hero = null;
    $("purge").addEventListener("submit", (event) => {
      event.preventDefault();
      this.purge();
    });
  }

  /** Show or hide the admin panel for the identity `me` (auth.whoami). */
  use(hero, me) {
    const admin = me.scope !== "user";
    this.hero = admin ? hero : null;
    $("admin-section").hidden = !admin;
  }

  async refresh() {
    if (!this.hero) return;
    const page = await this.hero.queueDlqList({ limit: 50 });
    $("dlq-empty").hidden = page.entries.length > 0;
    const now = Date.now();
    $("dlq").tBodies[0].replaceChildren(
      ...page.entries.map((entry) =>
        el("tr", { "data-job-id": entry.job_id }, [
          el("td", { class: "mono", title: entry.job_id }, [
            el("a", {
              href: "#",
              text: short(entry.job_id),
              onclick: (e) => {
                e.preventDefault();
                this.onOpenJob(entry.job_id);
              },
            }),
          ]),
          el("td", { text: entry.script_type }),
          el("td", { text: entry.reason }),
          el("td", { class: "error", text: entry.error || "" }),
          el("td", { class: "num", text: entry.attempt }),
          el("td", { class: "muted", title: clock(entry.ts), text: age((now - entry.ts) / 1000) }),
          el("td", {}, [
            el("button", {
              type: "button",
              class: "replay quiet",
              text: "Replay",
              onclick: (e) => this.replay(entry, e.currentTarget),
            }),
          ]),
        ]),
      ),
    );
  }

  async replay(entry, button) {
    button.disabled = true;
    try {
      const answer = await this.hero.queueDlqReplay({
        script_type: entry.script_type,
        job_ids: [entry.job_id],
      });
      $("admin-result").textContent = `replayed ${answer.replayed.length}: ${answer.replayed.join(", ")}`;
      await this.refresh();
    } catch (err) {
      button.disabled = false;
      $("admin-result").textContent = `replay failed: ${explain(err)}`;
    }
  }

  async purge() {
    const status = $("purge-status").value;
    const olderThan = Number($("purge-older").value || 0);
    if (!confirm(`Delete every ${status} job that ended at least ${olderThan} s ago?`)) return;
    try {
      const answer = await this.hero.jobPurge({ status, older_than: olderThan });
      $("admin-result").textContent = `purged ${answer.deleted} ${status} job(s)`;
    } catch (err) {
      $("admin-result").textContent = `purge failed: ${explain(err)}`;
    }
  }
}
