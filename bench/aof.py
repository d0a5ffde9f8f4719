"""The WebSocket batch throughput (and BullMQ's) with AOF on, as production runs Redis.

Every other section runs on a redis-server with AOF off, so its figures show
the job path alone. Production keeps ``appendonly yes`` with ``appendfsync
everysec``: each write is also appended to the AOF (and fsynced once a second
by a background thread), which costs Redis CPU per command. This section
starts a second private redis-server with those settings, runs the same
throughput as the gateway section on it and, when BullMQ is in the sitting,
BullMQ's throughput too; report/targets.py sets them beside the AOF-off
figures.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import redis
from gateway.embedded_redis import EmbeddedRedis

from common import BENCH, OUT, log, redis_persistence, run_child


def aof_throughput(
    *, jobs: int, runs: int, concurrency: int, peer_concurrency: int, with_bullmq: bool
) -> dict[str, Any]:
    import ws_bench

    data = Path(tempfile.mkdtemp(prefix="redis-aof-", dir=OUT))
    server = EmbeddedRedis(data, appendonly=True).start()
    try:
        client = redis.Redis.from_url(server.url)
        try:
            client.config_set("appendfsync", "everysec")
        finally:
            client.close()
        out: dict[str, Any] = {"redis_persistence": redis_persistence(server.url)}
        log(f"AOF redis-server on {server.url}: {out['redis_persistence']}")
        out["gateway"] = asyncio.run(
            ws_bench.gateway_throughput(
                server.url, jobs=jobs, procs_n=2, concurrency=concurrency, runs=runs
            )
        )
        if with_bullmq:
            out["bullmq"] = bullmq_throughput(server.url, jobs, runs, peer_concurrency)
        out["aof_mib"] = sum(f.stat().st_size for f in data.rglob("*.aof")) / 2**20
        return out
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


def bullmq_throughput(url: str, jobs: int, runs: int, concurrency: int) -> dict[str, Any]:
    from peers_venv import peer_argv

    with redis.Redis.from_url(url) as client:
        client.flushall()
    argv = peer_argv(
        "bullmq", url, "throughput", jobs=jobs, calls=0, runs=runs, concurrency=concurrency
    )
    if argv is None:
        return {"skipped": "node/npm not installed"}
    try:
        return run_child(argv, cwd=BENCH, timeout=1800)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        log(f"bullmq with AOF failed: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"}
