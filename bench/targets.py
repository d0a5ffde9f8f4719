"""Issue 18's targets, each figure of one sitting beside BullMQ's with its verdict.

The targets are ratios to BullMQ measured in the same sitting (the machine's
load moves both alike) and CPU per job (less sensitive to that load than
rates). ``summary`` is printed at the end of every ``run.py`` and written
near the top of RESULTS.md: the targets, the Redis capacity line of every
system, and the WebSocket throughput with AOF on beside AOF off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common import PEER_LABELS, ok

WS_VS_BULLMQ = 1.0  # WebSocket batches jobs/s ≥ this times BullMQ's
SUPERVISOR_VS_BULLMQ = 1.5  # in-process + our actor, 2 processes
REDIS_US_PER_JOB = 60.0  # on the WebSocket path, results stored and events written
GATEWAY_US_PER_JOB = 60.0  # the gateway process, in batches
P50_VS_BULLMQ, P99_VS_BULLMQ = 1.0, 0.5  # run-and-wait over WebSocket
ARCHIVER_VS_EVENTS = 2.0  # archiver events/s ≥ this times the fastest run's events/s
SCALE_CONNECTIONS, SCALE_RSS_MIB = 10, 1024.0  # 10,000 waiting clients


@dataclass(frozen=True)
class Row:
    target: str
    ours: str
    bullmq: str
    ratio: str
    #: "met", "**missed** …", or why it was not measured.
    verdict: str


def verdict(value: float, limit: float, *, higher_is_better: bool) -> str:
    """ "met", or missed by how much: the share short of (or over) the limit and
    the factor that would close it."""
    if higher_is_better:
        if value >= limit:
            return "met"
        factor = f"needs {limit / value:.2f}× more" if value > 0 else "nothing measured"
        return f"**missed** by {(limit - value) / limit:.0%} ({factor})"
    if value <= limit:
        return "met"
    return f"**missed** by {(value - limit) / limit:.0%} (needs {value / limit:.2f}× less)"


def capacity(redis_us_per_job: float) -> float:
    """Jobs/s one Redis core carries at this much Redis CPU per job."""
    return 1e6 / redis_us_per_job if redis_us_per_job > 0 else float("inf")


def part(results: dict[str, Any], *path: str) -> dict[str, Any] | None:
    """``results[a][b]…`` when every step holds figures, else None."""
    node: Any = results
    for key in path:
        node = node.get(key) if ok(node) else None
    return node if ok(node) else None


def _cpu(figures: dict[str, Any] | None, who: str) -> float | None:
    if figures is None:
        return None
    value = (figures.get("cpu_us_per_job") or {}).get(who)
    return float(value) if value is not None else None


def _fig(figures: dict[str, Any] | None, key: str) -> float | None:
    return None if figures is None or figures.get(key) is None else float(figures[key])


def _missing(target: str, needs: str) -> Row:
    return Row(target, "—", "—", "—", f"not measured (needs the sections {needs})")


def _ratio_row(
    target: str,
    ours: float | None,
    peer: float | None,
    goal: float,
    *,
    higher: bool,
    fmt: str,
    needs: str,
) -> Row:
    if ours is None or peer is None or peer <= 0:
        return _missing(target, needs)
    ratio = ours / peer
    return Row(
        target,
        fmt.format(ours),
        fmt.format(peer),
        f"{ratio:.2f}×",
        verdict(ratio, goal, higher_is_better=higher),
    )


def _limit_row(
    target: str, ours: float | None, peer: float | None, limit: float, *, needs: str
) -> Row:
    if ours is None:
        return _missing(target, needs)
    return Row(
        target,
        f"{ours:,.1f}",
        "—" if peer is None else f"{peer:,.1f}",
        "—" if not peer else f"{ours / peer:.2f}×",
        verdict(ours, limit, higher_is_better=False),
    )


def fastest_events_per_s(results: dict[str, Any]) -> float | None:
    """The highest rate any throughput run of the sitting wrote events at."""
    rates = [
        float(f["events_per_s"])
        for f in (
            part(results, "supervisor", "1p"),
            part(results, "supervisor", "2p"),
            part(results, "gateway", "throughput"),
            part(results, "aof", "gateway"),
        )
        if f is not None and f.get("events_per_s")
    ]
    arch = part(results, "archiver")
    if arch is not None and arch.get("run_events_per_s"):
        rates.append(float(arch["run_events_per_s"]))
    return max(rates) if rates else None


def targets(results: dict[str, Any]) -> list[Row]:
    """Every target of issue 18, in the issue's order."""
    ws = part(results, "gateway", "throughput")
    lat = part(results, "gateway", "latency")
    sup = part(results, "supervisor", "2p")
    bt = part(results, "bullmq", "throughput")
    bl = part(results, "bullmq", "latency")
    rate, ms = "{:,.0f}", "{:.2f} ms"
    return [
        _ratio_row(
            f"WebSocket JSON-RPC batches, jobs/s ≥ {WS_VS_BULLMQ}× BullMQ",
            _fig(ws, "jobs_per_s"),
            _fig(bt, "jobs_per_s"),
            WS_VS_BULLMQ,
            higher=True,
            fmt=rate,
            needs="gateway, bullmq",
        ),
        _ratio_row(
            f"supervisor in-process + our actor (2 processes), jobs/s ≥ "
            f"{SUPERVISOR_VS_BULLMQ}× BullMQ",
            _fig(sup, "jobs_per_s"),
            _fig(bt, "jobs_per_s"),
            SUPERVISOR_VS_BULLMQ,
            higher=True,
            fmt=rate,
            needs="supervisor, bullmq",
        ),
        _limit_row(
            f"Redis CPU µs per job, WebSocket path ≤ {REDIS_US_PER_JOB:.0f}",
            _cpu(ws, "redis"),
            _cpu(bt, "redis"),
            REDIS_US_PER_JOB,
            needs="gateway",
        ),
        _limit_row(
            f"gateway CPU µs per job, batches ≤ {GATEWAY_US_PER_JOB:.0f}",
            _cpu(ws, "gateway"),
            None,
            GATEWAY_US_PER_JOB,
            needs="gateway",
        ),
        _ratio_row(
            f"WebSocket run-and-wait p50 ≤ {P50_VS_BULLMQ}× BullMQ",
            _fig(lat, "p50_ms"),
            _fig(bl, "p50_ms"),
            P50_VS_BULLMQ,
            higher=False,
            fmt=ms,
            needs="gateway, bullmq",
        ),
        _ratio_row(
            f"WebSocket run-and-wait p99 ≤ {P99_VS_BULLMQ}× BullMQ",
            _fig(lat, "p99_ms"),
            _fig(bl, "p99_ms"),
            P99_VS_BULLMQ,
            higher=False,
            fmt=ms,
            needs="gateway, bullmq",
        ),
        _archiver_row(results),
        *_scale_rows(results),
    ]


def _archiver_row(results: dict[str, Any]) -> Row:
    target = f"archiver events/s ≥ {ARCHIVER_VS_EVENTS}× the fastest throughput run's"
    arch = part(results, "archiver")
    fastest = fastest_events_per_s(results)
    if arch is None or not fastest:
        return _missing(target, "archiver")
    ratio = arch["events_per_s"] / fastest
    return Row(
        f"{target} ({fastest:,.0f} events/s)",
        f"{arch['events_per_s']:,.0f} events/s",
        "—",
        f"{ratio:.2f}× the run",
        verdict(ratio, ARCHIVER_VS_EVENTS, higher_is_better=True),
    )


def _scale_rows(results: dict[str, Any]) -> list[Row]:
    conns = f"10,000 waiting clients: ≤ {SCALE_CONNECTIONS} Redis connections"
    rss = "10,000 waiting clients: gateway RSS < 1 GiB"
    s = part(results, "scale")
    if s is None:
        return [_missing(conns, "scale"), _missing(rss, "scale")]
    reached = min(s["clients"], s.get("connected", s["clients"]))
    at = "" if reached >= 10000 else f" (only {reached:,} clients connected)"
    return [
        Row(
            conns + at,
            str(s["redis_connections"]),
            "—",
            "—",
            verdict(s["redis_connections"], SCALE_CONNECTIONS, higher_is_better=False),
        ),
        Row(
            rss + at,
            f"{s['gateway_rss_peak_mib']:.0f} MiB (peak)",
            "—",
            "—",
            verdict(s["gateway_rss_peak_mib"], SCALE_RSS_MIB, higher_is_better=False),
        ),
    ]


def capacity_rows(results: dict[str, Any]) -> list[tuple[str, float]]:
    """(system, Redis µs per job) of every throughput figure that has one."""
    found: list[tuple[str, dict[str, Any] | None]] = [
        ("hero-gateway supervisor in-process, 1 process", part(results, "supervisor", "1p")),
        ("hero-gateway supervisor in-process, 2 processes", part(results, "supervisor", "2p")),
        ("hero-gateway over WebSocket (batches)", part(results, "gateway", "throughput")),
        ("hero-gateway over WebSocket (batches), AOF everysec", part(results, "aof", "gateway")),
    ]
    found += [(label, part(results, name, "throughput")) for name, label in PEER_LABELS.items()]
    found += [
        ("BullMQ (Node), AOF everysec", part(results, "aof", "bullmq")),
        ("ceiling: Python LPUSH/BLPOP loop", part(results, "naive", "throughput")),
    ]
    return [(label, us) for label, f in found if (us := _cpu(f, "redis")) is not None]


def summary(results: dict[str, Any], sections: dict[str, Any] | None = None) -> list[str]:
    """Markdown: the targets table, the capacity line, AOF on beside off.
    ``sections``: run.py's per-section conditions, for the load each ran under."""
    lines = [
        "## Targets (#18)",
        "",
        'Each figure measured in this sitting (see "Merged" above when sections were '
        "re-run); ratios to BullMQ's figure of the same sitting.",
        "",
    ]
    if sections:
        loads = ", ".join(
            f"{name} {c['load_before'][0]:.2f}–{c['load_after'][0]:.2f}"
            for name, c in sections.items()
        )
        lines += [
            f"1-minute load during each section: {loads}. Sections that ran under different "
            "loads make a jobs/s ratio lean; the CPU µs per job lean much less.",
            "",
        ]
    lines += [
        "| target | hero-gateway | BullMQ | ratio | verdict |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {r.target} | {r.ours} | {r.bullmq} | {r.ratio} | {r.verdict} |"
        for r in targets(results)
    ]
    caps = capacity_rows(results)
    if caps:
        lines += [
            "",
            "Capacity of one Redis primary (one core): 1,000,000 / Redis CPU µs per job, "
            "the most jobs/s no number of gateways or workers can pass.",
            "",
            "| system | Redis CPU µs/job | jobs/s per Redis core |",
            "| --- | ---: | ---: |",
        ]
        lines += [f"| {label} | {us:,.1f} | {capacity(us):,.0f} |" for label, us in caps]
    return [*lines, "", *aof_table(results)]


def aof_table(results: dict[str, Any]) -> list[str]:
    aof = part(results, "aof")
    if aof is None:
        return []
    persistence = ", ".join(f"{k} {v or '(none)'}" for k, v in aof["redis_persistence"].items())
    lines = [
        f"With AOF on ({persistence}; {aof.get('aof_mib', 0):.0f} MiB of AOF on disk at the end), "
        "as production runs Redis, beside the AOF-off figures above:",
        "",
        "| system | jobs/s AOF off | jobs/s AOF on | Redis µs/job AOF off | AOF on |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    pairs = [
        ("hero-gateway over WebSocket (batches)", ("gateway", "throughput"), ("aof", "gateway")),
        ("BullMQ (Node)", ("bullmq", "throughput"), ("aof", "bullmq")),
    ]
    for label, off_path, on_path in pairs:
        off, on = part(results, *off_path), part(results, *on_path)
        if on is None:
            continue
        off_rate = "—" if off is None else f"{off['jobs_per_s']:,.0f}"
        off_us = _cpu(off, "redis")
        on_us = _cpu(on, "redis")
        lines.append(
            f"| {label} | {off_rate} | {on['jobs_per_s']:,.0f} | "
            f"{'—' if off_us is None else f'{off_us:.0f}'} | "
            f"{'—' if on_us is None else f'{on_us:.0f}'} |"
        )
    return [*lines, ""]
