"""The terminal summary of ``pipeline run``: readable in an 80-column terminal.

One wide table with fourteen columns was squeezed by rich to a character or two
per cell at 80 columns. The same figures now come as two narrow tables (what
happened to the jobs; how the queue behaved and the actor advice), each fitting
80 columns with every number whole; a reason instead of an advice goes below
the tables, where it can wrap as prose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

JOB_COLUMNS = (
    ("arrivals", "arrivals"),
    ("done", "completions"),
    ("errors", "errors"),
    ("timeouts", "timeouts"),
    ("retries", "retries"),
    ("dlq", "dlq"),
)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{fmt(value)} s"


def _table(title: str, names: tuple[str, ...]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    table.add_column("type", overflow="fold", ratio=1, min_width=6)
    for name in names:
        table.add_column(name, justify="right", no_wrap=True)
    return table


def tables(built: dict[str, Any]) -> list[Table]:
    """The jobs table and the queue-and-advice table."""
    jobs = _table("Jobs", tuple(label for label, _ in JOB_COLUMNS))
    queue = _table(
        "Queue and actors",
        ("wait p95", "run p95", "λ /s", "load", "util", "actors", "advice"),
    )
    for entry in built["script_types"]:
        name = entry["script_type"] or "(none)"
        rec = entry["recommendation"]
        jobs.add_row(name, *(fmt(entry[column]) for _, column in JOB_COLUMNS))
        queue.add_row(
            name,
            seconds(entry["wait"]["p95"]),
            seconds(entry["run"]["p95"]),
            fmt(entry["arrival_rate"]),
            fmt(rec.get("offered_load")),
            fmt(entry["utilisation"], 2),
            fmt(entry["actors_seen"]),
            fmt(rec.get("actors")),
        )
    return [jobs, queue]


def render(built: dict[str, Any], path: Path, published: bool) -> RenderableType:
    """Everything ``pipeline run`` prints after a run."""
    window = built["window"]
    params = built["params"]
    lines: list[RenderableType] = [
        Text(f"window {window['start']} → {window['end']}", style="bold"),
        *tables(built),
    ]
    for entry in built["script_types"]:
        reason = entry["recommendation"].get("reason")
        if entry["recommendation"].get("actors") is None and reason:
            lines.append(Text(f"{entry['script_type']}: no advice, {reason}"))
    events = built["events"]
    lines.append(
        Text(
            f"{events['unique']:,} events ({events['duplicates']:,} duplicates dropped), "
            f"{built['jobs']:,} jobs, {built['stuck']['count']:,} stuck; "
            f"advice: actors for p{round(params['slo_quantile'] * 100)} wait <= "
            f"{params['slo_wait']:g}s"
        )
    )
    lines.append(Text(f"report: {path}" + (" (published to Redis)" if published else "")))
    return Group(*lines)
