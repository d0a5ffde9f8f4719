// The latest pipeline report (stats.report): the per-type table and its charts.
// The charts are the figures `pipeline run` published with the report (the same
// ones as its charts.html), drawn with the Plotly bundle the gateway serves.

import { $, el, num, percent } from "/web/dom.js";

let shown = null; // generated_at of the report on screen

export function drawReport(report) {
  const section = $("report-section");
  section.hidden = !report;
  if (!report || report.generated_at === shown) return;
  shown = report.generated_at;
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
  const charts = report.charts && typeof report.charts === "object" ? report.charts : {};
  const box = $("report-charts");
  box.replaceChildren();
  for (const [name, fig] of Object.entries(charts)) {
    const div = el("div", { class: "chart", "data-chart": name });
    box.append(div);
    window.Plotly.newPlot(div, fig.data, { ...fig.layout, height: 300 }, {
      displaylogo: false,
      responsive: true,
    });
  }
  const { charts: _, ...raw } = report;
  $("report-raw").textContent = JSON.stringify(raw, null, 2);
}
