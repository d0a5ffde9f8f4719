"""The pipeline report as pictures: Plotly figures built from ``report.json``.

One function, ``figures(report)``, turns a report into Plotly figure specs
(plain ``{"data", "layout"}`` dicts); everything else shows them:

- ``pipeline run`` writes ``charts.html`` next to ``report.json``, with the
  figures embedded as JSON (``<script type="application/json" id="hero-charts">``,
  so a test or a script reads back exactly what is plotted) and ``plotly.min.js``
  copied beside it from the ``plotly`` package: the page opens offline, no CDN.
- the published report carries the same figures under ``charts``, and the
  gateway's page draws them with the bundle the gateway serves.

Per-bucket series are per (script type, group), the finest level the report
has: percentiles of different groups cannot be merged into a type's.
"""

from __future__ import annotations

import html
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

Figure = dict[str, Any]

CHARTS_FILE = "charts.html"
PLOTLY_FILE = "plotly.min.js"
#: Percentiles drawn for wait and run time, with their line style.
PERCENTILES = (("p50", "dot"), ("p95", "solid"), ("p99", "dash"))
#: One colour per series (type/group); the line style tells the measure apart.
PALETTE = ("#2357c6", "#d9730d", "#1f7a3f", "#b42318", "#7a4cc2", "#0f8b8d", "#9a6700")


def plotly_js() -> Path:
    """The Plotly bundle shipped inside the ``plotly`` Python package."""
    return Path(str(resources.files("plotly") / "package_data" / PLOTLY_FILE))


def _series(entry: dict[str, Any]) -> str:
    group = entry.get("group") or ""
    return f"{entry['script_type']}/{group}" if group else str(entry["script_type"])


def _by_series(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The report's buckets per (type, group) series, oldest first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for bucket in report.get("buckets", []):
        out.setdefault(_series(bucket), []).append(bucket)
    for rows in out.values():
        rows.sort(key=lambda b: b["bucket_start"])
    return out


def _layout(title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "xaxis": {"automargin": True},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.25},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 30},
        "height": 360,
        **extra,
    }


def _lines(
    report: dict[str, Any], styles: tuple[tuple[str, str], ...], value: Any
) -> list[dict[str, Any]]:
    """One line per (series, style): ``value(bucket, key)`` over the buckets."""
    data = []
    for n, (series, rows) in enumerate(_by_series(report).items()):
        for key, dash in styles:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{series} {key}",
                    "x": [b["bucket_start"] for b in rows],
                    "y": [value(b, key) for b in rows],
                    "line": {"dash": dash, "color": PALETTE[n % len(PALETTE)]},
                    "marker": {"size": 4},
                }
            )
    return data


def _durations(report: dict[str, Any], name: str, title: str) -> Figure:
    data = _lines(report, PERCENTILES, lambda b, key: b[name][key])
    return {"data": data, "layout": _layout(title, "seconds")}


def _throughput(report: dict[str, Any]) -> Figure:
    seconds = report["params"]["bucket_seconds"]
    styles = (("arrivals", "dot"), ("done", "solid"))
    columns = {"arrivals": "arrivals", "done": "completions"}
    data = _lines(report, styles, lambda b, key: b[columns[key]] / seconds)
    return {"data": data, "layout": _layout("Throughput", "jobs per second")}


def _utilisation(report: dict[str, Any]) -> Figure:
    by_type: dict[str, list[dict[str, Any]]] = {}
    for actor in report.get("actors", []):
        by_type.setdefault(actor["script_type"], []).append(actor)
    overall = {e["script_type"]: e.get("utilisation") for e in report.get("script_types", [])}
    data = []
    for script_type, actors in by_type.items():
        mean = overall.get(script_type)
        data.append(
            {
                "type": "bar",
                "name": f"{script_type} (type {mean:.0%})" if mean is not None else script_type,
                "x": [a["actor"] for a in actors],
                "y": [a["utilisation"] for a in actors],
            }
        )
    layout = _layout("Utilisation per actor", "busy share of the window")
    layout["yaxis"]["tickformat"] = ".0%"
    return {"data": data, "layout": layout}


def _actors(report: dict[str, Any]) -> Figure:
    entries = report.get("script_types", [])
    types = [e["script_type"] for e in entries]
    columns = (
        ("present (actors seen)", [e.get("actors_seen") for e in entries]),
        ("recommended", [e["recommendation"].get("actors") for e in entries]),
        (
            "recommended at peak",
            [(e.get("peak") or {}).get("recommendation", {}).get("actors") for e in entries],
        ),
    )
    data = [{"type": "bar", "name": name, "x": types, "y": ys} for name, ys in columns]
    params = report["params"]
    target = f"p{round(params['slo_quantile'] * 100)} wait <= {params['slo_wait']:g} s"
    title = f"Actors: present vs recommended ({target})"
    return {"data": data, "layout": _layout(title, "actors", barmode="group")}


def figures(report: dict[str, Any]) -> dict[str, Figure]:
    """Every chart of ``report``, by name, in reading order."""
    return {
        "wait": _durations(report, "wait", "Queue wait per bucket"),
        "run": _durations(report, "run", "Run time per bucket"),
        "throughput": _throughput(report),
        "utilisation": _utilisation(report),
        "actors": _actors(report),
    }


def _page(report: dict[str, Any], charts: dict[str, Figure]) -> str:
    window = report.get("window", {})
    title = f"hero-gateway pipeline report, {window.get('start')} to {window.get('end')}"
    # "</" cannot end the script element early: JSON allows "<\/" for "</".
    embedded = json.dumps(charts, allow_nan=False).replace("</", "<\\/")
    divs = "\n".join(f'<div class="chart" id="chart-{name}"></div>' for name in charts)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<script src="{PLOTLY_FILE}"></script>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 16px 24px; color: #1d232b; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 12px; }}
.chart {{ border: 1px solid #dfe3e8; border-radius: 8px; }}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p>Generated {html.escape(str(report.get("generated_at")))}; the numbers: report.json beside
this file.</p>
<div class="grid">
{divs}
</div>
<script type="application/json" id="hero-charts">{embedded}</script>
<script>
const charts = JSON.parse(document.getElementById("hero-charts").textContent);
for (const [name, fig] of Object.entries(charts)) {{
  Plotly.newPlot("chart-" + name, fig.data, fig.layout, {{displaylogo: false, responsive: true}});
}}
</script>
</body>
</html>
"""


def read_embedded(page: str) -> dict[str, Figure]:
    """The figures a ``charts.html`` embeds (what tests and scripts compare)."""
    start = page.index('<script type="application/json" id="hero-charts">')
    start = page.index(">", start) + 1
    end = page.index("</script>", start)
    figs: dict[str, Figure] = json.loads(page[start:end])
    return figs


def write(report: dict[str, Any], out: Path) -> Path:
    """``out/charts.html`` and ``out/plotly.min.js``, each replaced atomically."""
    out.mkdir(parents=True, exist_ok=True)
    bundle = out / PLOTLY_FILE
    tmp_js = out / f".{PLOTLY_FILE}.{os.getpid()}.tmp"
    shutil.copyfile(plotly_js(), tmp_js)
    os.replace(tmp_js, bundle)
    target = out / CHARTS_FILE
    tmp = out / f".{CHARTS_FILE}.{os.getpid()}.tmp"
    tmp.write_text(_page(report, figures(report)), encoding="utf-8")
    os.replace(tmp, target)
    return target
