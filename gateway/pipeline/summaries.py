"""The Spark job's summary tables, built from its per-attempt and per-job records.

``stats``   counts and wait / run percentiles by (script_type, group, bucket) with
            ``rollup``: ``level`` is ``bucket``, ``group``, ``script_type`` or ``all``.
``actors``  busy time per actor (attempt run times; a running attempt counts
            up to the window end) and utilisation = busy / window length.
``stuck``   jobs whose last event is ``started`` longer than ``stuck_after`` ago.

The records themselves (``attempts``, ``jobs``) come from ``analytics``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from gateway.pipeline.columns import non_negative
from gateway.pipeline.model import COUNTED, LEVELS, QUANTILES


def _bucket(t: Any, bucket_ms: int) -> Any:
    return (F.floor(t / bucket_ms) * bucket_ms).cast("long")


def stats(ev: DataFrame, att: DataFrame, bucket_ms: int, accuracy: int) -> DataFrame:
    """Counts and duration statistics per (script_type, group, bucket) and rolled up."""
    null_double = F.lit(None).cast("double")
    events = ev.select(
        "script_type",
        "group",
        _bucket(F.col("t"), bucket_ms).alias("bucket_t"),
        "event",
        null_double.alias("wait_s"),
        null_double.alias("run_s"),
    )
    durations = att.select(
        "script_type",
        "group",
        _bucket(F.col("started_t"), bucket_ms).alias("bucket_t"),
        F.lit(None).cast("string").alias("event"),
        "wait_s",
        "run_s",
    )
    event = F.col("event")
    measures: list[Any] = [
        F.count(F.when(event == name, 1)).alias(column) for name, column in COUNTED
    ]
    for name in ("wait", "run"):
        value = F.col(f"{name}_s")
        measures += [
            F.count(value).alias(f"{name}_count"),
            F.avg(value).alias(f"{name}_mean"),
            F.max(value).alias(f"{name}_max"),
            F.percentile_approx(value, list(QUANTILES), accuracy).alias(f"{name}_q"),
        ]
    rolled = (
        events.unionByName(durations)
        .rollup("script_type", "group", "bucket_t")
        .agg(
            F.grouping_id().alias("gid"),
            *measures,
        )
    )
    level = F.lit(None).cast("string")
    for gid, name in LEVELS.items():
        level = F.when(F.col("gid") == gid, F.lit(name)).otherwise(level)
    quantile_columns = [
        F.col(f"{name}_q").getItem(i).alias(f"{name}_p{round(q * 100)}")
        for name in ("wait", "run")
        for i, q in enumerate(QUANTILES)
    ]
    return rolled.select(
        level.alias("level"),
        "script_type",
        "group",
        "bucket_t",
        F.timestamp_millis(F.col("bucket_t")).alias("bucket_start"),
        *(column for _, column in COUNTED),
        *(F.col(f"{name}_{m}") for name in ("wait", "run") for m in ("count", "mean", "max")),
        *quantile_columns,
    )


def actors(att: DataFrame, window_end_ms: int, wall_seconds: float) -> DataFrame:
    """Busy time and utilisation per (script_type, group, actor)."""
    end = F.coalesce("ended_t", F.when(F.col("open"), F.lit(window_end_ms)))
    busy = non_negative(end - F.col("started_t")) / 1000.0
    out = (
        att.where(F.col("actor").isNotNull())
        .groupBy("script_type", "group", "actor")
        .agg(
            F.sum(busy).alias("busy_s"),
            F.count("*").alias("attempts"),
            F.count("ended_t").alias("ended"),
            F.count(F.when(F.col("open"), 1)).alias("running"),
            F.min("started_t").alias("first_t"),
            F.max(F.coalesce("ended_t", "started_t")).alias("last_t"),
        )
    )
    utilisation = (
        F.col("busy_s") / F.lit(wall_seconds) if wall_seconds > 0 else F.lit(None).cast("double")
    )
    return out.withColumn("utilisation", utilisation)


def stuck(job_rows: DataFrame, as_of_ms: int, stuck_after: float) -> DataFrame:
    """Jobs still ``started`` (no end in the archive) for longer than ``stuck_after`` s."""
    running_s = (F.lit(as_of_ms) - F.col("last_started_t")) / 1000.0
    return (
        job_rows.where(F.col("outcome") == "running")
        .withColumn("running_s", running_s)
        .where(F.col("running_s") > stuck_after)
        .select(
            "job_id",
            "script_type",
            "group",
            "actor",
            "attempts",
            F.timestamp_millis(F.col("last_started_t")).alias("started_at"),
            "last_started_t",
            "running_s",
        )
    )
