"""What the python job sandbox costs: a python job's run-and-wait with and without bwrap.

Two ``hero-gateway actor --script-type python`` processes, one with the
sandbox (bwrap, and a cgroup per job where the actor may make one) and one
with ``--sandbox off``, each pinned to its own group. Calls alternate between
them (off, on, off, on, ...), so both see the same machine load; each is a
``Supervisor.run`` of ``print('ok')``, timed from submit to result. The
figure to watch is the difference of the medians.

    .venv/bin/python bench/sandbox_bench.py                 # its own redis-server
    .venv/bin/python bench/run.py --only sandbox            # as a section of make bench
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway.config import Config
from gateway.supervisor import Supervisor

from common import OUT, Procs, latency_summary, log, median
from ours import hero_gateway

MODES = ("off", "on")


def actor_argv(url: str, sandbox: str) -> list[str]:
    return [hero_gateway(), "actor", "--script-type", "python", "--group", f"bench-{sandbox}",
            "--instance", f"sandbox-{sandbox}", "--sandbox", sandbox, "--redis-url", url,
            "--log-level", "warning", "--log-dir", str(OUT / "actor-logs")]  # fmt: skip


def spec(sandbox: str, tag: str) -> dict[str, Any]:
    return {"script_type": "python", "script": f"print({tag!r})", "group": f"bench-{sandbox}"}


async def sandbox_latency(url: str, *, calls: int, runs: int) -> dict[str, Any]:
    """``calls`` alternating run-and-waits per run, ``runs`` runs."""
    sup = await Supervisor.connect(Config(redis_url=url))
    try:
        with Procs() as procs:
            for mode in MODES:
                procs.start(actor_argv(url, mode), log=OUT / f"actor-sandbox-{mode}.log")
            for i in range(10):  # warm-up, and waits for both actors to be up
                for mode in MODES:
                    await sup.run(spec(mode, f"w{i}"), wait=30)
            per_run: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
            for r in range(runs):
                samples: dict[str, list[float]] = {mode: [] for mode in MODES}
                for i in range(calls):
                    for mode in MODES:
                        tag = f"{r}-{i}-{mode}"
                        t = time.perf_counter()
                        res = await sup.run(spec(mode, tag), wait=30)
                        samples[mode].append(time.perf_counter() - t)
                        if res["status"] != "finished" or res["output"] != tag + "\n":
                            raise RuntimeError(f"wrong result {res}")
                for mode in MODES:
                    per_run[mode].append(latency_summary(samples[mode]))
                off, on = per_run["off"][-1], per_run["on"][-1]
                log(
                    f"sandbox run {r + 1}: p50 off {off['p50_ms']:.2f} ms, on {on['p50_ms']:.2f} ms"
                    f" (+{on['p50_ms'] - off['p50_ms']:.2f} ms)"
                )
    finally:
        await sup.close()
    out: dict[str, Any] = {}
    for mode in MODES:
        out[mode] = {
            "p50_ms": median([r["p50_ms"] for r in per_run[mode]]),
            "p99_ms": median([r["p99_ms"] for r in per_run[mode]]),
            "runs": per_run[mode],
        }
    out["added_p50_ms"] = out["on"]["p50_ms"] - out["off"]["p50_ms"]
    return out


def table(result: dict[str, Any]) -> list[str]:
    """The markdown rows bench/report.py puts in RESULTS.md."""
    rows = [
        "## Sandbox cost: a python job's run-and-wait with and without bwrap",
        "",
        "Alternating `Supervisor.run` calls of `print(...)` on two python actors, one "
        "with `--sandbox off`; each runs a fresh interpreter per job, and both put it in a "
        "cgroup of its own where the actor can make one (`--sandbox off` moves it in between "
        "fork and exec, the sandbox ahead of the job).",
        "",
        "| actor | p50 ms | p99 ms | runs (p50 / p99) |",
        "| --- | ---: | ---: | --- |",
    ]
    for mode, label in (("off", "`--sandbox off`"), ("on", "sandbox (bwrap + job cgroup)")):
        t = result[mode]
        per = "; ".join(f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f}" for r in t["runs"])
        rows.append(f"| {label} | {t['p50_ms']:.2f} | {t['p99_ms']:.2f} | {per} |")
    return [*rows, "", f"Added by the sandbox (p50): {result['added_p50_ms']:.2f} ms.", ""]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=100, help="calls per actor per run")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--redis-url", help="use this Redis instead of starting one")
    a = p.parse_args()
    server = None
    url = a.redis_url
    if url is None:
        from gateway.embedded_redis import EmbeddedRedis

        OUT.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="redis-", dir=OUT))
        server = EmbeddedRedis(folder, appendonly=False).start()
        url = server.url
    try:
        result = asyncio.run(sandbox_latency(url, calls=a.calls, runs=a.runs))
    finally:
        if server is not None:
            server.stop()
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
