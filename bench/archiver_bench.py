"""Does the events archiver keep up with the job rate? (issue 18)

One WebSocket batch throughput run (the same as the gateway section's) writes
its events to ``hero:events``; then the pipeline's archiver
(``gateway.pipeline.archive.Archiver``, what ``hero-gateway archive`` runs)
drains that stream into Parquet in this process, alone on the machine's
cores. Reported: the events/s the throughput run wrote and the events/s the
archiver read, wrote durably (fsync, rename) and acknowledged. The target
compares the archiver's rate with the fastest rate any throughput run of the
sitting wrote events at (report/targets.py).

The stream is trimmed to about ``events_maxlen`` entries (100,000 by
default), so a run of more jobs than that leaves the archiver the newest
ones: the rate is still events per second of archiving.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from gateway.pipeline.archive import ArchiveOptions, Archiver

from common import OUT, log


def archive_rate(url: str) -> dict[str, Any]:
    """Drain the events stream once with a fresh consumer group; events/s of archiving."""
    out = Path(tempfile.mkdtemp(prefix="archive-", dir=OUT))
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        archiver = Archiver(client, ArchiveOptions(out=out, group="bench", consumer="bench"))
        t0 = time.perf_counter()
        stats = archiver.run(once=True)
        seconds = time.perf_counter() - t0
    finally:
        client.close()
        shutil.rmtree(out, ignore_errors=True)
    return {
        "events": stats.events,
        "files": stats.files,
        "seconds": seconds,
        "events_per_s": stats.events / seconds if seconds > 0 else 0.0,
    }


def archiver(url: str, *, jobs: int, concurrency: int) -> dict[str, Any]:
    import ws_bench

    run = asyncio.run(
        ws_bench.gateway_throughput(url, jobs=jobs, procs_n=2, concurrency=concurrency, runs=1)
    )
    archived = archive_rate(url)
    log(
        f"archiver: {archived['events']:,} events in {archived['seconds']:.2f}s = "
        f"{archived['events_per_s']:,.0f} events/s (the run wrote {run['events_per_s']:,.0f}/s)"
    )
    return {
        **archived,
        "run_jobs_per_s": run["jobs_per_s"],
        "run_events_per_s": run["events_per_s"],
        "run_verified": run["verified"],
    }
