"""The driver every Python peer shares; runs inside bench/.venv-peers.

A peer module defines a ``Peer`` subclass: how to start its standard worker
processes, enqueue jobs with its own client API, tell how many are still
pending (one cheap Redis command, polled every 2 ms after the last enqueue),
check every result, and run-and-wait one job. ``main`` runs the workload the
orchestrator asks for and prints one BENCH-RESULT line:

    python -m peers.arq_peer --url redis://... --mode throughput --jobs 20000 --runs 3
    python -m peers.arq_peer --url redis://... --mode latency --calls 2000 --runs 3

Each job's payload is a distinct string and the no-op task returns it, so a
result is right only if it is that job's own payload.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from common import OUT, Procs, emit, latency_summary, log, median, python_env  # noqa: E402

#: Worker concurrency per process for peers whose worker runs many jobs at once.
CONCURRENCY = 10
PROCS = 2


def peer_url() -> str:
    """The bench's Redis: BENCH_REDIS_URL (set for workers) or the driver's --url.
    Never a default: a module must not touch the machine's shared Redis."""
    url = os.environ.get("BENCH_REDIS_URL")
    if not url and "--url" in sys.argv:
        url = sys.argv[sys.argv.index("--url") + 1]
    if not url:
        raise SystemExit("set BENCH_REDIS_URL or pass --url")
    os.environ["BENCH_REDIS_URL"] = url
    return url


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Peer:
    name = "peer"
    #: what "concurrency" means for this peer's worker, for the report
    concurrency_note = ""

    def __init__(self, url: str, procs: int, concurrency: int) -> None:
        self.url = url
        self.procs = procs
        self.concurrency = concurrency

    # -- to implement ---------------------------------------------------------------

    def worker_argvs(self) -> list[list[str]]:
        raise NotImplementedError

    async def setup(self) -> None:
        """Open clients (in the driver process)."""

    async def teardown(self) -> None:
        pass

    async def enqueue(self, items: Sequence[tuple[str, str]]) -> None:
        """Enqueue (job_id, payload) pairs with the peer's own client API."""
        raise NotImplementedError

    async def pending(self, n: int, base: Any) -> int:
        """Jobs of this run not completed yet (``base`` from ``baseline``)."""
        raise NotImplementedError

    async def baseline(self) -> Any:
        return None

    async def verify(self, items: Sequence[tuple[str, str]]) -> int:
        """How many jobs did not finish with their own payload as result."""
        raise NotImplementedError

    async def run_and_wait(self, payload: str) -> Any:
        """Enqueue one job and wait for its result; returns the result."""
        raise NotImplementedError

    # -- driver -------------------------------------------------------------------

    def start_workers(self, procs: Procs) -> None:
        for i, argv in enumerate(self.worker_argvs()):
            procs.start(
                argv, env=python_env(), cwd=BENCH, log=OUT / "logs" / f"{self.name}-worker-{i}.log"
            )

    async def wait_done(self, n: int, base: Any, procs: Procs, timeout: float) -> float:
        end = time.monotonic() + timeout
        polls = 0
        while await self.pending(n, base) > 0:
            polls += 1
            if polls % 500 == 0:
                procs.check_alive()
                if time.monotonic() > end:
                    left = await self.pending(n, base)
                    raise TimeoutError(f"{self.name}: {left}/{n} still pending after {timeout}s")
            await asyncio.sleep(0.002)
        return time.perf_counter()

    async def one_run(self, tag: str, n: int, procs: Procs, timeout: float) -> dict[str, Any]:
        items = [(f"{tag}-{i:06d}", f"out-{tag}-{i}") for i in range(n)]
        base = await self.baseline()
        cpu0 = self._redis_cpu()
        t0 = time.perf_counter()
        for start in range(0, n, 500):
            await self.enqueue(items[start : start + 500])
        t_enq = time.perf_counter()
        t_end = await self.wait_done(n, base, procs, timeout)
        redis_us = (self._redis_cpu() - cpu0) / n * 1e6
        wrong = await self.verify(items)
        return {
            "jobs": n,
            "elapsed_s": t_end - t0,
            "enqueue_s": t_enq - t0,
            "jobs_per_s": n / (t_end - t0),
            "wrong": wrong,
            "verified": wrong == 0,
            "cpu_us_per_job": {"redis": round(redis_us, 1)},
        }

    def _redis_cpu(self) -> float:
        import redis

        from common import redis_cpu

        client = redis.Redis.from_url(self.url)
        try:
            return redis_cpu(client)
        finally:
            client.close()

    async def throughput(self, jobs: int, runs: int, timeout: float) -> dict[str, Any]:
        await self.setup()
        try:
            with Procs() as procs:
                self.start_workers(procs)
                warm = 100 * self.procs
                res = await self.one_run(f"warm-{uuid.uuid4().hex[:6]}", warm, procs, 120)
                if not res["verified"]:  # e.g. SAQ sweeps a few jobs while its workers start
                    log(f"{self.name}: warm-up: {res['wrong']} of {warm} results wrong")
                results = []
                for r in range(runs):
                    tag = f"{self.name}-{uuid.uuid4().hex[:6]}-{r}"
                    res = await self.one_run(tag, jobs, procs, timeout)
                    log(
                        f"{self.name} run {r + 1}: {res['jobs_per_s']:.0f} jobs/s "
                        f"(enqueue {res['enqueue_s']:.2f}s, verified={res['verified']})"
                    )
                    results.append(res)
        finally:
            await self.teardown()
        rates = [r["jobs_per_s"] for r in results]
        redis_us = median([r["cpu_us_per_job"]["redis"] for r in results])
        return {
            "jobs_per_s": median(rates),
            "runs": rates,
            "cpu_us_per_job": {"redis": round(redis_us, 1)},
            "verified": all(r["verified"] for r in results),
            "detail": results,
            "procs": self.procs,
            "concurrency": self.concurrency,
            "concurrency_note": self.concurrency_note,
        }

    async def latency(self, calls: int, runs: int) -> dict[str, Any]:
        await self.setup()
        try:
            with Procs() as procs:
                self.start_workers(procs)
                for i in range(30):  # warm-up (also waits for the workers to be up)
                    try:
                        res = await asyncio.wait_for(self.run_and_wait(f"w{i}"), 60)
                    except Exception as exc:  # e.g. SAQ sweeps a job while its workers start
                        log(f"{self.name}: warm-up call failed: {type(exc).__name__}")
                        continue
                    if res != f"w{i}":
                        raise RuntimeError(f"{self.name}: wrong warm-up result {res!r}")
                per_run = []
                for r in range(runs):
                    samples = []
                    for i in range(calls):
                        payload = f"lat-{r}-{i}"
                        t = time.perf_counter()
                        res = await self.run_and_wait(payload)
                        samples.append(time.perf_counter() - t)
                        if res != payload:
                            raise RuntimeError(f"{self.name}: wrong result {res!r}")
                    summary = latency_summary(samples)
                    log(
                        f"{self.name} latency run {r + 1}: p50 {summary['p50_ms']:.3f} ms, "
                        f"p99 {summary['p99_ms']:.3f} ms"
                    )
                    per_run.append(summary)
                    procs.check_alive()
        finally:
            await self.teardown()
        return {
            "p50_ms": median([r["p50_ms"] for r in per_run]),
            "p99_ms": median([r["p99_ms"] for r in per_run]),
            "runs": per_run,
            "verified": True,
            "procs": self.procs,
        }


def main(peer_cls: type[Peer]) -> None:
    p = argparse.ArgumentParser(prog=peer_cls.name)
    p.add_argument("--url", required=True)
    p.add_argument("--mode", choices=["throughput", "latency"], required=True)
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--procs", type=int, default=PROCS)
    p.add_argument("--concurrency", type=int, default=CONCURRENCY)
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()
    os.environ["BENCH_REDIS_URL"] = args.url  # worker modules read it at import
    procs = args.procs if args.mode == "throughput" else 1
    peer = peer_cls(args.url, procs, args.concurrency)
    if args.mode == "throughput":
        result = asyncio.run(peer.throughput(args.jobs, args.runs, args.timeout))
    else:
        result = asyncio.run(peer.latency(args.calls, args.runs))
    emit(result)
