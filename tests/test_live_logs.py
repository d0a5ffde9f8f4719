"""Live job logs and progress, end to end: a real gateway (shared server), a
real in-process actor running real python jobs, a real redis-server.

A running job's lines reach ``job.logs`` and subscribers before it ends;
logs of stopped, timed-out and failed jobs are kept; a failed job's stdout
is its output; SDK progress reaches subscribers; and a subscriber that
reconnects with ``since`` gets the log batches it missed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.actor import Actor, JobContext
from gateway.config import Config
from tests.helpers import eventually, job
from tests.server_support import Rpc, Server, assert_event_shape, wait_status

pytestmark = pytest.mark.timeout(60)

#: Prints a line about every second, four times (flushed by the executor's -u).
TICKER = """
import time
for i in range(4):
    print(f"line {i}")
    time.sleep(0.9)
"""


async def next_event(rpc: Rpc, job_id: str, within: float = 20) -> dict[str, Any]:
    """The next event of ``job_id`` (checked against the contract)."""
    while True:
        event: dict[str, Any] = (await rpc.event(within))["event"]
        assert_event_shape(event)
        if event["job_id"] == job_id:
            return event


async def events_until_end(rpc: Rpc, job_id: str) -> list[dict[str, Any]]:
    seen = []
    while True:
        seen.append(await next_event(rpc, job_id))
        if seen[-1]["event"] in ("finished", "error", "stopped", "timeout"):
            return seen


def log_lines(events: list[dict[str, Any]]) -> list[str]:
    return [line for e in events if e["event"] == "log" for line in e["lines"].split("\n")]


async def start(rpc: Rpc, spec: dict[str, Any]) -> None:
    await rpc.call("job.create", {"job": spec})
    await rpc.call("job.start", {"job_id": spec["job_id"]})


async def logs(rpc: Rpc, job_id: str) -> str:
    text: str = (await rpc.call("job.logs", {"job_id": job_id}))["logs"] or ""
    return text


async def test_a_running_jobs_lines_reach_logs_and_subscribers_before_it_ends(
    rpc: Rpc, actors: Any
) -> None:
    actors()
    await rpc.call("job.subscribe", {"job_ids": ["tick"]})
    await start(rpc, job(TICKER, job_id="tick"))

    first = await next_event(rpc, "tick")
    while first["event"] != "log":
        first = await next_event(rpc, "tick")
    assert first["lines"] == "line 0" and first["status"] == "started"
    assert first["attempt"] == 1 and first["actor"]
    # the job is still running: the line came live, not with the result
    assert (await rpc.call("job.status", {"job_id": "tick"}))["status"] == "started"

    async def logs_show_line_1_while_running() -> bool:
        text = await logs(rpc, "tick")
        status = (await rpc.call("job.status", {"job_id": "tick"}))["status"]
        assert "line 3" not in text or status != "started"
        return "line 1" in text and status == "started"

    await eventually(logs_show_line_1_while_running, within=10)
    rest = await events_until_end(rpc, "tick")
    assert rest[-1]["event"] == "finished"
    assert log_lines([first, *rest]) == [f"line {i}" for i in range(4)]
    # batched by time: one batch per printed line here, not one per tick
    assert 2 <= sum(e["event"] == "log" for e in [first, *rest]) <= 4
    assert await logs(rpc, "tick") == "".join(f"line {i}\n" for i in range(4))


async def test_a_stopped_jobs_log_is_kept(rpc: Rpc, actors: Any, config: Config) -> None:
    """The line has no newline, so only the actor's last report (after the
    stop killed the job) can bring it to ``job.logs``."""
    actors()
    script = "import time\nprint('before stop', end='')\ntime.sleep(30)"
    await start(rpc, job(script, job_id="halt"))
    log_dir = Path(config.log_dir or "")

    async def printed() -> bool:
        on_disk = list(log_dir.glob("halt~*.log"))  # the run's (logfiles)
        return len(on_disk) == 1 and on_disk[0].read_text() == "before stop"

    await eventually(printed)
    assert await logs(rpc, "halt") == ""  # an unfinished line is not sent live
    await rpc.call("job.stop", {"job_id": "halt"})
    await wait_status(rpc, "halt", "stopped")

    async def kept() -> bool:
        return await logs(rpc, "halt") == "before stop"

    await eventually(kept)


async def test_a_timed_out_jobs_log_is_kept(rpc: Rpc, actors: Any) -> None:
    actors()
    script = "import time\nprint('tick', end='')\ntime.sleep(30)"
    await start(rpc, job(script, job_id="slow", timeout=1))
    result = await rpc.call("job.output", {"job_id": "slow", "wait": 20})
    assert (result["status"], result["error"]) == ("timeout", "timed out after 1s")

    async def kept() -> bool:
        return await logs(rpc, "slow") == "tick"

    await eventually(kept)


async def test_a_failed_jobs_stdout_is_its_output_and_stderr_its_error(
    rpc: Rpc, actors: Any
) -> None:
    actors()
    await rpc.call("job.subscribe", {"job_ids": ["bad"]})
    script = "import sys\nprint('partial result')\nsys.exit('boom')"
    result = await rpc.call("job.run", {"job": job(script, job_id="bad"), "wait": 20})
    assert result == {
        "job_id": "bad",
        "status": "error",
        "output": "partial result\n",
        "error": "boom",
    }
    ended = (await events_until_end(rpc, "bad"))[-1]
    assert (ended["event"], ended["output"], ended["error"]) == (
        "error",
        "partial result\n",
        "boom",
    )
    assert sorted((await logs(rpc, "bad")).splitlines()) == ["boom", "partial result"]


async def test_sdk_progress_reaches_subscribers_coalesced(
    rpc: Rpc, actors: Any, config: Config
) -> None:
    actor = Actor(config, instance="sdk")

    @actor.handler("osis")
    async def run(ctx: JobContext) -> str:
        ctx.progress(0.25, "a quarter")
        await asyncio.sleep(0.6)  # the job's work: reports go out per tick, over time
        for i in range(1, 100):  # a busy handler: only the latest of a tick goes out
            ctx.progress(0.5 + i / 400, f"step {i}")
        ctx.log("halfway")
        await asyncio.sleep(0.6)  # the job's work, a tick later
        with pytest.raises(ValueError):
            ctx.progress(1.5, "too far")
        ctx.progress(1.0, "done")
        return "ok"

    actors(actor)
    await rpc.call("job.subscribe", {"job_ids": ["p1"]})
    await start(rpc, job("x", script_type="osis", job_id="p1"))
    events = await events_until_end(rpc, "p1")
    assert events[-1]["event"] == "finished"
    progress = [(e["progress"], e["message"]) for e in events if e["event"] == "progress"]
    assert progress == [(0.25, "a quarter"), (0.5 + 99 / 400, "step 99"), (1.0, "done")]
    assert all(e["status"] == "started" for e in events if e["event"] == "progress")
    assert log_lines(events) == ["halfway"]


async def test_a_reconnecting_subscriber_gets_the_log_batches_it_missed(
    server: Server, actors: Any
) -> None:
    actors()
    async with Rpc.connect(server.ws) as first:
        await first.call("job.subscribe", {"job_ids": ["resume"]})
        await start(first, job(TICKER, job_id="resume"))
        seen = [await next_event(first, "resume")]
        while seen[-1]["event"] != "log":
            seen.append(await next_event(first, "resume"))
    # gone after the first batch; the job goes on printing meanwhile
    async with Rpc.connect(server.ws) as second:
        await wait_status(second, "resume", "finished")
        await second.call("job.subscribe", {"job_ids": ["resume"], "since": seen[-1]["id"]})
        missed = await events_until_end(second, "resume")
    assert log_lines(seen) == ["line 0"]
    assert log_lines(missed) == ["line 1", "line 2", "line 3"]
    ids = [e["id"] for e in seen + missed]
    assert len(set(ids)) == len(ids)
