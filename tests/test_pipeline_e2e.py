"""End to end: real jobs through the supervisor and real actors, archived, analysed.

Jobs run on in-process actors (the SDK for ``osis``, the isolated python executor
for ``python``); the archive drains the events stream into Parquet; ``pipeline run``
(local Spark) writes the report and publishes it, and the supervisor's
``report()`` (what ``stats.report`` serves) returns the same document and its charts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from gateway.actor import Actor, JobContext, JobFailed
from gateway.config import Config
from gateway.pipeline.archive import ArchiveOptions, Archiver
from gateway.pipeline.cli import add_commands
from gateway.pipeline.report import published
from gateway.pipeline.store import read_events
from gateway.supervisor import Supervisor, keys
from tests.helpers import job

pytestmark = pytest.mark.timeout(180)


def cli(argv: list[str]) -> int:
    """Run a command the way ``hero-gateway`` does, minus its logging set-up."""
    parser = argparse.ArgumentParser(prog="hero-gateway")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


async def test_real_jobs_reach_the_archive_and_the_report(
    sup: Supervisor,
    actors: Callable[..., Actor],
    config: Config,
    redis_url: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    osis = Actor(config, group="g1", instance="osis-a", concurrency=2)

    @osis.handler("osis")
    def upper(ctx: JobContext) -> str:
        if ctx.job.script == "fail":
            raise JobFailed("asked to fail")
        return ctx.job.script.upper()

    actors(osis)
    actors(group="g2", instance="py-a", concurrency=2)

    specs = (
        [job(f"ok{i}", script_type="osis", group="g1") for i in range(6)]
        + [job("fail", script_type="osis", group="g1") for _ in range(2)]
        + [job("print('hi')", group="g2") for _ in range(3)]
        + [job("import time; time.sleep(30)", group="g2", timeout=1)]
    )
    results = await asyncio.gather(*(sup.run(spec, wait=60) for spec in specs))
    assert Counter(r["status"] for r in results) == {"finished": 9, "error": 2, "timeout": 1}

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        stream = client.xrange(keys.EVENTS)
        archive = tmp_path / "events"
        stats = await asyncio.to_thread(
            Archiver(client, ArchiveOptions(out=archive, consumer="e2e")).run,
            once=True,
        )
    finally:
        client.close()
    assert stats.events == len(stream)
    archived = read_events(archive).to_pylist()
    assert sorted(r["event_id"] for r in archived) == sorted(str(e[0]) for e in stream)

    out = tmp_path / "out"
    rc = await asyncio.to_thread(
        cli,
        [
            "pipeline",
            "run",
            "--events",
            str(archive),
            "--out",
            str(out),
            "--redis-url",
            redis_url,
            "--slo-wait",
            "1",
            "--quiet",
        ],
    )
    assert rc == 0
    built = json.loads((out / "report.json").read_text())
    by_type = {e["script_type"]: e for e in built["script_types"]}
    assert set(by_type) == {"osis", "python"}
    assert (
        by_type["osis"]["arrivals"],
        by_type["osis"]["completions"],
        by_type["osis"]["errors"],
    ) == (8, 6, 2)
    assert (
        by_type["python"]["arrivals"],
        by_type["python"]["completions"],
        by_type["python"]["timeouts"],
    ) == (4, 3, 1)
    assert built["jobs"] == len(specs)
    assert by_type["osis"]["run"]["count"] == 8 and by_type["python"]["run"]["count"] == 4
    assert by_type["python"]["run"]["max"] >= 1.0  # the job that ran into its timeout
    assert by_type["osis"]["recommendation"]["actors"] >= 1
    groups = {(g["script_type"], g["group"]) for g in built["groups"]}
    assert groups == {("osis", "g1"), ("python", "g2")}
    actors_in_stream = {r["actor"] for r in archived if r["actor"]}
    assert {a["actor"] for a in built["actors"]} == actors_in_stream
    assert await sup.report() == published(built)
