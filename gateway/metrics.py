"""Prometheus metrics for ``GET /metrics``: what an autoscaler and an operator need.

Queue figures (true depth, pending, oldest age, consumers) and live actors are
read from Redis at scrape time, so every gateway reports the same truth.
Job transitions are counted inside Redis by the Functions that make them
(``keys.TRANSITIONS``) and read at scrape time too: one deployment-wide count,
the same from every gateway, and no gateway has to read every event to keep
it. RPC latency is a histogram per method and outcome (per process), fed by
the RPC layer through ``observe_call``. The budget of unidentified
connections (``gateway.admission``) is per process too: how many it holds
now, and how many it closed.
``hero_recommended_actors`` repeats the latest pipeline report's Erlang C advice
per script type, so an autoscaler (deploy/keda/) can follow it directly.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import INF, floatToGoString

from gateway.admission import Unidentified
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


class _Admission:
    """The budget of unidentified connections, read as it stands at scrape time."""

    def __init__(self, budget: Unidentified) -> None:
        self._budget = budget

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily(
            "hero_gateway_unidentified_connections",
            "Connections of this process unidentified for over a second now "
            "(request headers incomplete, or a WebSocket not logged in)",
            value=self._budget.stale,
        )
        yield CounterMetricFamily(
            "hero_gateway_unidentified_closed",
            "Connections this process closed for staying unidentified past the budget",
            value=self._budget.refused,
        )


class _Latency:
    """One (method, outcome)'s observations: a count per bucket, and their sum."""

    __slots__ = ("counts", "created", "sum")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets
        self.sum = 0.0
        self.created = time.time()


class _RpcLatencies:
    """``hero_rpc_duration_seconds``: a histogram per (method, outcome).

    Observed on every served call (two per job in batches), so an observation
    is a bisect and two additions, without a lock: prometheus_client's
    ``Histogram`` takes a mutex for its sum and another for the bucket
    (``observe_call`` 0.96 µs with it, 0.28 now; docs/performance.md, gateway
    step 8). Nothing needs the lock: the gateway
    observes and renders ``/metrics`` on its one event-loop thread. The
    exposition is ``Histogram``'s: cumulative ``_bucket`` samples, ``_count``,
    ``_sum`` and ``_created``, per child, through ``HistogramMetricFamily``
    (tests/test_metrics.py holds the two side by side)."""

    name = "hero_rpc_duration_seconds"
    documentation = "JSON-RPC call latency"
    bounds = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, INF)
    #: Each bound as its ``le`` label ("0.0005", "1.0", "+Inf"), as ``Histogram`` spells it.
    les = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]

    def __init__(self) -> None:
        self._children: dict[tuple[str, int | None], _Latency] = {}

    def observe(self, method: str, seconds: float, error_code: int | None) -> None:
        child = self._children.get((method, error_code))
        if child is None:
            child = self._children[method, error_code] = _Latency(len(self.bounds))
        child.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        child.sum += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=("method", "outcome"))
        for (method, code), child in self._children.items():
            outcome = "ok" if code is None else str(code)
            cumulative, buckets = 0, []
            for le, n in zip(self.les, child.counts, strict=True):
                cumulative += n
                buckets.append((le, float(cumulative)))
            family.add_metric((method, outcome), buckets, child.sum)
            labels = {"method": method, "outcome": outcome}
            family.add_sample(f"{self.name}_created", labels, child.created)
        yield family


class Metrics:
    content_type = CONTENT_TYPE

    def __init__(self, supervisor: Supervisor, unidentified: Unidentified | None = None) -> None:
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
        self._rpc = _RpcLatencies()
        r.register(self._rpc)
        if unidentified is not None:
            r.register(_Admission(unidentified))

    def observe_call(self, method: str, seconds: float, error_code: int | None) -> None:
        """Every served call's latency (the ``Observer`` of gateway/rpc/dispatch.py)."""
        self._rpc.observe(method, seconds, error_code)

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
