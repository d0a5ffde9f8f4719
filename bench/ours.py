"""Workload 1 on our stack: the supervisor feeding our actor processes.

Throughput: ``jobs`` no-op jobs enqueued through the supervisor (batched
create+start, see submit.py) and completed by ``procs`` actor processes
(``hero-gateway actor --handler noop_handler:noop``); jobs/s from the first
enqueue to the last completion. Every job is then checked: status finished,
output equal to what was submitted, and a ``finished`` entry in the events
stream.

Also the direct run-and-wait latency (``Supervisor.run``, no gateway hop), for
comparison with the WebSocket figure and with the peers' own wait APIs.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from gateway.config import Config
from gateway.supervisor import Supervisor, keys

from common import OUT, Procs, aredis_cpu, cpu_seconds, latency_summary, log, median, python_env
from submit import submit_many

SCRIPT_TYPE = "osis"
BATCH = 500


def hero_gateway() -> str:
    """The ``hero-gateway`` entry point of the venv running this file."""
    exe = Path(sys.executable).parent / "hero-gateway"
    return str(exe) if exe.exists() else "hero-gateway"


def actor_argv(url: str, concurrency: int, instance: str) -> list[str]:
    return [
        hero_gateway(),
        "actor",
        "--script-type",
        SCRIPT_TYPE,
        "--handler",
        "noop_handler:noop",
        "--concurrency",
        str(concurrency),
        "--instance",
        instance,
        "--redis-url",
        url,
        "--log-level",
        "warning",
        "--log-dir",
        str(OUT / "actor-logs"),
    ]


def start_actors(
    procs: Procs, url: str, n: int, concurrency: int, *, profile: Path | None = None
) -> list[int]:
    """``n`` actor processes; with ``profile``, each runs under py-spy (raw stacks)."""
    pids = []
    for i in range(n):
        argv = actor_argv(url, concurrency, f"bench-{os.getpid()}-{i}")
        if profile is not None:
            argv = py_spy_record(profile.with_name(f"{profile.name}-actor{i}.txt"), argv)
        proc = procs.start(argv, env=python_env(), log=OUT / "logs" / f"actor-{i}.log")
        pids.append(proc.pid)
    return pids


def worker_pids(pids: list[int]) -> list[int]:
    """The python processes themselves (under py-spy, the launched pid is py-spy)."""
    from common import children

    out = []
    for pid in pids:
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            exe = ""
        out += children(pid) if exe.endswith("py-spy") else [pid]
    return out


def py_spy_record(out: Path, argv: list[str]) -> list[str]:
    from peers_venv import PEERS_BIN, ensure_peers_venv

    ensure_peers_venv()  # py-spy lives there; --targets alone never made it
    out.parent.mkdir(parents=True, exist_ok=True)
    return [
        str(PEERS_BIN / "py-spy"),
        "record",
        "--format",
        "raw",
        "--rate",
        "250",
        "--nonblocking",
        "--output",
        str(out),
        "--",
        *argv,
    ]


async def wait_actors(sup: Supervisor, n: int, procs: Procs, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while len(await sup.actors(SCRIPT_TYPE)) < n:
        procs.check_alive()
        if time.monotonic() > end:
            raise TimeoutError(f"{n} actors not present after {timeout:.0f}s")
        await asyncio.sleep(0.05)


async def connect_producer(config: Config) -> Supervisor:
    """The supervisor of a process that only submits (or looks at actors): it
    does not tail the events stream, which would cost the bench process CPU
    that the measured processes share."""
    return await Supervisor.connect(config, maintenance=False, watch=False)


def specs(tag: str, n: int) -> list[dict[str, Any]]:
    return [
        {"job_id": f"{tag}-{i:06d}", "script_type": SCRIPT_TYPE, "script": f"out-{tag}-{i}"}
        for i in range(n)
    ]


async def finished_count(client: aioredis.Redis) -> int:
    return int(await client.zcard(keys.index_status("finished")))


async def wait_finished(
    client: aioredis.Redis, target: int, timeout: float, procs: Procs | None = None
) -> float:
    """perf_counter() when the finished index first holds ``target`` jobs (2 ms polls)."""
    end = time.monotonic() + timeout
    polls = 0
    while await finished_count(client) < target:
        polls += 1
        if polls % 500 == 0:
            if procs is not None:
                procs.check_alive()
            if time.monotonic() > end:
                done = await finished_count(client)
                raise TimeoutError(f"only {done}/{target} finished after {timeout:.0f}s")
        await asyncio.sleep(0.002)
    return time.perf_counter()


async def verify(client: aioredis.Redis, jobs: list[dict[str, Any]], since: str) -> dict[str, int]:
    """Every job finished with its own output, and a ``finished`` event for each
    in the events stream after ``since``. Returns the counts of what is wrong.

    The stream keeps about ``HERO_EVENTS_MAXLEN`` entries (100,000: five per
    job, so 20,000 jobs), and a longer run's first events are trimmed before
    this check reads them. A job whose event is not found is then a miss only
    if it finished after the millisecond of the oldest entry left (its hash's
    ``updated_at``, written by the same call as the event; trimming may cut
    inside a millisecond); the others are counted as ``trimmed_events``,
    which is not a problem."""
    bad_status = bad_output = 0
    finished_ms: dict[str, int] = {}
    for start in range(0, len(jobs), 2000):
        chunk = jobs[start : start + 2000]
        async with client.pipeline(transaction=False) as pipe:
            for job in chunk:
                pipe.hmget(keys.job(job["job_id"]), "status", "output", "updated_at")
            rows = await pipe.execute()
        for job, (status, output, updated) in zip(chunk, rows, strict=True):
            bad_status += status != "finished"
            bad_output += output != job["script"]
            if updated:
                finished_ms[job["job_id"]] = int(datetime.fromisoformat(updated).timestamp() * 1000)
    wanted = {job["job_id"] for job in jobs}
    cursor = since
    oldest_ms: int | None = None
    while wanted:
        page = await client.xrange(keys.EVENTS, min=f"({cursor}", count=10000)
        if not page:
            break
        if oldest_ms is None:
            oldest_ms = int(page[0][0].split("-")[0])
        for _, fields in page:
            if fields.get("event") == "finished":
                wanted.discard(fields.get("job_id", ""))
        cursor = page[-1][0]
    trimmed = 0
    if wanted and oldest_ms is not None and oldest_ms > int(since.split("-")[0]):
        trimmed = sum(1 for j in wanted if finished_ms.get(j, oldest_ms + 1) <= oldest_ms)
    return {
        "bad_status": bad_status,
        "bad_output": bad_output,
        "missing_events": len(wanted) - trimmed,
        "trimmed_events": trimmed,
    }


async def events_added(client: aioredis.Redis) -> int:
    """Entries ever added to the events stream (XINFO STREAM ``entries-added``):
    unlike XLEN, not lowered by the stream's MAXLEN trimming, so a difference
    across a run is the events that run wrote."""
    try:
        info = await client.xinfo_stream(keys.EVENTS)
    except aioredis.ResponseError:  # no stream yet
        return 0
    return int(info["entries-added"])


async def last_event_id(client: aioredis.Redis) -> str:
    newest = await client.xrevrange(keys.EVENTS, count=1)
    return str(newest[0][0]) if newest else "0-0"


class CpuMeter:
    """CPU seconds per job of each side of a run: the producer (this process,
    including its 2 ms completion polls), the workers, the gateway, Redis.
    Less sensitive to other load on the machine than wall-clock rates."""

    def __init__(self, probe: aioredis.Redis, workers: list[int], gateway: int | None = None):
        self.probe, self.workers, self.gateway = probe, workers, gateway

    async def read(self) -> dict[str, float]:
        return {
            "producer": time.process_time(),
            "workers": sum(cpu_seconds(p) for p in self.workers),
            "gateway": cpu_seconds(self.gateway) if self.gateway else 0.0,
            "redis": await aredis_cpu(self.probe),
        }

    @staticmethod
    def per_job(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
        us = {k: (after[k] - before[k]) / n * 1e6 for k in before}
        us["total"] = sum(us.values())
        return {k: round(v, 1) for k, v in us.items()}


async def one_throughput_run(
    sup: Supervisor,
    probe: aioredis.Redis,
    tag: str,
    n: int,
    procs: Procs,
    timeout: float,
    cpu: CpuMeter | None = None,
) -> dict[str, Any]:
    jobs = specs(tag, n)
    base = await finished_count(probe)
    since = await last_event_id(probe)
    cpu = cpu or CpuMeter(probe, [])
    events0 = await events_added(probe)
    cpu0 = await cpu.read()
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        await submit_many(sup, jobs[start : start + BATCH])
    t_enq = time.perf_counter()
    t_end = await wait_finished(probe, base + n, timeout, procs)
    cpu1 = await cpu.read()
    events = await events_added(probe) - events0
    problems = await verify(probe, jobs, since)
    return run_figures(n, t0, t_enq, t_end, CpuMeter.per_job(cpu0, cpu1, n), events, problems)


def run_figures(
    n: int,
    t0: float,
    t_enq: float,
    t_end: float,
    cpu_us: dict[str, float],
    events: int,
    problems: dict[str, int],
) -> dict[str, Any]:
    """One throughput run's figures (``t0``..``t_end`` from perf_counter());
    ``events`` written to the events stream in that window."""
    elapsed = t_end - t0
    return {
        "jobs": n,
        "elapsed_s": elapsed,
        "enqueue_s": t_enq - t0,
        "jobs_per_s": n / elapsed,
        "events": events,
        "events_per_s": events / elapsed,
        "cpu_us_per_job": cpu_us,
        "verified": not any(v for k, v in problems.items() if k != "trimmed_events"),
        **problems,
    }


async def supervisor_throughput(
    url: str,
    *,
    jobs: int,
    procs_n: int,
    concurrency: int,
    runs: int,
    profile: Path | None = None,
) -> dict[str, Any]:
    config = Config(redis_url=url, log_dir=str(OUT / "actor-logs"))
    sup = await connect_producer(config)
    probe = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        with Procs() as procs:
            pids = start_actors(procs, url, procs_n, concurrency, profile=profile)
            await wait_actors(sup, procs_n, procs)
            warm = specs(f"warm{procs_n}-{uuid.uuid4().hex[:6]}", 200 * procs_n)
            base = await finished_count(probe)
            await submit_many(sup, warm)
            await wait_finished(probe, base + len(warm), 60, procs)
            results = []
            for r in range(runs):
                tag = f"s{procs_n}p-{uuid.uuid4().hex[:6]}-{r}"
                res = await one_throughput_run(
                    sup,
                    probe,
                    tag,
                    jobs,
                    procs,
                    timeout=300,
                    cpu=CpuMeter(probe, worker_pids(pids)),
                )
                log(
                    f"supervisor {procs_n}p run {r + 1}: {res['jobs_per_s']:.0f} jobs/s "
                    f"(enqueue {res['enqueue_s']:.2f}s, verified={res['verified']})"
                )
                results.append(res)
    finally:
        await probe.aclose()
        await sup.close()
    return summarize(results, procs=procs_n, concurrency=concurrency)


def summarize(results: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    rates = [r["jobs_per_s"] for r in results]
    cpu_runs = [r["cpu_us_per_job"] for r in results if "cpu_us_per_job" in r]
    cpu = {k: round(median([c[k] for c in cpu_runs]), 1) for k in cpu_runs[0]} if cpu_runs else {}
    return {
        "jobs_per_s": median(rates),
        "events_per_s": median([r.get("events_per_s", 0.0) for r in results]),
        "cpu_us_per_job": cpu,
        "runs": rates,
        "verified": all(r["verified"] for r in results),
        "detail": results,
        **extra,
    }


async def supervisor_latency(url: str, *, calls: int, runs: int) -> dict[str, Any]:
    """``Supervisor.run`` (create+start+wait) ``calls`` times in sequence, 1 actor."""
    config = Config(redis_url=url, log_dir=str(OUT / "actor-logs"))
    sup = await Supervisor.connect(config)
    try:
        with Procs() as procs:
            start_actors(procs, url, 1, 1)
            await wait_actors(sup, 1, procs)
            for i in range(50):  # warm-up
                await sup.run({"script_type": SCRIPT_TYPE, "script": f"w{i}"}, wait=10)
            per_run = []
            for r in range(runs):
                samples = []
                for i in range(calls):
                    script = f"lat-{r}-{i}"
                    t = time.perf_counter()
                    res = await sup.run({"script_type": SCRIPT_TYPE, "script": script}, wait=10)
                    samples.append(time.perf_counter() - t)
                    if res["status"] != "finished" or res["output"] != script:
                        raise RuntimeError(f"wrong result {res}")
                summary = latency_summary(samples)
                log(
                    f"supervisor latency run {r + 1}: p50 {summary['p50_ms']:.3f} ms, "
                    f"p99 {summary['p99_ms']:.3f} ms"
                )
                per_run.append(summary)
    finally:
        await sup.close()
    return latency_result(per_run)


def latency_result(per_run: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "p50_ms": median([r["p50_ms"] for r in per_run]),
        "p99_ms": median([r["p99_ms"] for r in per_run]),
        "runs": per_run,
        "verified": True,
    }
