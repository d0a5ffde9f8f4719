// The live chart: queue depth per script type (from queue.stats) and jobs ended
// per second (from the job.event subscription), one point per poll.
//
// The newest point is also kept, as JSON, in the chart's `data-latest`
// attribute ({ts, depth: {type: n}, throughput, points}): what is on screen can
// be read back and compared with what queue.stats said at that moment.

import { $, TERMINAL } from "/web/dom.js";

const MAX_POINTS = 150;
/** Events older than this (by their own ts) are replayed history, not throughput.
 * Generous, so a browser whose clock is off by less than this still counts. */
const REPLAYED_MS = 60_000;

export class LiveChart {
  constructor(node) {
    this.node = node;
    this.points = []; // {ts, depth: {type: n}, throughput}
    this.ended = 0; // terminal events since the last point
    this.lastTs = Date.now();
  }

  /** A job.event from the page's subscription, counted when it arrives (browser
   * time: the gateway's clock may differ); replayed history is not throughput. */
  onEvent(event) {
    if (TERMINAL.has(event.event) && event.ts > Date.now() - REPLAYED_MS) this.ended += 1;
  }

  /** One poll's queue.stats answer: a new point, drawn. */
  add(queues, now = Date.now()) {
    const depth = {};
    for (const q of queues) depth[q.script_type] = (depth[q.script_type] || 0) + q.depth;
    const seconds = Math.max((now - this.lastTs) / 1000, 0.001);
    // The first point has no interval of its own: what arrived before it is
    // mostly the subscription's replay of recent history, not throughput.
    const throughput = this.points.length ? this.ended / seconds : null;
    const point = { ts: now, depth, throughput };
    this.ended = 0;
    this.lastTs = now;
    this.points.push(point);
    if (this.points.length > MAX_POINTS) this.points.shift();
    this.draw();
    this.node.dataset.latest = JSON.stringify({ ...point, points: this.points.length });
  }

  draw() {
    const types = [...new Set(this.points.flatMap((p) => Object.keys(p.depth)))].sort();
    const x = this.points.map((p) => new Date(p.ts));
    const data = types.map((type) => ({
      type: "scatter",
      mode: "lines",
      name: `${type} depth`,
      x,
      y: this.points.map((p) => p.depth[type] ?? 0),
    }));
    data.push({
      type: "scatter",
      mode: "lines",
      name: "ended /s",
      x,
      y: this.points.map((p) => p.throughput),
      yaxis: "y2",
      line: { dash: "dot", color: "#1f7a3f" },
    });
    const layout = {
      margin: { l: 50, r: 50, t: 10, b: 30 },
      height: 240,
      legend: { orientation: "h" },
      xaxis: { tickformat: "%H:%M:%S" },
      yaxis: { title: { text: "jobs queued or running" }, rangemode: "tozero" },
      yaxis2: { title: { text: "ended / s" }, overlaying: "y", side: "right", rangemode: "tozero" },
    };
    window.Plotly.react(this.node, data, layout, { displaylogo: false, responsive: true });
    $("live-empty").hidden = true;
  }
}
