"""The Spark job: archived events → per-job records, queue statistics, utilisation.

Steps (each a DataFrame function, so tests can check them one by one):

``read_events``  the archive's Parquet files (``date=/hour=`` partitions), from ``since``.
``prepare``      drop duplicate event ids, drop rows without a job id, order key
                 ``o = (stream ms, seq)``, time ``t`` (epoch ms), and the job's
                 script type / group copied onto every one of its events.
``attempts``     one row per ``started`` event: the ``dispatched`` before it (queue
                 wait) and the attempt-ending event after it (run time), paired in
                 stream order and only within the same attempt.
``jobs``         one row per job: created / dispatched / started / finished times,
                 attempts, retries, outcome (last event), last actor, last error.
``stats``, ``actors``, ``stuck``: the summary tables, in ``summaries``.

Percentiles use ``percentile_approx`` with ``accuracy`` (default 10 000): the
returned value's rank is within ``n / accuracy`` of the exact rank, i.e. the
reported p95 lies between the exact p94.99 and p95.01.

Run time is started → the attempt's end (finished, error, timeout or stopped):
the time an actor is occupied, which is the service time the Erlang C model needs.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.model.job import REPORT_EVENTS
from gateway.pipeline import summaries
from gateway.pipeline.columns import non_negative
from gateway.pipeline.events import ATTEMPT_END_EVENTS, STRING_FIELDS
from gateway.pipeline.model import (
    TERMINAL_EVENTS,
    NoEvents,
    PipelineParams,
    PipelineResult,
    Progress,
)

#: The Parquet tables ``run`` writes, each in its own folder under ``params.out``.
TABLES = ("jobs", "attempts", "stats", "actors", "stuck")


EVENT_SCHEMA = T.StructType(
    [
        T.StructField("event_id", T.StringType()),
        *(T.StructField(name, T.StringType()) for name in STRING_FIELDS),
        T.StructField("attempt", T.IntegerType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("extra", T.StringType()),
    ]
)


def _blank_to_null(name: str) -> Any:
    column = F.col(name)
    return F.when(column != "", column).alias(name)


def read_events(spark: SparkSession, path: str, since_ms: int | None = None) -> DataFrame:
    """The archived events under ``path`` (with ``date``/``hour`` partition columns)."""
    df = spark.read.schema(EVENT_SCHEMA).parquet(path)
    if since_ms is not None:
        if "date" in df.columns:
            day = time.strftime("%Y-%m-%d", time.gmtime(since_ms / 1000))
            df = df.where(F.col("date") >= F.lit(day).cast("date"))
        df = df.where(
            F.coalesce(F.unix_millis("ts"), F.split("event_id", "-").getItem(0).cast("long"))
            >= since_ms
        )
    return df


def prepare(raw: DataFrame) -> DataFrame:
    """Unique, valid transitions with ``t`` (ms), order key ``o`` and job-level type
    and group (a running job's ``log`` and ``progress`` reports are left out).

    One shuffle and one sort: events are partitioned by job id (duplicates share
    it) and sorted by ``(job_id, o, event_id)``, so a duplicate sits right after
    its first copy and is dropped by comparing with the previous row. Persisted,
    that layout serves ``attempts`` (same window order) and ``jobs`` (grouped by
    job id) without another shuffle or sort.
    """
    parts = F.split(F.col("event_id"), "-")
    id_ms = parts.getItem(0).cast("long")
    t = F.coalesce(F.unix_millis("ts"), id_ms)
    ev = (
        raw.where(
            F.col("event_id").isNotNull()
            & (F.coalesce("job_id", F.lit("")) != "")
            & ~F.coalesce("event", F.lit("")).isin(*sorted(REPORT_EVENTS))
        )
        .select(
            "event_id",
            "job_id",
            _event().alias("event"),
            _blank_to_null("script_type").alias("script_type_"),
            _blank_to_null("group").alias("group_"),
            _blank_to_null("actor"),
            _blank_to_null("caller_id"),
            _blank_to_null("error"),
            "attempt",
            t.alias("t"),
            F.struct(
                F.coalesce(id_ms, t).alias("ms"),
                F.coalesce(parts.getItem(1).cast("long"), F.lit(0)).alias("seq"),
            ).alias("o"),
        )
        .repartition("job_id")
    )
    ordered = _ordered()
    whole_job = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    previous = F.lag("event_id").over(ordered)
    return (
        ev.withColumn("duplicate_", F.coalesce(previous == F.col("event_id"), F.lit(False)))
        .withColumn("script_type", F.coalesce(F.max("script_type_").over(whole_job), F.lit("")))
        .withColumn("group", F.coalesce(F.max("group_").over(whole_job), F.lit("")))
        .where(~F.col("duplicate_"))
        .drop("duplicate_", "script_type_", "group_")
    )


def _event() -> Any:
    """The event name; a stream-mode redelivery is one more start of the job."""
    name = F.coalesce("event", F.lit(""))
    return F.when(name == "redelivered", F.lit("started")).otherwise(name)


def _ordered() -> Any:
    """A job's events in stream order (the id breaks ties of malformed ids)."""
    return Window.partitionBy("job_id").orderBy("o", "event_id")


def attempts(ev: DataFrame) -> DataFrame:
    """One row per ``started`` event, with its queue wait and run time when known.

    ``open`` is true when nothing after the start ended it or started it again:
    the attempt is still running as far as the archive knows.
    """
    ordered = _ordered()
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    after = ordered.rowsBetween(1, Window.unboundedFollowing)
    event = F.col("event")
    x = ev.select(
        "job_id",
        "script_type",
        "group",
        "event",
        "actor",
        "attempt",
        "t",
        "o",
        F.last(F.when(event == "dispatched", F.struct("o", "t")), ignorenulls=True)
        .over(before)
        .alias("prev_dispatch"),
        F.last(F.when(event == "started", F.col("o")), ignorenulls=True)
        .over(before)
        .alias("prev_start"),
        F.first(
            F.when(event.isin(*ATTEMPT_END_EVENTS), F.struct("o", "t", "event", "actor")),
            ignorenulls=True,
        )
        .over(after)
        .alias("next_end"),
        F.first(F.when(event == "started", F.col("o")), ignorenulls=True)
        .over(after)
        .alias("next_start"),
    ).where(event == "started")
    has_wait = F.col("prev_dispatch").isNotNull() & (
        F.col("prev_start").isNull() | (F.col("prev_dispatch.o") > F.col("prev_start"))
    )
    has_end = F.col("next_end").isNotNull() & (
        F.col("next_start").isNull() | (F.col("next_end.o") < F.col("next_start"))
    )
    dispatched_t = F.when(has_wait, F.col("prev_dispatch.t"))
    ended_t = F.when(has_end, F.col("next_end.t"))
    return x.select(
        "job_id",
        "script_type",
        "group",
        F.coalesce("actor", F.when(has_end, F.col("next_end.actor"))).alias("actor"),
        "attempt",
        dispatched_t.alias("dispatched_t"),
        F.col("t").alias("started_t"),
        ended_t.alias("ended_t"),
        F.when(has_end, F.col("next_end.event")).alias("end_event"),
        (~has_end & F.col("next_start").isNull()).alias("open"),
        (non_negative(F.col("t") - dispatched_t) / 1000.0).alias("wait_s"),
        (non_negative(ended_t - F.col("t")) / 1000.0).alias("run_s"),
    )


def jobs(ev: DataFrame) -> DataFrame:
    """One row per job (times are epoch ms in ``*_t``, timestamps in ``*_at``)."""
    event = F.col("event")

    def first_at(name: str) -> Any:
        return F.min(F.when(event == name, F.col("t")))

    def last_known(name: str) -> Any:
        return F.max_by(name, F.when(F.col(name).isNotNull(), F.col("o")))

    agg = ev.groupBy("job_id").agg(
        F.max("script_type").alias("script_type"),
        F.max("group").alias("group"),
        F.max("caller_id").alias("caller_id"),
        first_at("created").alias("created_t"),
        first_at("dispatched").alias("dispatched_t"),
        first_at("started").alias("started_t"),
        F.max(F.when(event == "started", F.col("t"))).alias("last_started_t"),
        F.count(F.when(event == "started", 1)).alias("attempts"),
        F.count(F.when(event == "retrying", 1)).alias("retries"),
        F.max_by("event", "o").alias("last_event"),
        F.max_by("t", "o").alias("last_t"),
        last_known("actor").alias("actor"),
        last_known("error").alias("error"),
        F.count("*").alias("events"),
    )
    last = F.col("last_event")
    outcome = (
        F.when(last.isin(*TERMINAL_EVENTS), last)
        .when(last == "started", F.lit("running"))
        .otherwise(F.lit("queued"))
    )
    finished_t = F.when(last.isin(*TERMINAL_EVENTS), F.col("last_t"))
    return agg.select(
        "job_id",
        "script_type",
        "group",
        "caller_id",
        outcome.alias("outcome"),
        "attempts",
        "retries",
        "actor",
        "error",
        "events",
        "created_t",
        "dispatched_t",
        "started_t",
        "last_started_t",
        finished_t.alias("finished_t"),
        *(
            F.timestamp_millis(F.col(src)).alias(dst)
            for src, dst in (
                ("created_t", "created_at"),
                ("dispatched_t", "dispatched_at"),
                ("started_t", "started_at"),
            )
        ),
        F.timestamp_millis(finished_t).alias("finished_at"),
    )


def run(
    spark: SparkSession,
    params: PipelineParams,
    progress: Progress | None = None,
) -> PipelineResult:
    """Run the whole job; writes the Parquet tables under ``params.out``."""
    started = time.monotonic()
    say = progress or (lambda _: None)

    say("reading events")
    raw = read_events(spark, params.events, params.since_ms)
    read, invalid = _counted(raw, params)
    say(f"de-duplicating {read:,} events")
    ev = prepare(raw).persist()
    valid, window_start, window_end = _window(ev, params)
    wall_seconds = (window_end - window_start) / 1000.0
    as_of = params.as_of_ms if params.as_of_ms is not None else int(time.time() * 1000)

    say(f"pairing attempts and building records for {valid:,} events")
    att = attempts(ev).persist()
    job_rows = jobs(ev).persist()
    tables = {name: str(params.out / name) for name in TABLES}
    job_rows.write.mode("overwrite").parquet(tables["jobs"])
    job_count = job_rows.count()
    att.write.mode("overwrite").parquet(tables["attempts"])

    say("computing statistics")
    stat_df = summaries.stats(ev, att, params.bucket_seconds * 1000, params.accuracy).persist()
    stat_rows = _saved(stat_df, tables["stats"])

    say("actor utilisation")
    actor_df = summaries.actors(att, window_end, wall_seconds).persist()
    actor_rows = _saved(actor_df, tables["actors"])

    say("stuck jobs")
    stuck_df = summaries.stuck(job_rows, as_of, params.stuck_after).persist()
    stuck_df.coalesce(1).write.mode("overwrite").parquet(tables["stuck"])
    stuck_count = stuck_df.count()
    stuck_rows = [
        row.asDict(recursive=True)
        for row in stuck_df.orderBy(F.col("running_s").desc()).limit(params.stuck_listed).collect()
    ]
    for df in (stuck_df, actor_df, stat_df, job_rows, att, ev):
        df.unpersist()
    return PipelineResult(
        params=params,
        read=read,
        invalid=invalid,
        unique=valid,
        window_start_ms=window_start,
        window_end_ms=window_end,
        as_of_ms=as_of,
        jobs=job_count,
        stats=stat_rows,
        actors=actor_rows,
        stuck_count=stuck_count,
        stuck=stuck_rows,
        tables=tables,
        seconds=time.monotonic() - started,
    )


def _counted(raw: DataFrame, params: PipelineParams) -> tuple[int, int]:
    """Rows read, and rows without an event or job id; ``NoEvents`` when none."""
    bad = F.col("event_id").isNull() | (F.coalesce("job_id", F.lit("")) == "")
    counts = raw.agg(F.count("*"), F.count(F.when(bad, 1))).collect()[0]
    read, invalid = int(counts[0]), int(counts[1])
    if read == 0:
        raise NoEvents("No events in the archive" + (" since --since" if params.since_ms else ""))
    return read, invalid


def _window(ev: DataFrame, params: PipelineParams) -> tuple[int, int, int]:
    """Unique valid events and the window they span (epoch ms, from ``since``
    when given); ``NoEvents`` when no row has a job id."""
    summary = ev.agg(F.count("*"), F.min("t"), F.max("t")).collect()[0]
    valid, first_t, last_t = int(summary[0]), summary[1], summary[2]
    if valid == 0:
        raise NoEvents("No usable events (no row has a job id)")
    window_start = params.since_ms if params.since_ms is not None else int(first_t)
    return valid, window_start, max(int(last_t), window_start)


def _saved(df: DataFrame, path: str) -> list[dict[str, Any]]:
    """Write a small summary table as one file; its rows, for the report."""
    df.coalesce(1).write.mode("overwrite").parquet(path)
    return [row.asDict(recursive=True) for row in df.collect()]
