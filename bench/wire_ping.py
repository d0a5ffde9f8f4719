"""Per-command cost of the supervisor's Redis client: sequential PINGs on one
private redis-server, through redis-py's pool, the ``Wire`` and (optionally) an
earlier ``wire.py`` given by path, all in one run on the same event loop.

    .venv/bin/python bench/wire_ping.py [--baseline OLD_WIRE_PY] [-n 20000] [--batch 32]

``--batch N`` sends the PINGs N to a pipeline (a JSON-RPC batch's merged
calls go out so), and gives the cost of one PING within it.

``git show main:gateway/supervisor/wire.py > /tmp/old.py`` gives the baseline
of a change to the wire. Each figure is the median of 9 rounds of n PINGs.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from gateway import eventloop
from gateway.config import DEFAULTS
from gateway.embedded_redis import EmbeddedRedis
from gateway.supervisor.wire import Wire

ROUNDS = 9


async def per_call_us(calls: dict[str, Callable[[], Awaitable[Any]]], n: int) -> dict[str, float]:
    """Median µs per call of each; the rounds of the clients interleave, so a
    load that comes and goes on a shared machine weighs on each alike."""
    rounds: dict[str, list[float]] = {label: [] for label in calls}
    for call in calls.values():
        for _ in range(200):  # connected and warm
            await call()
    for _ in range(ROUNDS):
        for label, call in calls.items():
            started = time.perf_counter()
            for _ in range(n):
                await call()
            rounds[label].append((time.perf_counter() - started) / n * 1e6)
    return {label: statistics.median(values) for label, values in rounds.items()}


def load_wire(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_wire", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Wire


def pipelined(client: Any, batch: int) -> Callable[[], Awaitable[Any]]:
    """A call that sends ``batch`` PINGs in one pipeline of ``client``."""
    if isinstance(client, aioredis.Redis):

        async def through_pool() -> Any:
            pipe = client.pipeline(transaction=False)
            for _ in range(batch):
                pipe.ping()
            return await pipe.execute()

        return through_pool
    return functools.partial(client.pipeline, [("PING",)] * batch)


async def measure(url: str, n: int, baseline: str | None, batch: int = 1) -> dict[str, float]:
    pool = aioredis.Redis.from_url(url, decode_responses=True)
    # as the supervisor builds it: the stall watch on (HERO_REDIS_TIMEOUT's default)
    wire = Wire(url, "bench", timeout=DEFAULTS.redis_timeout)
    clients: dict[str, Any] = {"redis-py pool": pool, "Wire": wire}
    if baseline:
        clients["Wire (baseline)"] = load_wire(baseline)(url, "bench-baseline")
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        label: functools.partial(client.execute_command, "PING")
        if batch == 1
        else pipelined(client, batch)
        for label, client in clients.items()
    }
    figures = await per_call_us(calls, max(n // batch, 1))
    for client in clients.values():
        await client.aclose()
    return {label: us / batch for label, us in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="path of an earlier wire.py to compare with")
    parser.add_argument("-n", type=int, default=20_000, help="PINGs per round")
    parser.add_argument("--batch", type=int, default=1, help="PINGs per pipeline (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis", appendonly=False).start()
        try:
            figures = eventloop.run(measure(server.url, args.n, args.baseline, args.batch))
        finally:
            server.stop()
    for label, us in figures.items():
        print(f"{label:>16}: {us:6.1f} µs per PING")


if __name__ == "__main__":
    main()
