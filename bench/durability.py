"""Issue 14: what ``appendfsync always`` costs next to ``everysec``.

``everysec`` (the compose stack's setting) may lose the last second of
writes to a ``kill -9`` of redis-server; ``always`` fsyncs the AOF before
each reply. Two private redis-servers, AOF on, one per policy, on the same
disk; on each, in one run:

- ``sequential``: ``jobs`` create+start transitions (one ``hero_submit_many``
  Function call each, the write path of ``job.run``) one after the other,
  timed per call (p50/p99);
- ``batched``: the same number in calls of ``batch`` jobs (jobs/s).

    .venv/bin/python bench/durability.py [--jobs 500] [--batch 100]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.supervisor import Supervisor

from common import emit, latency_summary, log

POLICIES = ("everysec", "always")


def spec(n: int, policy: str, phase: str) -> dict[str, Any]:
    return {"script": "pass", "script_type": "python", "job_id": f"{policy}-{phase}-{n}"}


async def measure(url: str, policy: str, jobs: int, batch: int) -> dict[str, Any]:
    admin = aioredis.Redis.from_url(url)
    try:
        await admin.config_set("appendfsync", policy)
    finally:
        await admin.aclose()
    sup = await Supervisor.connect(Config(redis_url=url), maintenance=False, watch=False)
    try:
        samples = []
        for n in range(jobs):
            t0 = time.perf_counter()
            await sup.submit_many([spec(n, policy, "seq")])
            samples.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for first in range(0, jobs, batch):
            last = min(first + batch, jobs)
            await sup.submit_many([spec(n, policy, "batch") for n in range(first, last)])
        elapsed = time.perf_counter() - t0
    finally:
        await sup.close()
    return {"sequential": latency_summary(samples), "batched_jobs_per_s": round(jobs / elapsed)}


async def durability(jobs: int, batch: int) -> dict[str, Any]:
    results: dict[str, Any] = {"jobs": jobs, "batch": batch}
    with tempfile.TemporaryDirectory(prefix="hero-durability-") as tmp:
        for policy in POLICIES:
            server = EmbeddedRedis(Path(tmp) / policy, appendonly=True).start()
            try:
                log(f"appendfsync {policy}: {jobs} jobs")
                results[policy] = await measure(server.url, policy, jobs, batch)
            finally:
                server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    emit(asyncio.run(durability(args.jobs, args.batch)))


if __name__ == "__main__":
    main()
