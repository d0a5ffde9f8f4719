"""What routing each call through jsonrpcserver costs, next to our own steps alone.

In one process, on the real contract's ``job.status`` (its access check, its
params check) with a handler that answers at once, so what is timed is the
dispatching and nothing behind it:

- ``ours``: the method as registered with jsonrpcserver, called directly:
  access, params, handler, result mapped to ``Success`` (the steps the
  dispatcher took on its own before jsonrpcserver routed);
- ``routed``: ``Dispatcher.dispatch`` of the same parsed Request, i.e. the
  above plus jsonrpcserver's routing and response building;
- ``frame``: a whole text frame in and out (``handle_frame``): parse, route,
  encode;
- ``batch``: a frame holding a batch of ``BATCH`` such calls, the shape the
  WebSocket throughput run sends, timed per element.

The paths alternate in blocks within each run, so machine noise hits them
alike. ``bench/run.py --only dispatch,gateway`` puts the added cost next to a
WebSocket ``job.run`` measured in the same sitting.

    .venv/bin/python bench/dispatch_bench.py --calls 20000 --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway import eventloop
from gateway.rpc.access import Access
from gateway.rpc.context import ANONYMOUS, CallContext
from gateway.rpc.dispatch import Dispatcher
from gateway.rpc.messages import Request, Success
from gateway.rpc.protocol import handle_frame

PARAMS = {"job_id": "bench-job-1"}
BATCH = 32  # elements per batch frame, as bench/ws_bench.py sends them
FRAME = json.dumps({"jsonrpc": "2.0", "method": "job.status", "params": PARAMS, "id": 1})
BATCH_FRAME = json.dumps(
    [
        {"jsonrpc": "2.0", "method": "job.status", "params": {"job_id": f"bench-job-{i}"}, "id": i}
        for i in range(BATCH)
    ]
)
BLOCK = 1000


async def _status(params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    return {"job_id": params["job_id"], "status": "finished"}


def _paths() -> dict[str, Callable[[], Awaitable[Any]]]:
    dispatcher = Dispatcher({"job.status": _status}, access=Access())
    ctx = CallContext(ANONYMOUS)
    request = Request("job.status", PARAMS, 1)
    method = dispatcher.registered["job.status"]

    async def ours() -> Any:
        return await method(ctx, **PARAMS)

    async def routed() -> Any:
        answer = await dispatcher.dispatch(request, ctx)
        assert isinstance(answer, Success), answer
        return answer

    async def frame() -> Any:
        return await handle_frame(FRAME, dispatcher, ctx)

    async def batch() -> Any:
        return await handle_frame(BATCH_FRAME, dispatcher, ctx)

    return {"ours": ours, "routed": routed, "frame": frame, "batch": batch}


#: Calls made by one run of each path.
PER_RUN = {"batch": BATCH}


async def _time(path: Callable[[], Awaitable[Any]], n: int, per_run: int = 1) -> float:
    """Seconds for ``n`` calls (``n // per_run`` runs of a path making ``per_run``)."""
    started = time.perf_counter()
    for _ in range(max(1, n // per_run)):
        await path()
    return time.perf_counter() - started


async def dispatch_cost(calls: int, runs: int) -> dict[str, Any]:
    """µs per call of each path: the median over ``runs``, and every run."""
    paths = _paths()
    for name, path in paths.items():  # warm up (schemas compiled, caches filled)
        await _time(path, min(calls, BLOCK), PER_RUN.get(name, 1))
    per_run: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(runs):
        spent = dict.fromkeys(paths, 0.0)
        left = calls
        while left > 0:
            n = min(BLOCK, left)
            for name, path in paths.items():
                spent[name] += await _time(path, n, PER_RUN.get(name, 1))
            left -= n
        for name in paths:
            per_run[name].append(spent[name] / calls * 1e6)
    us = {name: statistics.median(v) for name, v in per_run.items()}
    return {
        "calls": calls,
        "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
        "us": us,
        "runs_us": per_run,
        "added_us": us["routed"] - us["ours"],
    }


def table(result: dict[str, Any], job_run_p50_ms: float | None) -> list[str]:
    """The markdown rows bench/report.py puts in RESULTS.md."""
    us = result["us"]
    rows = [
        "## Dispatch cost: jsonrpcserver routing each call",
        "",
        f"{result['calls']} `job.status` calls per path and run, in one process on "
        f"{result['loop']} (bench/dispatch_bench.py), with a handler that answers at once.",
        "",
        "| path | µs per call | runs |",
        "| --- | ---: | --- |",
    ]
    labels = {
        "ours": "our steps alone (access, params, handler)",
        "routed": "the same, routed by jsonrpcserver",
        "frame": "a whole text frame (parse, route, encode)",
        "batch": f"a batch frame of {BATCH}, per element",
    }
    for name, label in labels.items():
        runs = "; ".join(f"{v:.1f}" for v in result["runs_us"][name])
        rows.append(f"| {label} | {us[name]:.1f} | {runs} |")
    added = f"Added by jsonrpcserver: {result['added_us']:.1f} µs per call"
    if job_run_p50_ms:
        share = result["added_us"] / (job_run_p50_ms * 1000) * 100
        added += f", {share:.1f} % of a WebSocket `job.run` (p50 {job_run_p50_ms:.2f} ms)"
    return [*rows, "", added + ".", ""]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000, help="calls per path per run")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--event-loop", default="auto", help="auto, uvloop or asyncio")
    p.add_argument("--job-run-ms", type=float, help="a WebSocket job.run p50 to compare with")
    a = p.parse_args()
    result = eventloop.run(dispatch_cost(a.calls, a.runs), a.event_loop)
    print("\n".join(table(result, a.job_run_ms)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
