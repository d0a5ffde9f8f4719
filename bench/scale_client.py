"""One client process of the scale benchmark: many WebSockets to the gateway.

    python bench/scale_client.py --port P --clients 2500 --mode waiters --tag w0

``waiters``: each socket sends one ``job.run`` (wait up to ``--wait`` s) and
waits for its result. ``subscribers``: each socket creates a job, subscribes
to its events (``job.subscribe`` with its id), starts it, and waits for its
``finished`` event. Prints ``READY`` once every socket has sent its calls,
then one BENCH-RESULT line with counts and first/last arrival times
(time.time(), comparable across processes). Bounded: gives up after
``--deadline`` seconds, whatever is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import time
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from common import emit

SCRIPT_TYPE = "osis"


class Tally:
    def __init__(self) -> None:
        self.results = 0
        self.wrong = 0
        self.events = 0
        self.finished_events = 0
        self.errors: list[str] = []
        self.first: float | None = None
        self.last: float | None = None
        self.times: list[float] = []  # arrival of every result and event (time.time())

    def arrived(self) -> None:
        now = time.time()
        self.first = now if self.first is None else self.first
        self.last = now
        self.times.append(round(now, 4))


async def waiter(
    ws: ClientConnection, job_id: str, wait: float, tally: Tally, sent: asyncio.Event
) -> None:
    await ws.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "job.run",
                "params": {
                    "job": {"job_id": job_id, "script_type": SCRIPT_TYPE, "script": job_id},
                    "wait": wait,
                },
            }
        )
    )
    sent.set()
    reply = json.loads(await ws.recv())
    tally.arrived()
    result = reply.get("result") or {}
    if result.get("status") == "finished" and result.get("output") == job_id:
        tally.results += 1
    else:
        tally.wrong += 1
        if len(tally.errors) < 3:
            tally.errors.append(json.dumps(reply)[:300])


async def call(
    ws: ClientConnection, rid: int, method: str, params: dict[str, Any], tally: Tally
) -> Any:
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
    while True:
        msg = json.loads(await ws.recv())
        if msg.get("method") == "job.event":  # may come before the reply (e.g. `dispatched`)
            tally.events += 1
            tally.arrived()
            continue
        if msg.get("id") == rid:
            if "error" in msg:
                raise RuntimeError(f"{method}: {msg['error']}")
            return msg["result"]


async def subscriber(ws: ClientConnection, job_id: str, tally: Tally, sent: asyncio.Event) -> None:
    job = {"job_id": job_id, "script_type": SCRIPT_TYPE, "script": job_id}
    await call(ws, 1, "job.create", {"job": job}, tally)
    await call(ws, 2, "job.subscribe", {"job_ids": [job_id]}, tally)
    await call(ws, 3, "job.start", {"job_id": job_id}, tally)
    sent.set()
    while True:
        msg = json.loads(await ws.recv())
        if msg.get("method") != "job.event":
            continue
        tally.events += 1
        tally.arrived()
        event = msg["params"]["event"]
        if event.get("status") == "finished" and event.get("job_id") == job_id:
            tally.finished_events += 1
            return


async def client(
    args: argparse.Namespace,
    i: int,
    tally: Tally,
    gate: asyncio.Semaphore,
    sent: asyncio.Event,
    connected: list[int],
) -> None:
    job_id = f"{args.tag}-{i:05d}"
    try:
        async with gate:
            ws = await connect(
                f"ws://127.0.0.1:{args.port}/ws",
                ping_interval=None,
                open_timeout=60,
                compression=None,
            )
    except BaseException:
        sent.set()  # counts as settled: READY must not wait for a client that failed
        raise
    connected[0] += 1
    try:
        if args.mode == "waiters":
            await waiter(ws, job_id, args.wait, tally, sent)
        else:
            await subscriber(ws, job_id, tally, sent)
    finally:
        sent.set()
        await ws.close()


async def main(args: argparse.Namespace) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tally = Tally()
    gate = asyncio.Semaphore(64)  # handshakes in flight
    connected = [0]
    sent_events = [asyncio.Event() for _ in range(args.clients)]
    tasks = [
        asyncio.create_task(client(args, i, tally, gate, sent_events[i], connected))
        for i in range(args.clients)
    ]
    t0 = time.time()
    ready = asyncio.gather(*(e.wait() for e in sent_events))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ready, args.deadline)
    print(f"READY {connected[0]} {time.time() - t0:.2f}", flush=True)
    remaining = max(1.0, args.deadline - (time.time() - t0))
    finished, pending = await asyncio.wait(tasks, timeout=remaining)
    for task in pending:
        task.cancel()
    failures = [t.exception() for t in finished if not t.cancelled() and t.exception()]
    emit(
        {
            "mode": args.mode,
            "clients": args.clients,
            "connected": connected[0],
            "results": tally.results,
            "wrong": tally.wrong,
            "events": tally.events,
            "finished_events": tally.finished_events,
            "first": tally.first,
            "last": tally.last,
            "unfinished": len(pending),
            "failures": len(failures),
            "times": tally.times,
            "failure_sample": [repr(f)[:200] for f in failures[:3]] + tally.errors,
        }
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--mode", choices=["waiters", "subscribers"], required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--wait", type=float, default=300)
    p.add_argument("--deadline", type=float, default=240)
    asyncio.run(main(p.parse_args()))
    sys.exit(0)
