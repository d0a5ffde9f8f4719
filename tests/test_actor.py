"""The actor runtime: the python executor's isolation and limits, the SDK,
logs, stop, timeouts and presence, all against real Redis and real processes."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext, JobFailed
from gateway.actor.joblog import JobLog
from gateway.actor.livelog import LiveLog
from gateway.config import Config
from gateway.errors import JobNotFound
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.worker import ActorLink
from tests.helpers import eventually, job, marked_gone, marked_running, sleeper, started


async def test_python_job_runs_isolated(
    sup: Supervisor, actors: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERO_TEST_SECRET", "do-not-leak")
    actors()
    script = (
        "import os, sys\n"
        "print(os.environ.get('HERO_TEST_SECRET'), os.environ['JOB_ID'], os.environ['CALLER_ID'],"
        f" os.environ['GREETING'], os.getcwd() != {os.getcwd()!r}, sys.flags.isolated)\n"
    )
    result = await sup.run(
        job(
            script, job_id="iso", caller_id="alice", env_vars={"GREETING": "hi", "JOB_ID": "spoof"}
        ),
        wait=20,
    )
    assert result["output"] == "None iso alice hi True 1\n"


async def test_stdout_and_stderr_go_to_the_log_in_the_actor_log_dir(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    actors()
    script = "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n"
    await sup.run(job(script, job_id="logged"), wait=20)
    logs = (await sup.logs("logged"))["logs"]
    assert "to out" in logs and "to err" in logs
    log_path = Path((await sup.get("logged"))["log_path"])
    assert log_path.parent == Path(config.log_dir or "")
    assert re.fullmatch(r"logged~[0-9]+\.log", log_path.name)  # this run's (logfiles)
    assert "to err" in log_path.read_text()


async def test_the_log_of_a_timed_out_job_is_kept(sup: Supervisor, actors: Any) -> None:
    actors()
    script = "import time\nprint('before the end', flush=True)\ntime.sleep(60)\n"
    result = await sup.run(job(script, job_id="slow", timeout=2), wait=20)
    assert result["status"] == "timeout"
    assert "before the end" in (await sup.logs("slow"))["logs"]


async def test_error_carries_the_tail_of_stderr(sup: Supervisor, actors: Any) -> None:
    actors()
    result = await sup.run(job("print('x' * 10000)\nraise ValueError('kaput')"), wait=20)
    assert result["status"] == "error"
    assert result["error"].endswith("ValueError: kaput")
    assert len(result["error"]) <= 4096


async def test_timeout_kills_every_process_of_the_job(sup: Supervisor, actors: Any) -> None:
    actors()
    marker = f"hero-test-{uuid.uuid4().hex}"
    run = asyncio.create_task(sup.run(job(sleeper(marker), timeout=3), wait=20))
    await eventually(lambda: marked_running(marker))
    result = await run
    assert result["status"] == "timeout"
    await eventually(lambda: marked_gone(marker))


async def test_stop_reaches_the_running_job(sup: Supervisor, actors: Any) -> None:
    actors()
    marker = f"hero-test-{uuid.uuid4().hex}"
    await sup.create(job(sleeper(marker), job_id="long"))
    await sup.start("long")
    await eventually(lambda: marked_running(marker))
    assert await sup.stop("long") == {"job_id": "long", "status": "stopped"}
    result = await sup.output("long")
    assert result["status"] == "stopped"
    await eventually(lambda: marked_gone(marker))
    # the actor is free again: the next job runs promptly
    assert (await sup.run(job("print('next')"), wait=20))["output"] == "next\n"


async def test_delete_stops_the_running_job(
    sup: Supervisor, actors: Any, rds: aioredis.Redis
) -> None:
    """A deleted job does not run on to its end on the actor: it is stopped,
    and the end its actor reports is dropped (no hash, logs or event of it)."""
    actor = actors()
    marker = f"hero-test-{uuid.uuid4().hex}"
    await sup.create(job(sleeper(marker), job_id="long"))
    await sup.start("long")
    await eventually(lambda: marked_running(marker))
    assert await sup.delete("long") == {"deleted": True}
    await eventually(lambda: marked_gone(marker))
    held = keys.held("python", actor.group, actor.instance)

    async def reported() -> bool:
        return int(await rds.llen(held)) == 0

    await eventually(reported)
    assert (await sup.run(job("print('next')"), wait=20))["output"] == "next\n"
    with pytest.raises(JobNotFound):
        await sup.get("long")
    assert not await rds.exists(keys.logs("long"))
    ended = [f for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == "long"]
    assert [f["status"] for f in ended] == ["created", "dispatched", "started"]


async def test_sdk_handlers_async_and_sync_and_failures(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    actor = Actor(config, group="sdk", instance="one", concurrency=4)

    @actor.handler("osis")
    async def upper(ctx: JobContext) -> str:
        ctx.log(f"running {ctx.job.job_id}")
        if ctx.job.script == "fail":
            raise JobFailed("asked to fail")
        if ctx.job.script == "fail-bare":
            raise JobFailed("no output", output=None)
        return ctx.job.script.upper()

    @actor.handler("sal")
    def reverse(ctx: JobContext) -> str:
        if ctx.job.script == "crash":
            raise RuntimeError("bug in handler")
        return ctx.job.script[::-1]

    actors(actor)
    ok = await sup.run(job("abc", script_type="osis", job_id="u1"), wait=10)
    assert ok["output"] == "ABC"
    assert "running u1" in (await sup.logs("u1"))["logs"]
    assert (await sup.run(job("abc", script_type="sal"), wait=10))["output"] == "cba"
    failed = await sup.run(job("fail", script_type="osis"), wait=10)
    assert (failed["status"], failed["error"]) == ("error", "asked to fail")
    bare = await sup.run(job("fail-bare", script_type="osis"), wait=10)  # the actor lives on
    assert (bare["status"], bare["output"]) == ("error", None)
    crashed = await sup.run(job("crash", script_type="sal"), wait=10)
    assert crashed["status"] == "error" and crashed["error"] == "RuntimeError: bug in handler"
    listed = {(a["script_type"], a["group"], a["instance"]) for a in await sup.actors()}
    assert listed == {("osis", "sdk", "one"), ("sal", "sdk", "one")}


async def test_a_job_log_file_is_made_by_the_first_write(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    """A handler that logs nothing leaves no file (read as empty everywhere);
    one that logs gets its file; one whose log cannot be opened ends in an
    error saying so, and a python job whose log cannot be opened never runs."""
    actor = Actor(config, group="lazy", instance="one")

    @actor.handler("osis")
    def maybe_log(ctx: JobContext) -> str:
        if ctx.job.script == "log":
            ctx.log("a line")
        return "done"

    log_dir = Path(config.log_dir or "")
    actors(actor)
    actors()  # a python actor too, on the same folder
    quiet = await sup.run(job("quiet", script_type="osis", job_id="quiet"), wait=10)
    assert (quiet["status"], quiet["output"]) == ("finished", "done")
    quiet_log = Path((await sup.get("quiet"))["log_path"])
    assert quiet_log.parent == log_dir and quiet_log.name.startswith("quiet~")
    assert not quiet_log.exists()
    assert (await sup.logs("quiet"))["logs"] == ""
    await sup.run(job("log", script_type="osis", job_id="loud"), wait=10)
    loud_log = Path((await sup.get("loud"))["log_path"])
    assert loud_log.parent == log_dir and loud_log.read_text() == "a line\n"
    assert (await sup.logs("loud"))["logs"] == "a line\n"
    shutil.rmtree(log_dir)
    log_dir.write_text("")  # a file where the folder was: no log can be opened in it
    unwritable = ("error", "the actor cannot write the job's log")
    blocked = await sup.run(job("log", script_type="osis", job_id="blocked"), wait=10)
    assert (blocked["status"], blocked["error"]) == unwritable
    # the python executor opens the log before the job starts: no 30 s sleep
    unrun = await sup.run(job("import time\ntime.sleep(30)\n", job_id="blocked-py"), wait=10)
    assert (unrun["status"], unrun["error"]) == unwritable


async def test_an_ended_job_leaves_nothing_for_the_collector(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    """A job's context, log and live log go by reference counting when it
    ends. They once made a cycle (the log's hook held the live log, whose
    report held the log), so each job waited for a collection: about a
    quarter of the actor's CPU per job (bench/analysis.md)."""
    actor = Actor(config, concurrency=4)

    @actor.handler("osis")
    def maybe_log(ctx: JobContext) -> str:
        if ctx.job.script == "log":
            ctx.log("a line")
        return "done"

    actors(actor)
    await sup.run(job("warm", script_type="osis"), wait=10)
    gc.collect()
    gc.disable()  # what a cycle holds stays in gc.get_objects() until collected
    try:
        for script in ("quiet", "log") * 5:
            ended = await sup.run(job(script, script_type="osis"), wait=10)
            assert ended["status"] == "finished"
        left = [type(o).__name__ for o in gc.get_objects() if isinstance(o, JOB_OBJECTS)]
    finally:
        gc.enable()
    assert left == []


JOB_OBJECTS = (JobContext, JobLog, LiveLog)


async def test_concurrency_runs_jobs_side_by_side(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    actor = Actor(config, concurrency=5)
    running = 0
    peak = 0

    @actor.handler("osis")
    async def slow(ctx: JobContext) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.2)  # the job's work: long enough for five to overlap
        running -= 1
        return "done"

    actors(actor)
    await asyncio.gather(*(sup.run(job("x", script_type="osis"), wait=10) for _ in range(10)))
    assert peak == 5


def _actor_process(config: Config, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, HERO_REDIS_URL=config.redis_url or "", HERO_LOG_DIR=config.log_dir or "")
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "actor", "--script-type", "python", *extra],
        env=env,
        stderr=subprocess.PIPE,
    )


async def test_cli_actor_runs_jobs_and_stops_cleanly_on_sigterm(
    sup: Supervisor, config: Config
) -> None:
    proc = _actor_process(config, "--group", "cli", "--instance", "c1")
    try:
        result = await sup.run(job("print(40 + 2)", group="cli", instance="c1"), wait=30)
        assert result["output"] == "42\n"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 15) == 0
        assert await sup.actors() == []  # left its presence on the way out
    finally:
        proc.kill()
        proc.wait()


async def test_presence_expires_when_an_actor_dies(sup: Supervisor, config: Config) -> None:
    proc = _actor_process(config, "--presence-ttl", "1", "--instance", "doomed")

    async def present() -> bool:
        return [a["instance"] for a in await sup.actors()] == ["doomed"]

    async def absent() -> bool:
        return await sup.actors() == []

    try:
        await eventually(present, within=20)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        await eventually(absent, within=5)
    finally:
        proc.kill()
        proc.wait()


def test_cli_actor_refuses_a_type_it_cannot_run(config: Config) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "actor", "--script-type", "osis"],
        env=dict(os.environ, HERO_REDIS_URL=config.redis_url or ""),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "no built-in executor" in proc.stderr and "Traceback" not in proc.stderr


def held_actor(config: Config) -> tuple[Actor, asyncio.Event]:
    """One slot; its osis jobs echo their script once the event is set."""
    actor = Actor(config, concurrency=1)
    release = asyncio.Event()

    @actor.handler("osis")
    async def held(ctx: JobContext) -> str:
        await release.wait()
        return ctx.job.script

    return actor, release


async def test_an_actor_with_no_room_sleeps_through_wake_ups(
    sup: Supervisor, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wake-ups for queued work while every slot is busy must not make the
    serve loop spin: it waits for the running job to finish."""
    actor, release = held_actor(config)
    waits = 0
    real = ActorLink.wait_for_work

    async def counted(self: ActorLink) -> None:
        nonlocal waits
        waits += 1
        await real(self)

    monkeypatch.setattr(ActorLink, "wait_for_work", counted)
    serving = asyncio.create_task(actor.serve())
    try:
        spec = job("first", script_type="osis", job_id="spin-first")
        first = asyncio.create_task(sup.run(spec, wait=20))
        await eventually(lambda: started(sup, "spin-first"), within=10)
        before = waits
        queued = [await sup.create(job(f"q{n}", script_type="osis")) for n in range(5)]
        for created in queued:
            await sup.start(created["job_id"])  # each publishes a wake-up
        await asyncio.sleep(0.3)  # spinning is measured over time: let a spinner spin
        assert waits - before <= 6, waits - before  # one per wake-up at most, no spinning
        release.set()
        assert (await first)["output"] == "first"
        for created in queued:
            assert (await sup.output(created["job_id"], wait=20))["status"] == "finished"
    finally:
        release.set()
        actor.stop()
        await serving


async def test_stop_waits_for_a_running_job_then_returns(sup: Supervisor, config: Config) -> None:
    actor, release = held_actor(config)
    serving = asyncio.create_task(actor.serve())
    try:
        run = asyncio.create_task(
            sup.run(job("last", script_type="osis", job_id="held-last"), wait=20)
        )
        await eventually(lambda: started(sup, "held-last"))
        actor.stop()
        # no event marks "serve() did not return": give a wrong one time to do so
        await asyncio.sleep(0.1)
        assert not serving.done()  # the job is not done yet
        release.set()
        assert (await run)["output"] == "last"  # reported on the way out
        await asyncio.wait_for(serving, 5)
    finally:
        release.set()
        actor.stop()
        await asyncio.wait_for(serving, 10)
