"""The pipeline's parameters and collected result (no Spark needed to use them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config import DEFAULTS
from gateway.errors import InvalidParams

#: Events counted in the statistics, and the column each count goes to.
COUNTED = (
    ("created", "arrivals"),
    ("dispatched", "dispatched"),
    ("started", "started"),
    ("finished", "completions"),
    ("error", "errors"),
    ("timeout", "timeouts"),
    ("stopped", "stopped"),
    ("retrying", "retries"),
    ("dlq", "dlq"),
)
#: Last events that end a job for good.
TERMINAL_EVENTS = ("finished", "error", "timeout", "stopped", "dlq")
QUANTILES = (0.5, 0.95, 0.99)
LEVELS = {0: "bucket", 1: "group", 3: "script_type", 7: "all"}

Progress = Callable[[str], None]


class NoEvents(InvalidParams):
    default_message = "No events to analyse"


@dataclass(frozen=True)
class PipelineParams:
    events: str
    out: Path
    since_ms: int | None = None
    # the defaults are those of ``pipeline run`` (gateway/config/pipeline.py)
    slo_wait: float = DEFAULTS.pipeline_slo_wait
    slo_quantile: float = DEFAULTS.pipeline_slo_quantile
    bucket_seconds: int = DEFAULTS.pipeline_bucket
    stuck_after: float = DEFAULTS.pipeline_stuck_after
    #: "Now" for stuck jobs (epoch ms); the wall clock when unset.
    as_of_ms: int | None = None
    accuracy: int = DEFAULTS.pipeline_accuracy
    #: How many stuck jobs the report lists (the table has them all).
    stuck_listed: int = 100

    def __post_init__(self) -> None:
        if self.bucket_seconds < 1:
            raise InvalidParams("--bucket must be at least 1 second")
        if self.slo_wait < 0:
            raise InvalidParams("--slo-wait must be >= 0")
        if not 0 < self.slo_quantile < 1:
            raise InvalidParams("--slo-quantile must be between 0 and 1")
        if self.stuck_after < 0:
            raise InvalidParams("--stuck-after must be >= 0")
        if self.accuracy < 1:
            raise InvalidParams("percentile accuracy must be >= 1")


@dataclass
class PipelineResult:
    """Everything the report is built from, collected on the driver (all small)."""

    params: PipelineParams
    #: Rows read, rows without an event or job id, unique valid events.
    read: int
    invalid: int
    unique: int
    window_start_ms: int
    window_end_ms: int
    as_of_ms: int
    jobs: int
    stats: list[dict[str, Any]]
    actors: list[dict[str, Any]]
    stuck_count: int
    stuck: list[dict[str, Any]]
    tables: dict[str, str]
    seconds: float
