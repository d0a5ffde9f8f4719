"""Prometheus figures read from a real Redis: true queue depth, actors, job counts."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from gateway.metrics import Metrics, _RpcLatencies
from gateway.supervisor import Supervisor
from tests.helpers import job, samples, transitions


async def test_metrics_report_depth_actors_counts_and_latency(sup: Supervisor, actors: Any) -> None:
    metrics = Metrics(sup)
    for n in range(3):
        await sup.start(
            (await sup.create(job(script_type="osis", job_id=f"q{n}", group="g")))["job_id"]
        )
    await sup.create(job(job_id="idle"))
    metrics.observe_call("job.create", 0.002, None)
    metrics.observe_call("job.get", 0.001, -32001)
    actors()
    await sup.run(job("print(1)"), wait=20)
    text = await metrics.render()
    found = samples(text)
    labels = (("group", "g"), ("instance", ""), ("priority", "1"),
              ("queue", "hero:q:work:type:osis:group:g"), ("script_type", "osis"))  # fmt: skip
    assert found[("hero_queue_depth", labels)] == 3
    assert found[("hero_queue_lag", labels)] == 3
    assert found[("hero_queue_oldest_age_seconds", labels)] >= 0
    assert found[("hero_actors", (("script_type", "python"),))] == 1
    assert found[("hero_jobs", (("status", "dispatched"),))] == 3
    assert found[("hero_jobs", (("status", "created"),))] == 1
    assert found[("hero_jobs", (("status", "finished"),))] == 1
    # the run went created -> dispatched -> started -> finished; the others wait
    assert transitions(text) == {
        ("created", "osis"): 3, ("dispatched", "osis"): 3, ("created", "python"): 2,
        ("dispatched", "python"): 1, ("started", "python"): 1, ("finished", "python"): 1,
    }  # fmt: skip
    assert (
        found[("hero_rpc_duration_seconds_count", (("method", "job.get"), ("outcome", "-32001")))]
        == 1
    )


def test_rpc_latency_exposition_is_prometheus_clients_histogram() -> None:
    """The lock-free latency histogram renders what prometheus_client's own
    ``Histogram`` renders for the same observations (``_created`` times aside):
    bounds, cumulative buckets, counts and sums, values on a bound included."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    latencies = _RpcLatencies()
    ours.register(latencies)
    reference = Histogram(
        latencies.name, latencies.documentation, ("method", "outcome"),
        buckets=latencies.bounds, registry=theirs,
    )  # fmt: skip
    observed = [
        ("job.create", 0.0005, None), ("job.create", 0.0007, None), ("job.create", 0.0, None),
        ("job.start", 0.001, None), ("job.start", 31.0, None), ("job.get", 1.0, -32001),
        ("job.get", 0.3, -32001), ("job.create", 2.5, -32602), ("job.create", 0.01, None),
    ]  # fmt: skip
    for method, seconds, code in observed:
        latencies.observe(method, seconds, code)
        reference.labels(method, "ok" if code is None else str(code)).observe(seconds)

    def lines(registry: CollectorRegistry) -> list[str]:
        text = generate_latest(registry).decode()
        return sorted(line for line in text.splitlines() if "_created{" not in line)

    assert lines(ours) == lines(theirs)
    created = samples(generate_latest(ours))
    assert (
        created[
            ("hero_rpc_duration_seconds_created", (("method", "job.get"), ("outcome", "-32001")))
        ]
        > 0
    )
