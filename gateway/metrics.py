"""Prometheus metrics for ``GET /metrics``: what an autoscaler and an operator need.

Queue figures (true depth, pending, oldest age, consumers) and live actors are
read from Redis at scrape time, so every gateway reports the same truth.
Job transitions are counted inside Redis by the Functions that make them
(``keys.TRANSITIONS``) and read at scrape time too: one deployment-wide count,
the same from every gateway, and no gateway has to read every event to keep
it. RPC latency is a histogram per method (per process), fed by the RPC layer
through ``observe_call``.
``hero_recommended_actors`` repeats the latest pipeline report's Erlang C advice
per script type, so an autoscaler (deploy/keda/) can follow it directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

from gateway.supervisor import STATUSES, Supervisor

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_QUEUE_LABELS = ("queue", "script_type", "group", "instance", "priority")


class _Transitions:
    """``hero_job_transitions_total``: the counts last read from Redis, as a
    counter family (a ``Counter`` can only be added to, not set)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "hero_job_transitions", "Job transitions, per new status and script type",
            labels=("status", "script_type"),
        )  # fmt: skip
        for labels, n in sorted(self.counts.items()):
            family.add_metric(labels, n)
        yield family


class Metrics:
    content_type = CONTENT_TYPE

    def __init__(self, supervisor: Supervisor) -> None:
        self._sup = supervisor
        self.registry = CollectorRegistry()
        r = self.registry
        self.depth = Gauge("hero_queue_depth", "Jobs not done (lag + pending), per work queue",
                           _QUEUE_LABELS, registry=r)  # fmt: skip
        self.lag = Gauge("hero_queue_lag", "Jobs waiting for an actor, per work queue",
                         _QUEUE_LABELS, registry=r)  # fmt: skip
        self.pending = Gauge("hero_queue_pending", "Jobs claimed and not finished, per queue",
                             _QUEUE_LABELS, registry=r)  # fmt: skip
        self.oldest = Gauge("hero_queue_oldest_age_seconds", "Age of the oldest waiting job",
                            _QUEUE_LABELS, registry=r)  # fmt: skip
        self.consumers = Gauge("hero_queue_consumers", "Live actors popping this queue",
                               _QUEUE_LABELS, registry=r)  # fmt: skip
        self.actors = Gauge("hero_actors", "Live actor instances", ("script_type",), registry=r)
        self.recommended = Gauge(
            "hero_recommended_actors",
            "Actors the latest pipeline report advises (Erlang C), per script type",
            ("script_type",), registry=r,
        )  # fmt: skip
        self.jobs = Gauge("hero_jobs", "Jobs currently in each status", ("status",), registry=r)
        self.transitions = _Transitions()
        r.register(self.transitions)
        self.rpc = Histogram(
            "hero_rpc_duration_seconds", "JSON-RPC call latency", ("method", "outcome"),
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30),
            registry=r,
        )  # fmt: skip
        self._rpc: dict[tuple[str, int | None], Histogram] = {}

    def observe_call(self, method: str, seconds: float, error_code: int | None) -> None:
        """Every served call: its histogram child is looked up once per
        (method, error code), not through ``labels`` on every call."""
        child = self._rpc.get((method, error_code))
        if child is None:
            outcome = "ok" if error_code is None else str(error_code)
            child = self._rpc[method, error_code] = self.rpc.labels(method, outcome)
        child.observe(seconds)

    def _recommendations(self, report: dict[str, Any] | None) -> None:
        """One ``hero_recommended_actors`` sample per type the report advises on
        (a type without advice, e.g. no completed job yet, has none: an
        autoscaler keeps its current size rather than scale to zero)."""
        self.recommended.clear()
        for entry in (report or {}).get("script_types", []):
            actors = (entry.get("recommendation") or {}).get("actors")
            if isinstance(actors, int):
                self.recommended.labels(entry["script_type"]).set(actors)

    async def render(self) -> bytes:
        """Refresh the Redis-backed gauges, then the text exposition."""
        queues = await self._sup.queue_stats()
        live = await self._sup.actors()
        counts = await self._sup.status_counts()
        self.transitions.counts = await self._sup.transition_counts()
        gauges = (self.depth, self.lag, self.pending, self.oldest, self.consumers, self.actors)
        for gauge in gauges:
            gauge.clear()
        for q in queues:
            labels = [str(q[name] if q[name] is not None else "") for name in _QUEUE_LABELS]
            self.depth.labels(*labels).set(q["depth"])
            self.lag.labels(*labels).set(q["lag"])
            self.pending.labels(*labels).set(q["pending"])
            self.oldest.labels(*labels).set(q["oldest_age"] or 0)
            self.consumers.labels(*labels).set(q["consumers"])
        per_type: dict[str, int] = {}
        for actor in live:
            per_type[actor["script_type"]] = per_type.get(actor["script_type"], 0) + 1
        for script_type, n in per_type.items():
            self.actors.labels(script_type).set(n)
        for status in STATUSES:
            self.jobs.labels(status).set(counts.get(status, 0))
        self._recommendations(await self._sup.report())
        return generate_latest(self.registry)
