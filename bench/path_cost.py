"""What a job costs Redis over the whole path, ours and BullMQ's, counted in instructions.

``lua_cost.py`` counts the Functions alone, called in a fixed order. This runs
the real thing on a redis-server under callgrind and counts every instruction
Redis executes for a job, whatever asked for it, the way the throughput runs
of ``make bench`` drive it:

- ``ws``: a ``hero-gateway serve`` and two actor processes, the jobs sent as
  JSON-RPC batches of ``job.create`` then ``job.start`` over four WebSockets
  (``ws_bench.ws_throughput_run``);
- ``supervisor``: the supervisor in-process with the same actors
  (``ours.one_throughput_run``);
- ``bullmq``: BullMQ's own throughput run (``node/bullmq_bench.mjs``, two
  worker processes).

Timing Redis's CPU (``INFO cpu``) on these shared 2-core machines moves by
tens of per cent with the load; a count does not, so two systems (or two
trees) compare by their counts at any time. Under callgrind Redis runs about
fifty times slower, and the batches it sees are about as large as at full
speed (Function calls per job 0.09 over WebSocket, 0.04 in-process, the
same at 7,000 jobs/s), so the count is the full-speed path's.

Ours is counted from the first enqueue to the last completion, after a
warm-up (the results' check after it is not counted). BullMQ's run cannot
be cut there from outside, so two whole runs of different sizes are counted
and the difference is divided by the difference of their jobs: what one more
job costs, start-up and warm-up taken out.

    .venv/bin/python bench/path_cost.py                  # all three, 2,048 jobs each
    .venv/bin/python bench/path_cost.py --only ws --jobs 4096
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis

from common import BENCH, Procs, log, run_child
from ours import CpuMeter, connect_producer, one_throughput_run, start_actors, wait_actors

PATHS = ("ws", "supervisor", "bullmq")
LABELS = {
    "ws": "hero-gateway over WebSocket (batches)",
    "supervisor": "hero-gateway supervisor in-process",
    "bullmq": "BullMQ (Node)",
}
WARM_UP = 640


@contextmanager
def counted_redis() -> Iterator[tuple[EmbeddedRedis, Path]]:
    """A private redis-server under callgrind, counting nothing until told;
    the file of its counts is written when it stops (``total``)."""
    with tempfile.TemporaryDirectory(prefix="path-cost-") as tmp:
        work = Path(tmp)
        out = work / "callgrind.out"
        wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out}"]  # fmt: skip
        server = EmbeddedRedis(work, appendonly=False, wrapper=wrapper)
        server.start(timeout=60)
        try:
            yield server, out
        finally:
            server.stop(timeout=120)


def counting(server: EmbeddedRedis, on: bool) -> None:
    assert server.process is not None
    subprocess.run(
        ["callgrind_control", "-i", "on" if on else "off", str(server.process.pid)],
        check=True,
        capture_output=True,
    )


def total(server: EmbeddedRedis, out: Path) -> int:
    """The instructions callgrind counted: the server is stopped, which writes them."""
    server.stop(timeout=120)
    found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no totals in {out}")
    return int(found.group(1))


def commands(stats: dict[str, Any]) -> dict[str, int]:
    """Calls of each command, from INFO commandstats (INFO itself left out)."""
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()
            if not k.startswith("cmdstat_info")}  # fmt: skip


class Counted(CpuMeter):
    """Stands in for the throughput runs' CPU meter, whose first read comes
    right before the first enqueue and whose second right after the last
    completion: here they switch callgrind's counting on and off, and take
    the commands run in between."""

    def __init__(self, server: EmbeddedRedis, probe: aioredis.Redis) -> None:
        super().__init__(probe, [])
        self.server, self.on = server, False
        self.commands: dict[str, int] = {}

    async def read(self) -> dict[str, float]:
        self.on = not self.on
        if self.on:
            await self.probe.config_resetstat()
            counting(self.server, True)
        else:
            counting(self.server, False)
            self.commands = commands(await self.probe.info("commandstats"))
        return dict.fromkeys(("producer", "workers", "gateway", "redis"), 0.0)


async def count_ours(path: str, jobs: int) -> dict[str, Any]:
    import ws_bench

    with counted_redis() as (server, out):
        probe = aioredis.Redis.from_url(server.url, decode_responses=True)
        sup = await connect_producer(Config(redis_url=server.url))
        try:
            with Procs() as procs:
                port = ws_bench.start_gateway(procs, server.url)[1] if path == "ws" else 0
                start_actors(procs, server.url, 2, 32)
                await wait_actors(sup, 2, procs, timeout=120)

                async def run(n: int, meter: CpuMeter | None) -> dict[str, Any]:
                    tag = f"pc-{uuid.uuid4().hex[:6]}"
                    if path == "ws":
                        return await ws_bench.ws_throughput_run(port, probe, tag, n, procs, meter)
                    return await one_throughput_run(sup, probe, tag, n, procs, 900, meter)

                await run(WARM_UP, None)
                meter = Counted(server, probe)
                result = await run(jobs, meter)
        finally:
            await sup.close()
            await probe.aclose()
        counted = total(server, out)
    if not result["verified"]:
        raise RuntimeError(f"{path}: the counted run's results were wrong: {result}")
    return figures(counted, jobs, meter.commands)


def count_bullmq(small: int, large: int) -> dict[str, Any]:
    """One more job's cost: two whole runs, their difference."""
    from peers_venv import peer_argv

    runs = []
    for n in (small, large):
        argv = peer_argv("bullmq", "URL", "throughput", jobs=n, calls=0, runs=1, concurrency=10)
        if argv is None:
            return {"skipped": "node/npm not installed"}
        with counted_redis() as (server, out):
            argv = [server.url if a == "URL" else a for a in argv]
            with redis.Redis.from_url(server.url) as client:
                counting(server, True)
                result = run_child(argv, cwd=BENCH, timeout=3600)
                counting(server, False)
                calls = commands(client.info("commandstats"))
            if not result.get("verified"):
                raise RuntimeError(f"bullmq: a counted run's results were wrong: {result}")
            runs.append((total(server, out), calls))
    (small_i, small_c), (large_i, large_c) = runs
    extra = {name: large_c[name] - small_c.get(name, 0) for name in large_c}
    return {**figures(large_i - small_i, large - small, extra), "runs": [small, large]}


def figures(instructions: int, jobs: int, calls: dict[str, int]) -> dict[str, Any]:
    return {
        "jobs": jobs,
        "instructions_per_job": instructions / jobs,
        "commands_per_job": {k: v / jobs for k, v in sorted(calls.items(), key=lambda kv: -kv[1])},
    }


def cost(jobs: int, paths: Sequence[str] = PATHS) -> dict[str, Any]:
    """Each path's figures; BullMQ's from runs of ``jobs`` and ``2 * jobs`` jobs."""
    out: dict[str, Any] = {}
    for path in paths:
        log(f"path-cost: {path}, Redis under callgrind")
        if path == "bullmq":
            out[path] = count_bullmq(jobs, 2 * jobs)
        else:
            out[path] = asyncio.run(count_ours(path, jobs))
    return out


def can_count() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows (bench/report.py puts them in RESULTS.md)."""
    bull = result.get("bullmq", {}).get("instructions_per_job")
    rows = [
        "## What a job costs Redis over the whole path (bench/path_cost.py)",
        "",
        "Every instruction Redis executed per job, counted by callgrind over a real "
        "throughput run (ours: from the first enqueue to the last completion; BullMQ: one "
        "more job's cost, from two runs of different sizes). The machine's load does not "
        "move it.",
        "",
        "| system | Redis instructions per job | vs BullMQ | commands per job (most called) |",
        "| --- | ---: | ---: | --- |",
    ]
    for path, label in LABELS.items():
        f = result.get(path)
        if not f or "instructions_per_job" not in f:
            continue
        n = f["instructions_per_job"]
        ratio = f"{n / bull:.2f}×" if bull else "—"
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(f["commands_per_job"].items())[:8])
        rows.append(f"| {label} | {n:,.0f} | {ratio} | {top} |")
    return [*rows, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2048, help="jobs counted per path (default 2048)")
    p.add_argument("--only", default=",".join(PATHS), help="comma-separated: " + ", ".join(PATHS))
    a = p.parse_args(argv)
    paths = [x.strip() for x in a.only.split(",") if x.strip()]
    if unknown := set(paths) - set(PATHS):
        p.error(f"unknown paths {sorted(unknown)}; choose from {', '.join(PATHS)}")
    if not can_count():
        p.error("valgrind (callgrind) is needed: apt-get install valgrind")
    print("\n".join(table(cost(a.jobs, paths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
