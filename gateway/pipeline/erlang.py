"""Erlang B and Erlang C: the M/M/c queue, in closed form.

Notation: ``arrival_rate`` λ (jobs/s), ``mean_service`` E[S] (s, so μ = 1/E[S]),
``c`` actors, offered load ``a = λ·E[S]`` (Erlangs), utilisation ``a / c``.

* Erlang B ``B(c, a)``: blocking probability of M/M/c/c, by the stable recursion
  ``B(0) = 1, B(k) = a·B(k-1) / (k + a·B(k-1))``.
* Erlang C ``C(c, a) = c·B / (c - a·(1 - B))``: probability an arrival waits (a < c).
* Waiting-time tail of FCFS M/M/c: ``P(W > t) = C(c, a) · exp(-(c·μ - λ)·t)``.

``recommend`` returns the smallest ``c > a`` with ``P(W > slo) ≤ 1 - quantile``,
i.e. the model's ``quantile``-wait is within the SLO.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


def _check_load(c: int, a: float) -> None:
    if c < 0:
        raise ValueError(f"actors must be >= 0, got {c}")
    if not a >= 0 or math.isinf(a):
        raise ValueError(f"offered load must be a finite number >= 0, got {a}")


def erlang_b(c: int, a: float) -> float:
    """Blocking probability of an M/M/c/c system with offered load ``a`` Erlangs."""
    _check_load(c, a)
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival has to wait in M/M/c; 1.0 when the queue is unstable."""
    _check_load(c, a)
    if a == 0:
        return 0.0
    if a >= c:
        return 1.0
    b = erlang_b(c, a)
    return c * b / (c - a * (1.0 - b))


def _rates(arrival_rate: float, mean_service: float) -> tuple[float, float]:
    if not arrival_rate >= 0 or math.isinf(arrival_rate):
        raise ValueError(f"arrival rate must be a finite number >= 0, got {arrival_rate}")
    if not mean_service > 0 or math.isinf(mean_service):
        raise ValueError(f"mean service time must be a finite number > 0, got {mean_service}")
    return arrival_rate, 1.0 / mean_service


def wait_probability(c: int, arrival_rate: float, mean_service: float, t: float) -> float:
    """``P(W > t)`` for FCFS M/M/c (1.0 when unstable)."""
    lam, mu = _rates(arrival_rate, mean_service)
    a = lam / mu
    if a >= c:
        return 1.0
    return erlang_c(c, a) * math.exp(-(c * mu - lam) * max(t, 0.0))


def wait_quantile(c: int, arrival_rate: float, mean_service: float, quantile: float) -> float:
    """The ``quantile`` of the waiting time (``inf`` when unstable, 0 when few arrivals wait)."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    lam, mu = _rates(arrival_rate, mean_service)
    a = lam / mu
    if a >= c:
        return math.inf
    tail = 1.0 - quantile
    p_wait = erlang_c(c, a)
    if p_wait <= tail:
        return 0.0
    return math.log(p_wait / tail) / (c * mu - lam)


def mean_wait(c: int, arrival_rate: float, mean_service: float) -> float:
    """``E[W] = C(c, a) / (c·μ - λ)`` (``inf`` when unstable)."""
    lam, mu = _rates(arrival_rate, mean_service)
    a = lam / mu
    if a >= c:
        return math.inf
    return erlang_c(c, a) / (c * mu - lam)


@dataclass(frozen=True)
class Recommendation:
    """The advice for one queue, with the model's figures at that actor count."""

    actors: int
    arrival_rate: float
    mean_service: float
    offered_load: float
    utilisation: float
    wait_probability: float
    slo_wait: float
    quantile: float
    slo_violation: float
    quantile_wait: float
    mean_wait: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def recommend(
    arrival_rate: float,
    mean_service: float,
    slo_wait: float,
    quantile: float = 0.95,
    max_actors: int = 1_000_000,
) -> Recommendation:
    """Smallest ``c`` with ``a < c`` and ``P(W > slo_wait) ≤ 1 - quantile``.

    With no arrivals the answer is one actor (``a = 0 < 1``, nobody waits).
    """
    lam, mu = _rates(arrival_rate, mean_service)
    if not slo_wait >= 0 or math.isinf(slo_wait):
        raise ValueError(f"slo wait must be a finite number >= 0, got {slo_wait}")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    a = lam / mu
    tail = 1.0 - quantile
    c = math.floor(a) + 1
    if c > max_actors:
        raise ValueError(f"offered load {a:.1f} needs more than {max_actors} actors")
    # Erlang B up to c, then one recursion step per extra actor.
    b = erlang_b(c, a)
    while True:
        p_wait = 0.0 if a == 0 else c * b / (c - a * (1.0 - b))
        violation = p_wait * math.exp(-(c * mu - lam) * slo_wait)
        if violation <= tail:
            break
        c += 1
        if c > max_actors:
            raise ValueError(f"no actor count up to {max_actors} meets the wait target")
        b = a * b / (c + a * b)
    return Recommendation(
        actors=c,
        arrival_rate=lam,
        mean_service=mean_service,
        offered_load=a,
        utilisation=a / c,
        wait_probability=p_wait,
        slo_wait=slo_wait,
        quantile=quantile,
        slo_violation=violation,
        quantile_wait=wait_quantile(c, lam, mean_service, quantile),
        mean_wait=mean_wait(c, lam, mean_service),
    )
