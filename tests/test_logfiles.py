"""Job log files: named safely whatever the job id, and removed once their
job has expired, against a real Redis, real actors and a real folder."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext, logfiles
from gateway.config import Config
from gateway.supervisor import Supervisor
from gateway.supervisor.retention import JobLookup
from tests.helpers import eventually

DAY = 86400


def hashed(job_id: str) -> str:
    return "id-" + hashlib.sha256(job_id.encode()).hexdigest() + ".log"


@pytest.mark.parametrize(
    ("job_id", "name"),
    [
        ("job-1.a_b", "job-1.a_b.log"),
        ("../../escaped", hashed("../../escaped")),
        ("a/b", hashed("a/b")),
        (".hidden", hashed(".hidden")),
        ("..", hashed("..")),
        ("x" * 129, hashed("x" * 129)),
        ("line\nbreak", hashed("line\nbreak")),
        ("id-" + "0" * 64, hashed("id-" + "0" * 64)),  # never another id's hashed name
        ("", hashed("")),
    ],
)
def test_file_name(job_id: str, name: str) -> None:
    assert logfiles.file_name(job_id) == name


async def test_an_outside_id_cannot_write_outside_the_log_folder(
    config: Config, rds: aioredis.Redis, actors: Callable[..., Actor], tmp_path: Path
) -> None:
    """The attack: a plain HSET + LPUSH of a job whose id climbs out of the
    actor's log folder. The job runs; its log stays in the folder."""
    actors()
    job_id = "../escaped"
    await rds.hset(f"hero:job:{job_id}", mapping={"script": "print('pwned')"})
    await rds.lpush("hero:q:work:type:python", job_id)

    async def ended() -> bool:
        status: str | None = await rds.hget(f"hero:job:{job_id}", "status")
        return status == "finished"

    await eventually(ended, within=20)
    log_dir = Path(config.log_dir or "")
    assert not (tmp_path / "escaped.log").exists()
    log_path = Path(await rds.hget(f"hero:job:{job_id}", "log_path") or "")
    assert log_path == log_dir / hashed(job_id)
    assert log_path.read_text() == "pwned\n"


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


async def test_sweep_removes_only_expired_jobs_files(
    redis_url: str, rds: aioredis.Redis, tmp_path: Path
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    outside = tmp_path / "keep.log"
    outside.write_text("not a job's")
    files = {
        "expired.log": 2 * DAY,  # its job is gone: removed
        "running.log": 2 * DAY,  # its job is still in Redis: kept
        "fresh.log": 60,  # written within the TTL: kept
        hashed("../x"): 2 * DAY,  # no id to ask about, old: removed
        "notes.txt": 2 * DAY,  # not a job log: kept
        ".hidden.log": 2 * DAY,  # no job id makes this name: kept
    }
    for name, seconds in files.items():
        (folder / name).write_text(name)
        age(folder / name, seconds)
    (folder / "dir.log").mkdir()
    (folder / "link.log").symlink_to(outside)
    age(folder / "link.log", 2 * DAY)
    await rds.hset("hero:job:running", "status", "started")
    lookup = JobLookup(Config(redis_url=redis_url))
    present = lookup.present
    try:
        assert await logfiles.sweep(str(folder), 0, present) == 0  # a TTL of 0 keeps all
        assert await logfiles.sweep(str(folder), DAY, present) == 2
        assert await logfiles.sweep(str(tmp_path / "missing"), DAY, present) == 0
    finally:
        await lookup.aclose()
    left = sorted(p.name for p in folder.iterdir())
    assert left == sorted(["running.log", "fresh.log", "notes.txt", ".hidden.log", "dir.log",
                           "link.log"])  # fmt: skip
    assert outside.read_text() == "not a job's"


async def test_an_actor_sweeps_its_folder_when_it_starts(
    config: Config, sup: Supervisor, actors: Callable[..., Actor]
) -> None:
    """An actor started on a folder holding an expired job's log removes it,
    and keeps the logs of the jobs it runs."""
    short = replace(config, job_ttl=3600)
    folder = Path(short.log_dir or "")
    folder.mkdir(parents=True)
    (folder / "old.log").write_text("from last month")
    age(folder / "old.log", 30 * DAY)
    actor = Actor(short)

    @actor.handler("python")
    def run(ctx: JobContext) -> str:
        ctx.log("kept")
        return "ok"

    actors(actor)
    result = await sup.run({"script_type": "python", "script": "x", "job_id": "new"}, wait=20)
    assert result["status"] == "finished"

    async def swept() -> bool:
        return not (folder / "old.log").exists()

    await eventually(swept, within=10)
    assert (folder / "new.log").read_text() == "kept\n"
