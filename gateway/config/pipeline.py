"""The settings of ``archive``, ``pipeline run`` and ``pipeline synth``.

Their variables are ``HERO_ARCHIVE_*``, ``HERO_PIPELINE_*`` (``pipeline run``)
and ``HERO_SYNTH_*``; their flags keep the short names the commands always had
(``--out`` on each). A folder left unset is the named folder in the state
folder, decided when the command runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from gateway.config.setting import (
    fraction,
    non_negative,
    non_negative_int,
    one_of,
    parse_bool,
    parse_int,
    parse_names,
    parse_text,
    positive,
    positive_int,
    setting,
)

#: How ``--since``, ``--as-of`` and ``--start`` are written (gateway/pipeline/timeparse.py).
TIME_HELP = (
    "ISO 8601 (2025-01-31, 2025-01-31T12:00:00Z; no zone means UTC), "
    "epoch seconds or milliseconds, or an age before now (90s, 30m, 6h, 7d, 2w)"
)

#: The service time distributions ``pipeline synth`` simulates.
Distribution = Literal["exp", "const"]
DISTRIBUTIONS: tuple[Distribution, ...] = ("exp", "const")


def parse_distribution(text: str) -> Distribution:
    return cast(Distribution, one_of("a distribution", *DISTRIBUTIONS)(text))


_ARCHIVE = ("archive",)
_RUN = ("pipeline run",)
_SYNTH = ("pipeline synth",)


@dataclass(frozen=True)
class ArchiveSettings:
    """``hero-gateway archive``: the events stream into Parquet files."""

    archive_out: str | None = setting(
        None,
        str,
        "Archive folder (unset: `events` in the state folder).",
        _ARCHIVE,
        flag="--out",
        metavar="DIR",
    )
    archive_group: str = setting(
        "archive", parse_text, "Consumer group name.", _ARCHIVE, flag="--group"
    )
    archive_consumer: str | None = setting(
        None,
        parse_text,
        "Consumer name (unset: the host name; keep it stable so a restart finds "
        "its pending entries).",
        _ARCHIVE,
        flag="--consumer",
        metavar="NAME",
    )
    archive_batch: int = setting(
        10_000, positive_int, "Most events per flush.", _ARCHIVE, flag="--batch", metavar="N"
    )
    archive_flush_interval: float = setting(
        10.0,
        non_negative,
        "Flush a partial batch after this many seconds.",
        _ARCHIVE,
        flag="--flush-interval",
        metavar="S",
    )
    archive_claim_idle: float = setting(
        300.0,
        non_negative,
        "Take over other consumers' entries pending this many seconds (0: never).",
        _ARCHIVE,
        flag="--claim-idle",
        metavar="S",
    )
    archive_once: bool = setting(
        False,
        parse_bool,
        "Archive what the stream holds now, then exit.",
        _ARCHIVE,
        flag="--once",
    )
    archive_max_seconds: float | None = setting(
        None,
        positive,
        "Stop after this many seconds (unset: run until stopped).",
        _ARCHIVE,
        flag="--max-seconds",
        metavar="S",
    )


@dataclass(frozen=True)
class RunSettings:
    """``hero-gateway pipeline run``: the Spark analytics of the archive."""

    pipeline_events: str | None = setting(
        None,
        str,
        "Archive folder or any Spark-readable URL (unset: `events` in the state folder).",
        _RUN,
        flag="--events",
        metavar="DIR",
    )
    pipeline_out: str | None = setting(
        None,
        str,
        "Where the tables, report.json and charts.html go (unset: `pipeline-out` "
        "in the state folder).",
        _RUN,
        flag="--out",
        metavar="DIR",
    )
    pipeline_master: str = setting(
        "local[*]",
        str,
        "Spark master: local[*], local[N], spark://host:7077, yarn, k8s://…",
        _RUN,
        flag="--master",
        metavar="URL",
    )
    pipeline_since: str | None = setting(
        None,
        str,
        f"Only events from this time: {TIME_HELP}.",
        _RUN,
        flag="--since",
        metavar="TIME",
    )
    pipeline_slo_wait: float = setting(
        60.0,
        non_negative,
        "Queue wait target in seconds for the actor advice.",
        _RUN,
        flag="--slo-wait",
        metavar="SECONDS",
    )
    pipeline_slo_quantile: float = setting(
        0.95,
        fraction,
        "Share of jobs that must meet --slo-wait.",
        _RUN,
        flag="--slo-quantile",
        metavar="Q",
    )
    pipeline_bucket: int = setting(
        3600,
        positive_int,
        "Time bucket length in seconds.",
        _RUN,
        flag="--bucket",
        metavar="SECONDS",
    )
    pipeline_stuck_after: float = setting(
        3600.0,
        non_negative,
        "Seconds a started job may go without an end before it counts as stuck.",
        _RUN,
        flag="--stuck-after",
        metavar="SECONDS",
    )
    pipeline_as_of: str | None = setting(
        None,
        str,
        "'now' for stuck jobs (unset: the current time).",
        _RUN,
        flag="--as-of",
        metavar="TIME",
    )
    pipeline_accuracy: int = setting(
        10_000,
        positive_int,
        "percentile_approx accuracy (rank error <= 1/N).",
        _RUN,
        flag="--accuracy",
        metavar="N",
    )
    pipeline_shuffle_partitions: int | None = setting(
        None,
        positive_int,
        "spark.sql.shuffle.partitions (unset: 8 on local masters).",
        _RUN,
        flag="--shuffle-partitions",
        metavar="N",
    )
    pipeline_driver_memory: str | None = setting(
        None,
        str,
        "spark.driver.memory, e.g. 4g (unset: Spark's).",
        _RUN,
        flag="--driver-memory",
        metavar="SIZE",
    )
    pipeline_quiet: bool = setting(
        False, parse_bool, "No progress and no summary.", _RUN, flag="--quiet"
    )


@dataclass(frozen=True)
class SynthSettings:
    """``hero-gateway pipeline synth``: a simulated M/M/c (or M/D/c) queue's events."""

    synth_out: str | None = setting(
        None,
        str,
        "Archive folder to write (unset: `events` in the state folder; give each "
        "run into one folder its own --start).",
        _SYNTH,
        flag="--out",
        metavar="DIR",
    )
    synth_jobs: int = setting(
        10_000, non_negative_int, "Jobs per script type.", _SYNTH, flag="--jobs", metavar="N"
    )
    synth_rate: float = setting(
        1.0,
        positive,
        "Arrivals per second per script type (Poisson).",
        _SYNTH,
        flag="--rate",
        metavar="LAMBDA",
    )
    synth_service_mean: float = setting(
        1.0,
        positive,
        "Mean service time in seconds.",
        _SYNTH,
        flag="--service-mean",
        metavar="S",
    )
    # (RUF009 cannot tell that a Literal is immutable; ``setting`` returns a field)
    synth_distribution: Distribution = setting(  # noqa: RUF009
        "exp",
        parse_distribution,
        "Service time distribution: exp or const.",
        _SYNTH,
        flag="--distribution",
    )
    synth_actors: int = setting(
        2, positive_int, "Actors per script type.", _SYNTH, flag="--actors", metavar="C"
    )
    synth_script_types: tuple[str, ...] = setting(
        ("python",),
        parse_names,
        "Script types, each its own queue and actors.",
        _SYNTH,
        flag="--script-types",
        metavar="A,B",
    )
    synth_group: str = setting("", str, "Group of every job.", _SYNTH, flag="--group")
    synth_error_rate: float = setting(
        0.0,
        non_negative,
        "Probability an attempt fails.",
        _SYNTH,
        flag="--error-rate",
        metavar="P",
    )
    synth_max_attempts: int = setting(
        1, positive_int, "Attempts before the DLQ.", _SYNTH, flag="--max-attempts", metavar="N"
    )
    synth_seed: int = setting(0, parse_int, "Random seed.", _SYNTH, flag="--seed")
    synth_start: str | None = setting(
        None,
        str,
        f"Simulated start time (unset: now minus jobs/rate): {TIME_HELP}.",
        _SYNTH,
        flag="--start",
        metavar="TIME",
    )
    synth_rows_per_file: int = setting(
        200_000,
        positive_int,
        "Most events per Parquet file.",
        _SYNTH,
        flag="--rows-per-file",
        metavar="N",
    )
    synth_to_redis: bool = setting(
        False,
        parse_bool,
        "XADD to the events stream instead of writing files.",
        _SYNTH,
        flag="--to-redis",
    )
