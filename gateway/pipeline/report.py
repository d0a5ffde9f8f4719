"""The pipeline report: what ``report.json`` holds and ``stats.report`` serves.

Built from the collected ``PipelineResult`` with no Spark in sight, so the
shape and the scaling advice are testable on their own.

Scaling advice per script type (and per group): arrival rate
``λ = (arrivals + retries) / window seconds`` (every attempt needs an actor),
mean service time ``E[S]`` = mean measured run time, then the Erlang C
recommendation (``erlang.recommend``): the smallest actor count whose M/M/c
``slo_quantile`` wait is within ``slo_wait``, with the offered load ``a = λ·E[S]``
and the utilisation ``a / c`` beside it. ``peak`` repeats it at the busiest
complete time bucket's arrival rate.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from gateway.errors import BackendUnavailable
from gateway.pipeline import charts, erlang
from gateway.pipeline.model import COUNTED, QUANTILES, PipelineResult
from gateway.supervisor import keys

SCHEMA = "hero-gateway/pipeline-report/1"

NOTES = {
    "percentiles": (
        "percentile_approx; rank error at most 1/accuracy of the sample count "
        "(accuracy 10000: the reported p95 is between the exact p94.99 and p95.01)"
    ),
    "wait": "queue wait: dispatched -> started, per attempt",
    "run": "run time: started -> end of the attempt (finished, error, timeout or stopped)",
    "arrival_rate": "(arrivals + retries) / window seconds",
    "utilisation": "busy seconds / window seconds per actor; per type over the actors seen",
    "recommendation": (
        "Erlang C (M/M/c): smallest c > offered load with P(wait > slo_wait) <= 1 - slo_quantile"
    ),
}


def iso(ms: int | float | None) -> str | None:
    if ms is None:
        return None
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _num(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return round(number, 6) if math.isfinite(number) else None


def _durations(row: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"count": int(row[f"{name}_count"] or 0)}
    for q in QUANTILES:
        key = f"p{round(q * 100)}"
        out[key] = _num(row.get(f"{name}_{key}"))
    out["mean"] = _num(row.get(f"{name}_mean"))
    out["max"] = _num(row.get(f"{name}_max"))
    return out


def _entry(row: dict[str, Any], with_bucket: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if row["level"] != "all":
        entry["script_type"] = row["script_type"]
    if row["level"] in ("group", "bucket"):
        entry["group"] = row["group"]
    if with_bucket:
        entry["bucket_start"] = iso(row["bucket_t"])
    for _, column in COUNTED:
        entry[column] = int(row[column] or 0)
    entry["wait"] = _durations(row, "wait")
    entry["run"] = _durations(row, "run")
    return entry


def advise(
    arrivals: int,
    run_mean: float | None,
    seconds: float,
    slo_wait: float,
    quantile: float,
) -> dict[str, Any]:
    """The Erlang C recommendation for ``arrivals`` attempts over ``seconds``."""
    if not run_mean or run_mean <= 0:
        return {"actors": None, "reason": "no completed attempt to measure the service time"}
    if seconds <= 0:
        return {"actors": None, "reason": "the window is too short to measure an arrival rate"}
    rec = erlang.recommend(arrivals / seconds, run_mean, slo_wait, quantile)
    return {key: _num(v) if isinstance(v, float) else v for key, v in rec.as_dict().items()}


def build(result: PipelineResult) -> dict[str, Any]:
    """The report as a JSON-ready dict."""
    p = result.params
    wall = (result.window_end_ms - result.window_start_ms) / 1000.0
    by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in result.stats:
        by_level[row["level"]].append(row)
    buckets = [
        _entry(row, with_bucket=True)
        for row in sorted(
            by_level["bucket"],
            key=lambda r: (r["bucket_t"], r["script_type"], r["group"]),
        )
    ]
    totals = _entry(by_level["all"][0]) if by_level["all"] else None
    return {
        "schema": SCHEMA,
        "generated_at": iso(time.time() * 1000),
        "seconds": _num(result.seconds),
        "params": {
            "since": iso(p.since_ms),
            "slo_wait": p.slo_wait,
            "slo_quantile": p.slo_quantile,
            "bucket_seconds": p.bucket_seconds,
            "stuck_after": p.stuck_after,
            "percentile_accuracy": p.accuracy,
        },
        "window": {
            "start": iso(result.window_start_ms),
            "end": iso(result.window_end_ms),
            "seconds": _num(wall),
        },
        "events": {
            "read": result.read,
            "unique": result.unique,
            "invalid": result.invalid,
            "duplicates": result.read - result.invalid - result.unique,
        },
        "jobs": result.jobs,
        "totals": totals,
        **_capacities(result, by_level, wall),
        "buckets": buckets,
        "actors": _actors(result.actors),
        "stuck": {
            "after_seconds": p.stuck_after,
            "as_of": iso(result.as_of_ms),
            "count": result.stuck_count,
            "jobs": _stuck_jobs(result.stuck),
        },
        # Relative to the folder of report.json (no server paths in what clients see).
        "tables": {name: Path(path).name for name, path in result.tables.items()},
        "notes": NOTES,
    }


def _capacities(
    result: PipelineResult, by_level: dict[str, list[dict[str, Any]]], wall: float
) -> dict[str, list[dict[str, Any]]]:
    """The ``script_types`` and ``groups`` entries: their statistics with the
    actors seen, utilisation, arrival rate and scaling advice (per type also
    at its peak rate)."""
    p = result.params
    actors_by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    actors_by_group: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for a in result.actors:
        actors_by_type[a["script_type"]].append(a)
        actors_by_group[(a["script_type"], a["group"])].append(a)
    peak = _peak_rates(result, by_level["bucket"])

    script_types = []
    for row in sorted(by_level["script_type"], key=lambda r: r["script_type"]):
        entry = _entry(row)
        _capacity(entry, actors_by_type.get(row["script_type"], []), wall, result)
        rate = peak.get(row["script_type"])
        if rate is not None:
            entry["peak"] = {
                "arrival_rate": _num(rate),
                "recommendation": advise(
                    round(rate * p.bucket_seconds),
                    entry["run"]["mean"],
                    p.bucket_seconds,
                    p.slo_wait,
                    p.slo_quantile,
                ),
            }
        script_types.append(entry)

    groups = []
    for row in sorted(by_level["group"], key=lambda r: (r["script_type"], r["group"])):
        entry = _entry(row)
        _capacity(entry, actors_by_group.get((row["script_type"], row["group"]), []), wall, result)
        groups.append(entry)
    return {"script_types": script_types, "groups": groups}


def _peak_rates(result: PipelineResult, buckets: list[dict[str, Any]]) -> dict[str, float]:
    """Each script type's busiest attempt arrival rate over its complete buckets."""
    p = result.params
    bucket_ms = p.bucket_seconds * 1000
    peak: dict[str, float] = {}
    per_bucket: dict[tuple[str, int], int] = defaultdict(int)
    for row in buckets:
        start = int(row["bucket_t"])
        if start >= result.window_start_ms and start + bucket_ms <= result.window_end_ms:
            per_bucket[(row["script_type"], start)] += int(row["arrivals"]) + int(row["retries"])
    for (script_type, _), count in per_bucket.items():
        peak[script_type] = max(peak.get(script_type, 0.0), count / p.bucket_seconds)
    return peak


def _capacity(
    entry: dict[str, Any], seen: list[dict[str, Any]], wall: float, result: PipelineResult
) -> None:
    """Add the actors ``seen``, their utilisation, the arrival rate and the advice to ``entry``."""
    p = result.params
    busy = sum(float(a["busy_s"] or 0) for a in seen)
    entry["actors_seen"] = len(seen)
    entry["busy_seconds"] = _num(busy)
    entry["utilisation"] = _num(busy / (len(seen) * wall)) if seen and wall > 0 else None
    demand = entry["arrivals"] + entry["retries"]
    entry["arrival_rate"] = _num(demand / wall) if wall > 0 else None
    entry["recommendation"] = advise(
        demand,
        entry["run"]["mean"],
        wall,
        p.slo_wait,
        p.slo_quantile,
    )


def _actors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "script_type": a["script_type"],
            "group": a["group"],
            "actor": a["actor"],
            "attempts": int(a["attempts"]),
            "running": int(a["running"]),
            "busy_seconds": _num(a["busy_s"]),
            "utilisation": _num(a["utilisation"]),
            "first_seen": iso(a["first_t"]),
            "last_seen": iso(a["last_t"]),
        }
        for a in sorted(rows, key=lambda a: (a["script_type"], a["group"], a["actor"]))
    ]


def _stuck_jobs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "job_id": s["job_id"],
            "script_type": s["script_type"],
            "group": s["group"],
            "actor": s["actor"],
            "attempts": int(s["attempts"]),
            "started_at": iso(s["last_started_t"]),
            "running_seconds": _num(s["running_s"]),
        }
        for s in rows
    ]


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False, allow_nan=False) + "\n"


def write(report: dict[str, Any], out: Path) -> Path:
    """``out/report.json``, replaced atomically."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / "report.json"
    tmp = out / f".report.json.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as sink:
        sink.write(dumps(report))
        sink.flush()
        os.fsync(sink.fileno())
    os.replace(tmp, target)
    return target


def published(report: dict[str, Any]) -> dict[str, Any]:
    """What ``stats.report`` serves: the report and its charts (``charts.figures``),
    so the gateway's page draws the pictures ``charts.html`` shows."""
    return {**report, "charts": charts.figures(report)}


def publish(report: dict[str, Any], redis_url: str) -> None:
    """Store the report where the gateway's ``stats.report`` reads it."""
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=5)
    try:
        client.set(keys.STATS_REPORT, json.dumps(published(report), allow_nan=False))
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BackendUnavailable("Redis is unavailable; the report was not published") from exc
    finally:
        client.close()
