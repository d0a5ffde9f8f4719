"""Synthetic job events from a simulated queue with known distributions.

Each script type is an FCFS queue served by ``actors`` identical actors,
simulated event by event (a discrete-event simulation with a heap of arrival
and completion events), so the waits it records are real queue waits:

* arrivals: a Poisson process of rate ``rate`` (exponential gaps, mean 1/λ);
* service: exponential (``exp``, mean ``service_mean``: M/M/c) or constant
  (``const``: M/D/c);
* each attempt fails with probability ``error_rate``; a failed attempt is
  retried (back of the queue) until ``max_attempts`` attempts, then the job
  goes to the DLQ.

Events follow the supervisor's protocol: ``created``, ``dispatched`` (attempt
0) at arrival, ``started`` (attempt 1, the actor), ``finished`` or ``error``;
after an error ``retrying`` + ``dispatched`` or ``dlq``. ``ts`` is the
simulated time in ms from ``start_ms``; event ids are ``<ts>-<seq>`` in
simulated order, so written files look exactly like archived ones.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from gateway.config import DEFAULTS
from gateway.config.pipeline import DISTRIBUTIONS, Distribution
from gateway.model import Event, StreamId
from gateway.pipeline.events import EventColumns
from gateway.pipeline.store import write_events
from gateway.supervisor import keys


@dataclass(frozen=True)
class SynthSpec:
    jobs: int
    rate: float
    service_mean: float
    actors: int
    # the defaults are those of ``pipeline synth`` (gateway/config/pipeline.py)
    distribution: Distribution = DEFAULTS.synth_distribution
    script_types: tuple[str, ...] = DEFAULTS.synth_script_types
    group: str = DEFAULTS.synth_group
    error_rate: float = DEFAULTS.synth_error_rate
    max_attempts: int = DEFAULTS.synth_max_attempts
    seed: int = DEFAULTS.synth_seed
    start_ms: int = 1_700_000_000_000

    def __post_init__(self) -> None:
        problems = []
        if self.jobs < 0:
            problems.append("jobs must be >= 0")
        if not self.rate > 0 or math.isinf(self.rate):
            problems.append("rate must be > 0")
        if not self.service_mean > 0 or math.isinf(self.service_mean):
            problems.append("service mean must be > 0")
        if self.actors < 1:
            problems.append("actors must be >= 1")
        if self.distribution not in DISTRIBUTIONS:
            problems.append(f"distribution must be one of {', '.join(DISTRIBUTIONS)}")
        if not self.script_types or not all(self.script_types):
            problems.append("at least one non-empty script type is needed")
        if not 0 <= self.error_rate < 1:
            problems.append("error rate must be in [0, 1)")
        if self.max_attempts < 1:
            problems.append("max attempts must be >= 1")
        if self.start_ms < 0:
            problems.append("start must not be before 1970")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def offered_load(self) -> float:
        return self.rate * self.service_mean


@dataclass
class SynthTotals:
    """What the simulation produced, for checking the pipeline's counts."""

    jobs: int = 0
    events: int = 0
    attempts: int = 0
    finished: int = 0
    errors: int = 0
    retries: int = 0
    dlq: int = 0
    #: Per-attempt queue waits and service times (s), in start order.
    waits: list[float] = field(default_factory=list, repr=False)
    services: list[float] = field(default_factory=list, repr=False)
    busy: dict[str, float] = field(default_factory=dict, repr=False)


#: One simulated event: (time s, type index, seq, job_id, event, script_type, actor, attempt, error)
SimEvent = tuple[float, int, int, str, str, str, str, int, str]


def _sampler(spec: SynthSpec, rng: random.Random) -> Callable[[], float]:
    if spec.distribution == "const":
        return lambda: spec.service_mean
    rate = 1.0 / spec.service_mean
    return lambda: rng.expovariate(rate)


def simulate_type(
    spec: SynthSpec,
    type_index: int,
    totals: SynthTotals,
) -> list[SimEvent]:
    """Simulate one script type's queue; events in simulated order."""
    return _TypeQueue(spec, type_index, totals).run()


class _TypeQueue:
    """One script type's queue in simulation: Poisson arrivals, ``spec.actors``
    actors serving first come first served, failed attempts retried at the back."""

    def __init__(self, spec: SynthSpec, type_index: int, totals: SynthTotals) -> None:
        self.spec, self.type_index, self.totals = spec, type_index, totals
        self.script_type = script_type = spec.script_types[type_index]
        self.rng = random.Random(f"{spec.seed}:{script_type}")
        self.service = _sampler(spec, self.rng)
        self.events: list[SimEvent] = []
        self.seq = 0
        self.free: deque[str] = deque(f"{script_type}-actor-{i}" for i in range(spec.actors))
        # (job, attempts so far, enqueued at)
        self.waiting: deque[tuple[str, int, float]] = deque()
        # heap of (time, kind, order, job, actor, attempt); kind 0 = completion, 1 = arrival,
        # so an actor freed at t serves a job arriving at the same t (no idle gap).
        self.heap: list[tuple[float, int, int, str, str, int]] = []
        self.order = 0
        self.arrived = 0
        self.t_arrival = 0.0

    def run(self) -> list[SimEvent]:
        self.next_arrival()
        while self.heap:
            t, kind, _, job, actor, attempt = heapq.heappop(self.heap)
            if kind == 1:
                self.arrive(t, job)
            else:
                self.complete(t, job, actor, attempt)
            while self.free and self.waiting:
                job_w, attempts, enqueued = self.waiting.popleft()
                self.start(t, job_w, attempts, enqueued, self.free.popleft())
        return self.events

    def emit(
        self, t: float, job: str, name: str, actor: str = "", attempt: int = 0, error: str = ""
    ) -> None:
        event = (t, self.type_index, self.seq, job, name, self.script_type, actor, attempt, error)
        self.events.append(event)
        self.seq += 1

    def next_arrival(self) -> None:
        if self.arrived < self.spec.jobs:
            self.t_arrival += self.rng.expovariate(self.spec.rate)
            job = f"s{self.spec.seed}-{self.script_type}-{self.arrived}"
            heapq.heappush(self.heap, (self.t_arrival, 1, self.order, job, "", 0))
            self.order += 1
            self.arrived += 1

    def arrive(self, t: float, job: str) -> None:
        self.totals.jobs += 1
        self.emit(t, job, "created")
        self.emit(t, job, "dispatched")
        self.waiting.append((job, 0, t))
        self.next_arrival()

    def start(self, t: float, job: str, attempt: int, enqueued: float, actor: str) -> None:
        self.emit(t, job, "started", actor, attempt + 1)
        duration = self.service()
        totals = self.totals
        totals.waits.append(t - enqueued)
        totals.services.append(duration)
        totals.busy[actor] = totals.busy.get(actor, 0.0) + duration
        totals.attempts += 1
        heapq.heappush(self.heap, (t + duration, 0, self.order, job, actor, attempt + 1))
        self.order += 1

    def complete(self, t: float, job: str, actor: str, attempt: int) -> None:
        """An attempt ends: finished, or failed and retried (or dead-lettered)."""
        spec, totals = self.spec, self.totals
        failed = spec.error_rate > 0 and self.rng.random() < spec.error_rate
        if not failed:
            self.emit(t, job, "finished", actor, attempt)
            totals.finished += 1
        else:
            self.emit(t, job, "error", actor, attempt, "synthetic failure")
            totals.errors += 1
            if attempt < spec.max_attempts:
                self.emit(t, job, "retrying", actor, attempt, "synthetic failure")
                self.emit(t, job, "dispatched", actor, attempt)
                totals.retries += 1
                self.waiting.append((job, attempt, t))
            else:
                self.emit(t, job, "dlq", actor, attempt, "synthetic failure")
                totals.dlq += 1
        self.free.append(actor)


#: The last millisecond an event's time may name: the end of the year 9999,
#: the last a timestamp of the archive (or a ``datetime``) holds. A stream id
#: holds more, but an id past it is no time anyone reads.
LAST_MS = 253_402_300_799_999


class OutOfTime(ValueError):
    """The simulated events would run past ``LAST_MS`` (a tiny rate, a huge
    service time): the spec cannot be written as events."""


def simulate(spec: SynthSpec) -> tuple[list[SimEvent], SynthTotals]:
    """Every script type's queue, merged into one stream in simulated order;
    OutOfTime when the run would end after ``LAST_MS``."""
    totals = SynthTotals()
    events: list[SimEvent] = []
    for i in range(len(spec.script_types)):
        events.extend(simulate_type(spec, i, totals))
    end = max((e[0] for e in events), default=0.0)
    if not spec.start_ms + end * 1000 <= LAST_MS:  # (not <=: an infinite end too)
        raise OutOfTime("the simulated events would run past the year 9999")
    events.sort(key=lambda e: (round(e[0] * 1000), e[1], e[2]))
    totals.events = len(events)
    return events, totals


def stream_fields(spec: SynthSpec, event: SimEvent) -> dict[str, str]:
    """A simulated event as the supervisor's stream entry fields."""
    t, _, _, job, name, script_type, actor, attempt, error = event
    return Event(
        id=StreamId(0),  # Redis assigns it (XADD *), or with_ids does
        job_id=job,
        event=name,
        status=name,
        script_type=script_type,
        group=spec.group or None,
        instance=None,
        actor=actor or None,
        caller_id="synth",
        attempt=attempt,
        ts=spec.start_ms + round(t * 1000),
        error=error or None,
    ).to_wire()


def with_ids(spec: SynthSpec, events: list[SimEvent]) -> Iterator[tuple[str, dict[str, str]]]:
    """Stream entries with ids ``<ts>-<seq>`` (seq counts up within one millisecond)."""
    last_ms, seq = -1, 0
    for event in events:
        fields = stream_fields(spec, event)
        ms = int(fields["ts"])
        seq = seq + 1 if ms == last_ms else 0
        last_ms = ms
        yield f"{ms}-{seq}", fields


def write_parquet(
    spec: SynthSpec,
    events: list[SimEvent],
    out: Path,
    rows_per_file: int = 200_000,
    progress: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write the events under ``out`` in the archive's layout."""
    written: list[Path] = []
    batch = EventColumns()
    for entry_id, fields in with_ids(spec, events):
        batch.append(entry_id, fields)
        if len(batch) >= rows_per_file:
            written.extend(write_events(out, batch, rows_per_file))
            if progress:
                progress(len(batch))
            batch = EventColumns()
    if len(batch):
        written.extend(write_events(out, batch, rows_per_file))
        if progress:
            progress(len(batch))
    return written


def xadd(
    spec: SynthSpec,
    events: list[SimEvent],
    client: redis.Redis,
    chunk: int = 5_000,
    progress: Callable[[int], None] | None = None,
) -> int:
    """XADD the events to the events stream in order (Redis assigns the ids)."""
    sent = 0
    pipe = client.pipeline(transaction=False)
    for event in events:
        pipe.xadd(keys.EVENTS, stream_fields(spec, event))
        sent += 1
        if sent % chunk == 0:
            pipe.execute()
            if progress:
                progress(chunk)
    rest = sent % chunk
    if rest:
        pipe.execute()
        if progress:
            progress(rest)
    return sent
