"""Workload 2: the same jobs through the gateway's WebSocket JSON-RPC.

- throughput: ``jobs`` no-op jobs sent as JSON-RPC batches of ``job.create``
  then batches of ``job.start`` over a few WebSockets, completed by 2 actor
  processes; jobs/s from the first frame sent to the last completion, every
  job verified like workload 1;
- latency: ``calls`` sequential ``job.run`` (create, start, wait) on one
  WebSocket, 1 actor process; p50/p99 of the round trip seen by the client.

The gateway runs as its own ``hero-gateway serve`` process on a free
loopback port.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import urllib.request
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from gateway.config import Config
from gateway.embedded_redis import free_port
from websockets.asyncio.client import ClientConnection, connect

from common import OUT, Procs, latency_summary, log, python_env
from ours import (
    SCRIPT_TYPE,
    CpuMeter,
    connect_producer,
    events_added,
    finished_count,
    hero_gateway,
    last_event_id,
    latency_result,
    py_spy_record,
    run_figures,
    specs,
    start_actors,
    summarize,
    verify,
    wait_actors,
    wait_finished,
    worker_pids,
)

BATCH = 32  # elements per JSON-RPC batch: create and start batches both fit max_inflight (64)
CONNECTIONS = 4


def gateway_argv(url: str, port: int) -> list[str]:
    return [
        hero_gateway(),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--redis-url",
        url,
        "--log-level",
        "warning",
        "--ping-interval",
        "0",
    ]


def start_gateway(
    procs: Procs, url: str, *, profile: Path | None = None, extra_env: dict[str, str] | None = None
) -> tuple[int, int]:
    """A ``hero-gateway serve`` process; (pid, port) once /healthz answers."""
    port = free_port()
    argv = gateway_argv(url, port)
    if profile is not None:
        argv = py_spy_record(profile.with_name(f"{profile.name}-gateway.txt"), argv)
    proc = procs.start(
        argv, env={**python_env(), **(extra_env or {})}, log=OUT / "logs" / "gateway.log"
    )
    end = time.monotonic() + 30
    while True:
        procs.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > end:
            raise TimeoutError("gateway not healthy after 30s")
        time.sleep(0.1)
    return gateway_pid(proc.pid, port), port


def gateway_pid(launched: int, port: int) -> int:
    """The pid that serves ``port`` (py-spy runs the gateway as its child)."""
    import subprocess

    out = subprocess.run(
        ["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=False
    ).stdout
    for part in out.split("pid=")[1:]:
        return int(part.split(",", 1)[0])
    return launched


class Rpc:
    """A tiny JSON-RPC client on one WebSocket: requests and batches matched by id."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            msg = json.loads(raw)
            if isinstance(msg, list):
                first = min(m["id"] for m in msg)
                fut = self._pending.pop(first, None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
            elif "id" in msg and msg["id"] is not None:
                fut = self._pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
            else:
                self.notifications.append(msg)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        )
        reply = await fut
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def batch(self, method: str, params: list[dict[str, Any]]) -> list[Any]:
        ids = [next(self._ids) for _ in params]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ids[0]] = fut
        frame = [
            {"jsonrpc": "2.0", "id": i, "method": method, "params": p}
            for i, p in zip(ids, params, strict=True)
        ]
        await self.ws.send(json.dumps(frame))
        replies = sorted(await fut, key=lambda m: m["id"])
        errors = [r["error"] for r in replies if "error" in r]
        if errors:
            raise RuntimeError(f"{method} batch: {len(errors)} errors, first {errors[0]}")
        return [r["result"] for r in replies]

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


@asynccontextmanager
async def rpc_client(port: int):  # type: ignore[no-untyped-def]
    async with connect(f"ws://127.0.0.1:{port}/ws", max_size=2**24, ping_interval=None) as ws:
        client = Rpc(ws)
        try:
            yield client
        finally:
            client._reader.cancel()


async def ws_throughput_run(
    port: int, probe: aioredis.Redis, tag: str, n: int, procs: Procs, cpu: CpuMeter | None = None
) -> dict[str, Any]:
    jobs = specs(tag, n)
    chunks = [jobs[i : i + BATCH] for i in range(0, n, BATCH)]
    base = await finished_count(probe)
    since = await last_event_id(probe)
    clients = []
    for _ in range(CONNECTIONS):
        ws = await connect(f"ws://127.0.0.1:{port}/ws", max_size=2**24, ping_interval=None)
        clients.append(Rpc(ws))
    queue = iter(chunks)

    async def feed(rpc: Rpc) -> None:
        for chunk in queue:
            await rpc.batch("job.create", [{"job": job} for job in chunk])
            await rpc.batch("job.start", [{"job_id": job["job_id"]} for job in chunk])

    cpu = cpu or CpuMeter(probe, [])
    try:
        events0 = await events_added(probe)
        cpu0 = await cpu.read()
        t0 = time.perf_counter()
        await asyncio.gather(*(feed(c) for c in clients))
        t_enq = time.perf_counter()
        t_end = await wait_finished(probe, base + n, 300, procs)
        cpu1 = await cpu.read()
        events = await events_added(probe) - events0
    finally:
        for c in clients:
            await c.close()
    problems = await verify(probe, jobs, since)
    return run_figures(n, t0, t_enq, t_end, CpuMeter.per_job(cpu0, cpu1, n), events, problems)


async def gateway_throughput(
    url: str,
    *,
    jobs: int,
    procs_n: int,
    concurrency: int,
    runs: int,
    profile: Path | None = None,
) -> dict[str, Any]:
    config = Config(redis_url=url)
    sup = await connect_producer(config)  # only to see actors
    probe = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        with Procs() as procs:
            gw_pid, port = start_gateway(procs, url, profile=profile)
            pids = start_actors(procs, url, procs_n, concurrency, profile=profile)
            await wait_actors(sup, procs_n, procs)
            await ws_throughput_run(port, probe, f"gwarm-{uuid.uuid4().hex[:6]}", 640, procs)
            cpu = CpuMeter(probe, worker_pids(pids), gw_pid)
            results = []
            for r in range(runs):
                tag = f"g{procs_n}p-{uuid.uuid4().hex[:6]}-{r}"
                res = await ws_throughput_run(port, probe, tag, jobs, procs, cpu)
                log(
                    f"gateway {procs_n}p run {r + 1}: {res['jobs_per_s']:.0f} jobs/s "
                    f"(enqueue {res['enqueue_s']:.2f}s, verified={res['verified']})"
                )
                results.append(res)
    finally:
        await probe.aclose()
        await sup.close()
    return summarize(
        results, procs=procs_n, concurrency=concurrency, connections=CONNECTIONS, batch=BATCH
    )


async def gateway_latency(
    url: str, *, calls: int, runs: int, profile: Path | None = None
) -> dict[str, Any]:
    config = Config(redis_url=url)
    sup = await connect_producer(config)
    try:
        with Procs() as procs:
            _, port = start_gateway(procs, url, profile=profile)
            start_actors(procs, url, 1, 1, profile=profile)
            await wait_actors(sup, 1, procs)
            async with rpc_client(port) as rpc:
                for i in range(50):  # warm-up
                    await rpc.call(
                        "job.run",
                        {"job": {"script_type": SCRIPT_TYPE, "script": f"w{i}"}, "wait": 10},
                    )
                per_run = []
                for r in range(runs):
                    samples = []
                    for i in range(calls):
                        script = f"lat-{r}-{i}"
                        params = {"job": {"script_type": SCRIPT_TYPE, "script": script}, "wait": 10}
                        t = time.perf_counter()
                        res = await rpc.call("job.run", params)
                        samples.append(time.perf_counter() - t)
                        if res["status"] != "finished" or res["output"] != script:
                            raise RuntimeError(f"wrong result {res}")
                    summary = latency_summary(samples)
                    log(
                        f"gateway latency run {r + 1}: p50 {summary['p50_ms']:.3f} ms, "
                        f"p99 {summary['p99_ms']:.3f} ms"
                    )
                    per_run.append(summary)
    finally:
        await sup.close()
    return latency_result(per_run)
