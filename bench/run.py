"""``make bench``: every benchmark in one sitting, on one fresh redis-server.

    .venv/bin/python bench/run.py                  # everything -> bench/RESULTS.md
    .venv/bin/python bench/run.py --targets        # issue 18's targets only (a few minutes)
    .venv/bin/python bench/run.py --quick          # small smoke run -> bench/out/
    .venv/bin/python bench/run.py --only supervisor,gateway
    .venv/bin/python bench/run.py --only peers --runs 1
    .venv/bin/python bench/run.py --profile        # py-spy on our processes too

Sections (``--only`` takes a comma-separated list of these, or ``peers``):
supervisor, supervisor-latency, gateway, archiver, scale, interop, sandbox,
dispatch, lua-cost, path-cost, arq, rq, celery, dramatiq, saq, taskiq,
bullmq, naive, redis-benchmark, aof. ``--targets`` runs supervisor,
supervisor-latency, gateway, archiver, scale, lua-cost, path-cost, bullmq,
naive and aof: every figure issue 18's targets compare, BullMQ beside us,
without the slow Python peers, and what a job costs Redis counted in
instructions, inside the Functions (lua-cost) and over the whole path, ours
beside BullMQ's (path-cost): a machine's load does not move a count.

Each figure is the median of ``--runs`` runs (3 by default). A private
redis-server (AOF off, loopback, free port) is started once and FLUSHALLed
between sections; the ``aof`` section starts a second one with AOF on
(appendfsync everysec, as production runs Redis). The peers run from their
own venv (bench/.venv-peers, created here on first use) and BullMQ from
bench/node (``npm ci``). A full run writes bench/RESULTS.md; a partial or
quick one writes bench/out/RESULTS.md, so it never overwrites the committed
figures. Raw figures go to bench/out/results.json either way. The targets
table (targets.py) is printed at the end and heads the markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import (  # noqa: E402
    OUT,
    loadavg,
    log,
    machine,
    raise_nofile,
    redis_persistence,
    run_child,
)
from sitting import PY_PEERS, merge_earlier, settings, versions  # noqa: E402

PEERS = [*PY_PEERS, "bullmq"]
CEILING = ["naive", "redis-benchmark"]
OURS = [
    "supervisor",
    "supervisor-latency",
    "gateway",
    "archiver",
    "scale",
    "interop",
    "sandbox",
    "dispatch",
    "lua-cost",
    "path-cost",
]
#: Runs on a second redis-server of its own, with AOF on (appendfsync everysec).
AOF = "aof"
ALL = [*OURS, *PEERS, *CEILING, AOF]
#: ``--targets``: what issue 18's targets need, BullMQ beside us, in one short sitting.
TARGETS = [
    "supervisor",
    "supervisor-latency",
    "gateway",
    "archiver",
    "scale",
    "lua-cost",
    "path-cost",
    "bullmq",
    "naive",
    AOF,
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small smoke run (used by a test)")
    p.add_argument("--only", help="comma-separated sections (or 'peers'); default all")
    p.add_argument(
        "--targets",
        action="store_true",
        help="only what issue 18's targets need: " + ", ".join(TARGETS),
    )
    p.add_argument("--runs", type=int, help="runs per figure (default 3; quick 1)")
    p.add_argument("--jobs", type=int, help="jobs per throughput run (default 20000)")
    p.add_argument("--calls", type=int, help="calls per latency run (default 2000)")
    p.add_argument("--clients", type=int, help="scale: WebSocket clients (default 10000)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="our actor's concurrency per process (default 32)",
    )
    p.add_argument(
        "--peer-concurrency",
        type=int,
        default=10,
        help="concurrency per worker process of async/threaded peers (default 10)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="run our actor and gateway under py-spy; summaries in the results",
    )
    p.add_argument("--out", type=Path, help="where to write the markdown results")
    p.add_argument(
        "--json",
        type=Path,
        default=OUT / "results.json",
        help="where to write the raw figures (default bench/out/results.json)",
    )
    p.add_argument("--redis-url", help="use this Redis instead of starting one (it is FLUSHALLed!)")
    p.add_argument(
        "--merge",
        type=Path,
        metavar="JSON",
        help="start from an earlier results.json and replace the sections run now "
        "(e.g. re-running one peer); the merged figures are written",
    )
    p.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="only re-render the markdown from a results.json (e.g. after editing analysis.md)",
    )
    args = p.parse_args(argv)
    args.runs = args.runs or (1 if args.quick else 3)
    args.jobs = args.jobs or (1000 if args.quick else 20000)
    args.calls = args.calls or (100 if args.quick else 2000)
    args.clients = args.clients or (200 if args.quick else 10000)
    if args.targets and args.only:
        p.error("--targets and --only choose the sections two ways; give one")
    names: list[str] = []
    chosen = ",".join(TARGETS) if args.targets else args.only
    for name in (chosen or ",".join(ALL)).split(","):
        name = name.strip()
        if name == "peers":
            names += PEERS + CEILING
        elif name in ALL:
            names.append(name)
        elif name:
            p.error(f"unknown section {name!r}; choose from {', '.join(ALL)} or peers")
    args.sections = list(dict.fromkeys(names))
    full = not args.quick and not chosen
    args.out = args.out or (BENCH / "RESULTS.md" if full else OUT / "RESULTS.md")
    return args


# -- sections ------------------------------------------------------------------------


def section_supervisor(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import ours

    out = {}
    for n in (1, 2):
        prof = OUT / "profile" / f"supervisor-{n}p" if a.profile else None
        out[f"{n}p"] = asyncio.run(
            ours.supervisor_throughput(
                url, jobs=a.jobs, procs_n=n, concurrency=a.concurrency, runs=a.runs, profile=prof
            )
        )
    return out


def section_supervisor_latency(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import ours

    return asyncio.run(ours.supervisor_latency(url, calls=a.calls, runs=a.runs))


def section_gateway(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import ws_bench

    prof = OUT / "profile" / "gateway-throughput" if a.profile else None
    thr = asyncio.run(
        ws_bench.gateway_throughput(
            url, jobs=a.jobs, procs_n=2, concurrency=a.concurrency, runs=a.runs, profile=prof
        )
    )
    flush(url)
    prof = OUT / "profile" / "gateway-latency" if a.profile else None
    lat = asyncio.run(ws_bench.gateway_latency(url, calls=a.calls, runs=a.runs, profile=prof))
    return {"throughput": thr, "latency": lat}


def section_archiver(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import archiver_bench

    return archiver_bench.archiver(url, jobs=a.jobs, concurrency=a.concurrency)


def section_aof(a: argparse.Namespace) -> dict[str, Any]:
    import aof

    return aof.aof_throughput(
        jobs=a.jobs,
        runs=a.runs,
        concurrency=a.concurrency,
        peer_concurrency=a.peer_concurrency,
        with_bullmq="bullmq" in a.sections,
    )


def section_scale(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import scale

    prof = OUT / "profile" / "scale" if a.profile else None
    return asyncio.run(scale.scale(url, clients=a.clients, concurrency=a.concurrency, profile=prof))


def section_interop(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import interop

    if a.quick:
        return asyncio.run(interop.interop(url, idle_s=2.0, pushes=30, calls=50))
    return asyncio.run(interop.interop(url, idle_s=10.0, pushes=200, calls=500))


def section_sandbox(url: str, a: argparse.Namespace) -> dict[str, Any]:
    import sandbox_bench

    return asyncio.run(sandbox_bench.sandbox_latency(url, calls=min(a.calls, 200), runs=a.runs))


def section_dispatch(url: str, a: argparse.Namespace) -> dict[str, Any]:
    from gateway import eventloop

    import dispatch_bench

    calls = 2000 if a.quick else 20000
    return eventloop.run(dispatch_bench.dispatch_cost(calls, a.runs))


def section_lua_cost(url: str, a: argparse.Namespace) -> dict[str, Any]:
    """Instructions per job inside the Functions (callgrind; timed without
    valgrind, and in a quick run). Its own redis-server: the sitting's is not
    run under callgrind."""
    import lua_cost

    if a.quick:
        return lua_cost.cost(64, callgrind=False)
    return lua_cost.cost(1024, callgrind=lua_cost.can_count())


def section_path_cost(url: str, a: argparse.Namespace) -> dict[str, Any]:
    """Redis instructions per job over the whole path, ours and BullMQ's
    (callgrind; skipped without valgrind and in a quick run). Its own
    redis-servers, under callgrind."""
    import path_cost

    if a.quick or not path_cost.can_count():
        return {"skipped": "a quick run" if a.quick else "valgrind not installed"}
    return path_cost.cost(2048)


def section_peer(name: str, url: str, a: argparse.Namespace) -> dict[str, Any]:
    from peers_venv import peer_argv

    out: dict[str, Any] = {}
    for mode in ("throughput", "latency"):
        argv = peer_argv(
            name,
            url,
            mode,
            jobs=a.jobs,
            calls=a.calls,
            runs=a.runs,
            concurrency=a.peer_concurrency,
        )
        if argv is None:
            return {"skipped": "node/npm not installed"}
        try:  # a hung or failed latency run must not cost the throughput figure
            out[mode] = run_child(argv, cwd=BENCH, timeout=1800 if mode == "throughput" else 900)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            log(f"{name} {mode} failed: {exc}")
            out[mode] = {"error": f"{type(exc).__name__}: {exc}"}
        flush(url)
    if all("error" in r for r in out.values()):
        raise RuntimeError(f"{name}: " + "; ".join(r["error"] for r in out.values()))
    return out


def section_redis_benchmark(url: str, a: argparse.Namespace) -> dict[str, Any]:
    from urllib.parse import urlsplit

    from common import median
    from peers import redis_benchmark

    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    requests = 20000 if a.quick else 200000
    runs = [redis_benchmark.run(host, port, requests=requests) for _ in range(a.runs)]
    if "skipped" in runs[0]:
        return runs[0]
    return {
        "lpush_per_s": median([r["lpush_per_s"] for r in runs]),
        "lpop_per_s": median([r["lpop_per_s"] for r in runs]),
        "runs": runs,
    }


def flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushall()
    finally:
        client.close()


def run_section(name: str, url: str, a: argparse.Namespace) -> dict[str, Any]:
    sections: dict[str, Any] = {
        "supervisor": section_supervisor,
        "supervisor-latency": section_supervisor_latency,
        "gateway": section_gateway,
        "archiver": section_archiver,
        "scale": section_scale,
        "interop": section_interop,
        "sandbox": section_sandbox,
        "dispatch": section_dispatch,
        "lua-cost": section_lua_cost,
        "path-cost": section_path_cost,
        "redis-benchmark": section_redis_benchmark,
    }
    if name == AOF:
        return section_aof(a)
    if name in sections:
        result: dict[str, Any] = sections[name](url, a)
        return result
    return section_peer(name, url, a)


def run_sections(
    url: str, a: argparse.Namespace, results: dict[str, Any], conditions: dict[str, Any]
) -> list[str]:
    """Every chosen section in turn, the load before and after each; the failed ones."""
    failed = []
    for name in a.sections:
        flush(url)
        before = loadavg()
        t = time.monotonic()
        log(f"== {name} (load {' / '.join(f'{x:.2f}' for x in before)})")
        try:
            results[name] = run_section(name, url, a)
        except Exception as exc:  # one broken section must not cost the others
            traceback.print_exc()
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            failed.append(name)
        conditions["sections"][name] = {
            "seconds": time.monotonic() - t,
            "load_before": before,
            "load_after": loadavg(),
        }
    return failed


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if a.render is not None:
        from report import render

        saved = json.loads(a.render.read_text())
        profile = OUT / "profile" if saved["meta"].get("profile") else None
        a.out.write_text(render(saved["meta"], saved["results"], profile_dir=profile))
        log(f"wrote {a.out}")
        return 0
    nofile = raise_nofile(65536)
    started = dt.datetime.now(dt.UTC)
    load_before = loadavg()
    results: dict[str, Any] = {}
    conditions: dict[str, Any] = {"sections": {}}
    server = None
    if a.redis_url:
        url = a.redis_url
    else:
        from gateway.embedded_redis import EmbeddedRedis

        server = EmbeddedRedis(
            Path(tempfile.mkdtemp(prefix="redis-", dir=OUT)), appendonly=False
        ).start()
        url = server.url
    persistence = redis_persistence(url)
    log(f"redis-server on {url}; sections: {', '.join(a.sections)}")
    try:
        failed = run_sections(url, a, results, conditions)
    finally:
        if server is not None:
            server.stop()
    if a.merge is not None:
        results = merge_earlier(a.merge, a, results, conditions)
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["run.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(),
        "versions": {**conditions.pop("earlier_versions", {}), **versions(a.sections)},
        "load_before": conditions.pop("load_before", None) or load_before,
        "load_after": loadavg(),
        "nofile": nofile,
        "runs": a.runs,
        "jobs": a.jobs,
        "calls": a.calls,
        "clients": a.clients,
        "concurrency": a.concurrency,
        "peer_concurrency": a.peer_concurrency,
        "quick": a.quick,
        "profile": a.profile,
        "settings": settings(a, persistence),
        **conditions,
    }
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    from report import render
    from targets import summary

    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(render(meta, results, profile_dir=OUT / "profile" if a.profile else None))
    print("\n".join(summary(results, meta["sections"])), flush=True)
    log(f"wrote {a.out}")
    if failed:
        log(f"failed sections: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
