"""Job log files: named safely whatever the job id, and removed once their
job has expired, against a real Redis, real actors and a real folder."""

from __future__ import annotations

import hashlib
import os
import re
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


RUN = "1764041234123456"  # a run's token: the µs of the call that took it


def written(job_id: str, end: str = ".log") -> str:
    return "id-" + job_id.encode("utf-8", "surrogateescape").hex() + end


def hashed(job_id: str, end: str = ".log") -> str:
    return "id-sha256-" + hashlib.sha256(job_id.encode()).hexdigest() + end


@pytest.mark.parametrize(
    ("job_id", "name"),
    [
        ("job-1.a_b", "job-1.a_b.log"),
        ("../../escaped", written("../../escaped")),
        ("a/b", written("a/b")),
        (".hidden", written(".hidden")),
        ("..", written("..")),
        ("line\nbreak", written("line\nbreak")),
        ("bad\udcff", "id-626164ff.log"),  # the byte Redis held
        ("id-42", written("id-42")),  # never another id's written name
        ("", "id-.log"),
        ("x" * 110 + "/", hashed("x" * 110 + "/")),  # 111 bytes: too long to write out
        ("é" * 55, written("é" * 55)),  # 110 bytes: the longest written out
        ("x" * 128, "x" * 128 + ".log"),  # the longest identifier
    ],
)
def test_file_name_and_back(job_id: str, name: str) -> None:
    """One name per run (its token before ``.log``), one per id without a token."""
    named_id = None if name.startswith("id-sha256-") else job_id
    assert logfiles.file_name(job_id) == name
    assert logfiles.job_of(name) == (True, named_id)
    per_run = name.removesuffix(".log") + f"~{RUN}.log"
    assert logfiles.file_name(job_id, RUN) == per_run
    assert len(per_run.encode()) <= 255
    assert logfiles.job_of(per_run) == (True, named_id)


@pytest.mark.parametrize("run", ["../x", "12a", "1" * 21, "-1", " 1", "١٢"])
def test_a_run_that_is_no_token_names_no_file(run: str) -> None:
    """An adopted run's token is read from the job hash, anyone's to write."""
    assert logfiles.file_name("job-1", run) == "job-1.log"


def test_a_name_written_before_names_had_runs_is_still_swept() -> None:
    """Ids of 111 to 120 bytes were written out in hex then: still their files."""
    job_id = "é" * 60
    assert logfiles.job_of(written(job_id)) == (True, job_id)
    assert logfiles.job_of(written("job-1")) == (False, "job-1")  # never written out


@pytest.mark.parametrize(
    "name",
    [
        "notes.txt",
        ".hidden.log",
        "id-zz.log",
        "id-6162 .log",
        "id-6A.log",
        "x.log.gz",
        "x~.log",
        "x~1a.log",
        "~1.log",
        "x~1~2.log",
    ],
)
def test_names_no_job_has(name: str) -> None:
    assert logfiles.job_of(name)[0] is False


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
    run = await rds.hget(f"hero:job:{job_id}", "run") or ""
    assert log_path == log_dir / written(job_id, f"~{run}.log")
    assert log_path.read_text() == "pwned\n"


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


async def sweep(redis_url: str, folder: Path, ttl: int) -> int:
    lookup = JobLookup(Config(redis_url=redis_url))
    try:
        return await logfiles.sweep(str(folder), ttl, lookup.present)
    finally:
        await lookup.aclose()


async def test_sweep_removes_only_expired_jobs_files(
    redis_url: str, rds: aioredis.Redis, tmp_path: Path
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    files = {
        "expired.log": 2 * DAY,  # its job is gone: removed
        "running.log": 2 * DAY,  # its job is still in Redis: kept
        "fresh.log": 60,  # written within the TTL: kept
        f"expired~{RUN}.log": 2 * DAY,  # a run's: its job is gone, removed
        f"running~{RUN}.log": 2 * DAY,  # a run's: its job is still in Redis, kept
        written("a/b"): 2 * DAY,  # its job is gone: removed
        written("c/d"): 2 * DAY,  # its job is still in Redis: kept
        hashed("x" * 200): 2 * DAY,  # no id to ask about, old: removed
    }
    assert await sweep(redis_url, folder, DAY) == 0  # empty: marked as the actors'
    for name, seconds in files.items():
        (folder / name).write_text(name)
        age(folder / name, seconds)
    (folder / "notes.txt").write_text("no job log: skipped")
    (folder / "dir.log").mkdir()
    (folder / "link.log").symlink_to(folder / "notes.txt")
    age(folder / "link.log", 2 * DAY)
    await rds.hset("hero:job:running", "status", "started")
    await rds.lpush("hero:job:c/d", "a key of another type still counts")
    assert await sweep(redis_url, folder, 0) == 0  # a TTL of 0 keeps all
    assert await sweep(redis_url, folder, DAY) == 4
    left = sorted(p.name for p in folder.iterdir())
    kept = ["running.log", f"running~{RUN}.log", "fresh.log", written("c/d")]
    kept += ["notes.txt", "dir.log", "link.log"]
    assert left == sorted([*kept, logfiles.MARKER])
    assert await sweep(redis_url, tmp_path / "missing", DAY) == 0


async def test_a_folder_holding_other_files_is_never_swept(redis_url: str, tmp_path: Path) -> None:
    """An operator's HERO_LOG_DIR shared with another program: nothing goes,
    not even what looks like a job log, until an operator marks the folder."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "syslog.log").write_text("another program's")
    age(folder / "syslog.log", 2 * DAY)
    assert await sweep(redis_url, folder, DAY) == 0
    assert [p.name for p in folder.iterdir()] == ["syslog.log"]
    (folder / logfiles.MARKER).touch()  # the operator says: only job logs here
    assert await sweep(redis_url, folder, DAY) == 1


def test_a_file_it_may_not_remove_stops_no_other(tmp_path: Path) -> None:
    """One removal the system refuses (here: a path under a file) leaves the
    others to go, and is reported once."""
    (tmp_path / "a.log").write_text("a")
    (tmp_path / "c.log").write_text("c")
    paths = [str(tmp_path / "a.log" / "b.log"), str(tmp_path / "a.log"), str(tmp_path / "c.log")]
    removed, error = logfiles._unlink(paths)
    assert removed == 2 and isinstance(error, NotADirectoryError)
    assert list(tmp_path.iterdir()) == []


async def test_an_actor_sweeps_its_folder_when_it_starts(
    config: Config, sup: Supervisor, actors: Callable[..., Actor]
) -> None:
    """An actor started on a marked folder holding logs a month old removes the one
    whose job has expired and keeps the one whose job Redis still has."""
    short = replace(config, job_ttl=3600)
    folder = Path(short.log_dir or "")
    folder.mkdir(parents=True)
    await sup.create({"script_type": "python", "script": "x", "job_id": "alive"})
    (folder / logfiles.MARKER).touch()  # filled by an earlier version: the operator marked it
    for name in ("old.log", "alive.log"):
        (folder / name).write_text("from last month")
        age(folder / name, 30 * DAY)
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
    assert (folder / "alive.log").exists() and (folder / logfiles.MARKER).exists()
    log_path = Path((await sup.get("new"))["log_path"])
    assert log_path.parent == folder and re.fullmatch(r"new~[0-9]+\.log", log_path.name)
    assert log_path.read_text() == "kept\n"
