"""Prometheus figures read from a real Redis: true queue depth, actors, job counts."""

from __future__ import annotations

from typing import Any

from gateway.metrics import Metrics
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
