"""Throughput of the events archive and of the Spark pipeline.

The figures are wall-clock on whatever else the machine is doing: the load average
is printed before and after each size so a noisy run can be told from a slow one.

For each size N (events):

1. archive: a private redis-server (``EmbeddedRedis``, free port, AOF off) gets N
   synthetic events (an M/M/c simulation, 4 events per job) by pipelined XADD; then
   ``Archiver.run(once=True)`` drains the stream into Parquet. Reported: archive
   events/s (XREADGROUP + Parquet write + fsync + rename + XACK), and the XADD rate
   for context.
2. pipeline: ``analytics.run`` + the report on the files just archived, on the
   given master (default local[2]), in one SparkSession started beforehand (JVM
   start reported separately) and warmed up on a small run so the first size does not
   pay one-off JIT/codegen costs.

Usage::

    .venv/bin/python bench/pipeline_bench.py                 # 100k and 1M
    .venv/bin/python bench/pipeline_bench.py --sizes 100k,1M,5M --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow
import pyspark
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.embedded_redis import EmbeddedRedis  # noqa: E402
from gateway.pipeline import analytics, report, synth  # noqa: E402
from gateway.pipeline.archive import ArchiveOptions, Archiver  # noqa: E402
from gateway.pipeline.model import PipelineParams  # noqa: E402
from gateway.pipeline.spark import SparkOptions, session  # noqa: E402
from gateway.pipeline.store import event_files  # noqa: E402

EVENTS_PER_JOB = 4  # created, dispatched, started, finished (no errors in the bench)


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    return int(float(number) * scale)


def human(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def command_version(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (done.stdout + done.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def conditions(args: argparse.Namespace) -> dict[str, Any]:
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "memory": mem,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "redis-py": redis.__version__,
        "redis-server": command_version(["redis-server", "--version"]),
        "java": command_version(["java", "-version"]),
        "load_average_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "master": args.master,
        "archive_batch": args.batch,
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
    }


def spec_for(events: int, seed: int) -> synth.SynthSpec:
    jobs = max(1, events // EVENTS_PER_JOB)
    # 8 actors at 75 % utilisation; the rate only sets how long the simulated period is.
    return synth.SynthSpec(
        jobs=jobs, rate=24.0, service_mean=0.25, actors=8, seed=seed, start_ms=1_700_000_000_000
    )


def bench_archive(n: int, work: Path, batch: int) -> dict[str, Any]:
    spec = spec_for(n, seed=n)
    t0 = time.perf_counter()
    events, totals = synth.simulate(spec)
    simulate_s = time.perf_counter() - t0
    server = EmbeddedRedis(work / "redis", appendonly=False).start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        t0 = time.perf_counter()
        synth.xadd(spec, events, client, chunk=10_000)
        xadd_s = time.perf_counter() - t0
        del events
        out = work / "events"
        archiver = Archiver(client, ArchiveOptions(out=out, consumer="bench", batch=batch))
        t0 = time.perf_counter()
        stats = archiver.run(once=True)
        archive_s = time.perf_counter() - t0
        assert stats.events == totals.events, (stats.events, totals.events)
        client.flushall()
    finally:
        client.close()
        server.stop()
        shutil.rmtree(work / "redis", ignore_errors=True)
    size = sum(f.stat().st_size for f in event_files(out))
    return {
        "events": totals.events,
        "simulate_s": simulate_s,
        "xadd_s": xadd_s,
        "xadd_per_s": totals.events / xadd_s,
        "archive_s": archive_s,
        "archive_per_s": totals.events / archive_s,
        "files": stats.files,
        "parquet_mb": size / 1e6,
    }


def bench_pipeline(spark: Any, events_dir: Path, out: Path) -> dict[str, Any]:
    params = PipelineParams(events=str(events_dir), out=out, slo_wait=1.0, bucket_seconds=3600)
    t0 = time.perf_counter()
    result = analytics.run(spark, params)
    built = report.build(result)
    report.write(built, out)
    seconds = time.perf_counter() - t0
    return {"pipeline_s": seconds, "pipeline_per_s": result.read / seconds, "jobs": result.jobs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="100k,1M",
        help="comma-separated event counts (k/M suffixes), e.g. 100k,1M,5M",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--batch", type=int, default=10_000, help="archive batch size")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--skip-pipeline", action="store_true")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch folder (default: a temporary one, removed afterwards)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]

    cond = conditions(args)
    print("conditions:")
    for key, value in cond.items():
        print(f"  {key:<18} {value}")

    scratch = Path(tempfile.mkdtemp(prefix="hero-bench-", dir=args.work))
    results: list[dict[str, Any]] = []
    spark = None
    try:
        if not args.skip_pipeline:
            t0 = time.perf_counter()
            spark = session(
                SparkOptions(
                    master=args.master,
                    driver_memory=args.driver_memory,
                    shuffle_partitions=args.shuffle_partitions,
                )
            )
            cond["spark_start_s"] = round(time.perf_counter() - t0, 2)
            warm = scratch / "warmup"
            spec = spec_for(20_000, seed=1)
            events, _ = synth.simulate(spec)
            synth.write_parquet(spec, events, warm / "events")
            t0 = time.perf_counter()
            bench_pipeline(spark, warm / "events", warm / "out")
            cond["warmup_20k_s"] = round(time.perf_counter() - t0, 2)
            shutil.rmtree(warm)
            print(
                f"  spark start        {cond['spark_start_s']} s"
                f" (warm-up run on 20k events: {cond['warmup_20k_s']} s)"
            )
        for n in sizes:
            work = scratch / human(n)
            work.mkdir()
            print(f"\n== {human(n)} events ==", flush=True)
            row: dict[str, Any] = {"size": human(n)}
            row.update(bench_archive(n, work, args.batch))
            print(f"  XADD     {row['xadd_s']:8.2f} s  {row['xadd_per_s']:>10,.0f} events/s")
            print(
                f"  archive  {row['archive_s']:8.2f} s  {row['archive_per_s']:>10,.0f} events/s"
                f"  ({row['files']} files, {row['parquet_mb']:.1f} MB)",
                flush=True,
            )
            if spark is not None:
                row.update(bench_pipeline(spark, work / "events", work / "out"))
                print(
                    f"  pipeline {row['pipeline_s']:8.2f} s  "
                    f"{row['pipeline_per_s']:>10,.0f} events/s  ({row['jobs']:,} jobs)",
                    flush=True,
                )
            row["load_average_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"  load average (1/5/15 min) after this size: {row['load_average_after']}")
            results.append(row)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    print("\nsummary (time grows from the previous size by a factor):")
    header = (
        f"{'events':>8} {'archive s':>10} {'archive ev/s':>13} {'pipeline s':>11} "
        f"{'pipeline ev/s':>14} {'archive x':>10} {'pipeline x':>11}"
    )
    print(header)
    previous: dict[str, Any] | None = None
    for row in results:
        a_growth = row["archive_s"] / previous["archive_s"] if previous else None
        p_growth = (
            row["pipeline_s"] / previous["pipeline_s"] if previous and "pipeline_s" in row else None
        )
        print(
            f"{row['size']:>8} {row['archive_s']:>10.2f} {row['archive_per_s']:>13,.0f} "
            f"{row.get('pipeline_s', float('nan')):>11.2f} "
            f"{row.get('pipeline_per_s', float('nan')):>14,.0f} "
            f"{(f'{a_growth:.2f}' if a_growth else '-'):>10} "
            f"{(f'{p_growth:.2f}' if p_growth else '-'):>11}"
        )
        previous = row
    if args.json:
        args.json.write_text(json.dumps({"conditions": cond, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
