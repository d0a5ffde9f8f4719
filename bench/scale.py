"""Workload 3: many concurrent WebSocket clients on one gateway process.

Half the clients wait on a job (``job.run`` with a long wait), half subscribe
to their own job's events (``job.subscribe`` by id) and wait for its
``finished`` event. Clients are spread over a few client processes
(scale_client.py). No actor runs while they connect, so every client is
waiting at once; then the bench reads, with all of them waiting:

- the gateway's RSS (VmRSS; peak VmHWM later),
- the Redis connections held (CLIENT LIST: every client but the bench's own
  probe; no actor is connected yet, so all of them are the gateway's),

then starts 2 actor processes and measures how fast results and events reach
the clients: results/s to waiters, job.event notifications/s to subscribers.
Loopback only, bounded in time (every client process gives up by itself).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from gateway.supervisor import keys

from common import BENCH, OUT, Procs, log, parse_result, python_env, raise_nofile, rss_bytes
from ours import start_actors
from ws_bench import start_gateway

CLIENT_PROCS = 4


def _hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


async def connections(probe: aioredis.Redis) -> dict[str, Any]:
    me = int(await probe.client_id())
    clients = [c for c in await probe.client_list() if int(c["id"]) != me]
    by_name: dict[str, int] = {}
    for c in clients:
        by_name[c.get("name") or "(unnamed)"] = by_name.get(c.get("name") or "(unnamed)", 0) + 1
    return {"total": len(clients), "by_name": by_name}


async def scale(
    url: str,
    *,
    clients: int,
    deadline: float = 420.0,
    actor_procs: int = 2,
    concurrency: int = 32,
    profile: Path | None = None,
) -> dict[str, Any]:
    raise_nofile(65536)
    probe = aioredis.Redis.from_url(url, decode_responses=True)
    waiters = clients // 2
    subscribers = clients - waiters
    with Procs() as procs:
        # the gateway turns away connections past --max-connections (4096 by
        # default): room for every client, the probes and the bench's own
        room = {"HERO_MAX_CONNECTIONS": str(clients + 64)}
        gw_pid, port = start_gateway(procs, url, profile=profile, extra_env=room)
        rss_idle = rss_bytes(gw_pid)
        per = [
            (m, n)
            for m, total in (("waiters", waiters), ("subscribers", subscribers))
            for n in _split(total, CLIENT_PROCS // 2)
        ]
        children = []
        t0 = time.time()
        for i, (mode, n) in enumerate(per):
            argv = [
                sys.executable,
                str(BENCH / "scale_client.py"),
                "--port",
                str(port),
                "--clients",
                str(n),
                "--mode",
                mode,
                "--tag",
                f"scale-{mode[0]}{i}",
                "--deadline",
                str(deadline),
            ]
            env = {**os.environ, **python_env()}
            children.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env))
        try:
            ready_lines = [c.stdout.readline().strip() for c in children]  # type: ignore[union-attr]
            connected = sum(
                int(line.split()[1]) for line in ready_lines if line.startswith("READY")
            )
            t_ready = time.time() - t0
            # every job is dispatched (waiters' hero_submit_many ran after their wait registered)
            end = time.monotonic() + 60
            while await probe.zcard(keys.index_status("dispatched")) < clients:
                if time.monotonic() > end:
                    break
                await asyncio.sleep(0.1)
            dispatched = int(await probe.zcard(keys.index_status("dispatched")))
            await asyncio.sleep(1.0)  # let the gateway settle
            rss_waiting = rss_bytes(gw_pid)
            conns = await connections(probe)
            log(
                f"scale: {connected} clients connected in {t_ready:.1f}s; gateway RSS "
                f"{rss_waiting / 2**20:.0f} MiB; redis connections {conns['total']}"
            )
            t_actors = time.time()
            start_actors(procs, url, actor_procs, concurrency)
            outs = [parse_result(c.communicate(timeout=deadline + 30)[0]) for c in children]
        finally:
            for c in children:
                if c.poll() is None:
                    c.kill()
                    c.wait()
        rss_peak = _hwm(gw_pid)
    await probe.aclose()
    w = [o for o in outs if o["mode"] == "waiters"]
    s = [o for o in outs if o["mode"] == "subscribers"]
    # what arrived once the actors started (subscribers saw `dispatched` while waiting)
    t_results = sorted(t for o in w for t in o["times"] if t >= t_actors)
    t_events = sorted(t for o in s for t in o["times"] if t >= t_actors)
    results = sum(o["results"] for o in w)
    events_after = len(t_events)
    events = sum(o["events"] for o in s)
    return {
        "clients": clients,
        "connected": connected,
        "connect_s": t_ready,
        "dispatched_while_waiting": dispatched,
        "gateway_rss_idle_mib": rss_idle / 2**20,
        "gateway_rss_mib": rss_waiting / 2**20,
        "gateway_rss_peak_mib": rss_peak / 2**20,
        "redis_connections": conns["total"],
        "redis_connections_by_name": conns["by_name"],
        "results": results,
        "results_per_s": _rate(t_results),
        "events": events,
        "events_after_start": events_after,
        "events_per_s": _rate(t_events),
        "actor_start_to_first_s": min([*t_results, *t_events], default=t_actors) - t_actors,
        "finished_events": sum(o["finished_events"] for o in s),
        "wrong": sum(o["wrong"] for o in w),
        "unfinished": sum(o["unfinished"] for o in outs),
        "failures": sum(o["failures"] for o in outs),
        "failure_sample": [f for o in outs for f in o["failure_sample"]][:5],
        "verified": results == waiters and sum(o["finished_events"] for o in s) == subscribers,
    }


def _rate(times: list[float]) -> float:
    """Arrivals per second between the first and the last arrival."""
    if len(times) < 2 or times[-1] <= times[0]:
        return 0.0
    return (len(times) - 1) / (times[-1] - times[0])


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


if __name__ == "__main__":
    import json
    import tempfile

    from gateway.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(
        Path(tempfile.mkdtemp(dir=OUT if OUT.exists() else None)), appendonly=False
    ).start()
    try:
        prof = OUT / "profile" / "scale" if len(sys.argv) > 2 else None
        print(
            json.dumps(
                asyncio.run(scale(server.url, clients=int(sys.argv[1]), profile=prof)), indent=1
            )
        )
    finally:
        server.stop()
