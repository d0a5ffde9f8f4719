"""The pipeline report's pictures, its 80-column summary and its advice on /metrics.

One small ``pipeline run`` on local Spark (synthetic M/M/c events for two script
types) feeds every test here: the charts written next to ``report.json`` are
parsed and their plotted values compared with the report, the summary is
rendered at 80 columns, and a real gateway's ``GET /metrics`` carries
``hero_recommended_actors`` from the published report, which deploy/keda/ scales on.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gateway.pipeline import charts, report, synth
from gateway.pipeline.summary import render, tables
from tests.helpers import samples
from tests.server_support import Server, fetch
from tests.test_pipeline_e2e import cli

pytestmark = pytest.mark.timeout(180)

START_MS = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
SPEC = synth.SynthSpec(
    jobs=240,
    rate=2.0,
    service_mean=0.8,
    actors=2,
    script_types=("python", "a-rather-long-script-type-name"),
    error_rate=0.1,
    max_attempts=2,
    seed=3,
    start_ms=START_MS,
)


@pytest.fixture(scope="module")
def ran(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """``pipeline run`` on the synthetic archive, once: (report.json, its folder)."""
    root = tmp_path_factory.mktemp("charts")
    events, _ = synth.simulate(SPEC)
    synth.write_parquet(SPEC, events, root / "events")
    out = root / "out"
    argv = ["pipeline", "run", "--events", str(root / "events"), "--out", str(out)]
    assert cli([*argv, "--bucket", "30", "--slo-wait", "0.5", "--quiet"]) == 0
    return json.loads((out / "report.json").read_text()), out


def _trace(fig: dict[str, Any], name: str) -> dict[str, Any]:
    found = [t for t in fig["data"] if t["name"] == name]
    assert len(found) == 1, (name, [t["name"] for t in fig["data"]])
    trace: dict[str, Any] = found[0]
    return trace


def test_charts_plot_what_report_json_says(ran: tuple[dict[str, Any], Path]) -> None:
    built, out = ran
    page = (out / charts.CHARTS_FILE).read_text()
    bundle = out / charts.PLOTLY_FILE
    assert bundle.read_bytes() == charts.plotly_js().read_bytes()
    assert f'<script src="{charts.PLOTLY_FILE}">' in page and "https://" not in page
    figs = charts.read_embedded(page)
    assert list(figs) == ["wait", "run", "throughput", "utilisation", "actors"]

    # every bucket of every (type, group) series, each percentile, as plotted
    series = {b["script_type"] for b in built["buckets"]}
    assert series == set(SPEC.script_types)
    seconds = built["params"]["bucket_seconds"]
    for script_type in series:
        rows = [b for b in built["buckets"] if b["script_type"] == script_type]
        assert len(rows) > 3  # a real line over time
        xs = [b["bucket_start"] for b in rows]
        for name in ("wait", "run"):
            for key in ("p50", "p95", "p99"):
                trace = _trace(figs[name], f"{script_type} {key}")
                assert trace["x"] == xs
                assert trace["y"] == [b[name][key] for b in rows]
        done = _trace(figs["throughput"], f"{script_type} done")
        assert done["y"] == pytest.approx([b["completions"] / seconds for b in rows])
        assert sum(done["y"]) * seconds == pytest.approx(
            next(e for e in built["script_types"] if e["script_type"] == script_type)["completions"]
        )

    # utilisation per actor, and present vs recommended actors per type
    plotted = {
        (t["name"].split(" ")[0], x): y
        for t in figs["utilisation"]["data"]
        for x, y in zip(t["x"], t["y"], strict=True)
    }
    assert plotted == {(a["script_type"], a["actor"]): a["utilisation"] for a in built["actors"]}
    actors = {t["name"]: dict(zip(t["x"], t["y"], strict=True)) for t in figs["actors"]["data"]}
    for entry in built["script_types"]:
        assert actors["present (actors seen)"][entry["script_type"]] == entry["actors_seen"]
        assert actors["recommended"][entry["script_type"]] == entry["recommendation"]["actors"]
        assert isinstance(entry["recommendation"]["actors"], int)

    assert report.published(built)["charts"] == figs


async def test_metrics_export_the_published_advice(
    ran: tuple[dict[str, Any], Path], redis_url: str, server: Server
) -> None:
    """What ``pipeline run --redis-url`` publishes, a gateway's /metrics exports."""
    built, _ = ran
    status, _, body = await fetch(server.http + "/metrics")
    assert status == 200 and b"hero_recommended_actors{" not in body  # no report yet
    await asyncio.to_thread(report.publish, built, redis_url)
    status, _, body = await fetch(server.http + "/metrics")
    assert status == 200
    found = samples(body)
    for entry in built["script_types"]:
        key = ("hero_recommended_actors", (("script_type", entry["script_type"]),))
        assert found[key] == entry["recommendation"]["actors"]


def test_summary_reads_well_in_80_columns(ran: tuple[dict[str, Any], Path]) -> None:
    built, out = ran
    sink = io.StringIO()
    console = Console(file=sink, width=80, color_system=None)
    console.print(render(built, out / "report.json", published=True))
    text = sink.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # nothing cut short
    # every header and every cell is whole on one line (the type name may wrap)
    for table in tables(built):
        for column in table.columns[1:]:
            assert re.search(rf"\b{re.escape(str(column.header))}\b", text), column.header
            for cell in column.cells:
                assert str(cell) in text, (column.header, cell)
    assert "python" in text and "report.json (published to" in text


def test_keda_example_scales_on_the_advice() -> None:
    """deploy/keda/scaledobject-advice.yaml: a Prometheus trigger on the metric the
    test above reads from /metrics, next to the depth trigger, for the same Deployment."""
    keda = Path(__file__).resolve().parent.parent / "deploy" / "keda"
    scaled = (keda / "scaledobject-advice.yaml").read_text()
    assert re.search(r"^kind: ScaledObject$", scaled, re.M)
    queries = re.findall(r"^\s+query: (.+)$", scaled, re.M)
    assert queries[0] == 'max(hero_recommended_actors{script_type="python"})'
    assert "hero_queue_depth" in queries[1]
    assert re.findall(r"^\s+- type: (\S+)$", scaled, re.M) == ["prometheus", "prometheus"]
    target = re.search(r"scaleTargetRef:\s*\n\s*name: (\S+)", scaled)
    assert target is not None
    assert f"name: {target.group(1)}" in (keda / "actor-deployment.yaml").read_text()
