"""Retries, dead letters, reaping dead actors, overdue jobs, leader election and
legacy compatibility — real redis-server, real actor processes, real SIGKILL."""

from __future__ import annotations

import asyncio
import itertools
import random
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext, JobFailed, python_actor
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.errors import WaitTimeout
from gateway.model import Claimed
from gateway.model.library import Call
from gateway.supervisor import Supervisor, keys, library
from gateway.supervisor.worker import ActorLink
from tests.helpers import (
    by_hand,
    events_of,
    eventually,
    job,
    marked_gone,
    marked_running,
    sleeper,
    spawn_actor,
    until_offering,
)


def flaky_actor(config: Config, failures: int) -> Actor:
    """Fails each job's first ``failures`` attempts."""
    actor = Actor(config, concurrency=2)

    @actor.handler("osis")
    def run(ctx: JobContext) -> str:
        if ctx.job.attempt <= failures:
            raise JobFailed(f"failure {ctx.job.attempt}")
        return f"ok on attempt {ctx.job.attempt}"

    return actor


async def test_retries_with_backoff_until_success(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    actors(flaky_actor(fast, failures=2))
    result = await fsup.run(job(script_type="osis", job_id="r1", retries=3), wait=20)
    assert result["output"] == "ok on attempt 3"
    kinds = [e["event"] for e in await events_of(rds, "r1")]
    assert kinds == [
        "created",
        "dispatched",
        "started",
        "retrying",
        "dispatched",
        "started",
        "retrying",
        "dispatched",
        "started",
        "finished",
    ]
    assert (await fsup.get("r1"))["attempt"] == 3


async def test_backoff_grows_exponentially(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    actors(flaky_actor(fast, failures=3))
    await fsup.run(job(script_type="osis", job_id="b1", retries=3), wait=20)
    events = await events_of(rds, "b1")
    waits = [
        int(nxt["ts"]) - int(ev["ts"])
        for ev, nxt in itertools.pairwise(events)
        if ev["event"] == "retrying"
    ]
    assert len(waits) == 3
    for attempt, waited in enumerate(waits, start=1):
        expected = min(fast.retry_base * 2**attempt, fast.retry_max) * 1000
        assert waited >= expected - 5  # never early; late by at most a maintenance tick


async def test_exhausted_retries_go_to_the_dead_letter_list_and_replay(
    fsup: Supervisor, fast: Config, actors: Any
) -> None:
    actors(flaky_actor(fast, failures=10))
    result = await fsup.run(job(script_type="osis", job_id="dead", retries=1), wait=20)
    assert (result["status"], result["error"]) == ("dlq", "failure 2")
    [entry] = await fsup.dlq_list("osis")
    assert entry["job_id"] == "dead" and entry["error"] == "failure 2"
    assert "attempts exhausted" in entry["reason"] and entry["attempt"] == 2
    assert await fsup.dlq_replay("osis", ["dead"]) == ["dead"]
    assert await fsup.dlq_list("osis") == []
    again = await fsup.output("dead", wait=20)
    assert again["status"] == "dlq"
    assert [e["job_id"] for e in await fsup.dlq_list()] == ["dead"]


async def test_a_replayed_dead_letter_is_not_answered_by_its_old_reply(
    fsup: Supervisor, fast: Config
) -> None:
    actor = flaky_actor(fast, failures=10)
    serving = asyncio.create_task(actor.serve())
    result = await fsup.run(job(script_type="osis", job_id="old", retries=1), wait=20)
    assert result["status"] == "dlq"
    actor.stop()
    await asyncio.wait_for(serving, 10)
    assert await fsup.dlq_replay("osis", ["old"]) == ["old"]
    with pytest.raises(WaitTimeout):  # nothing runs it: the dead letter's reply must not count
        await fsup.output("old", wait=0.5)
    assert (await fsup.status("old"))["status"] == "dispatched"


async def test_failure_without_retries_is_a_plain_error(
    fsup: Supervisor, fast: Config, actors: Any
) -> None:
    actors(flaky_actor(fast, failures=1))
    result = await fsup.run(job(script_type="osis"), wait=20)
    assert (result["status"], result["error"]) == ("error", "failure 1")
    assert await fsup.dlq_list() == []


async def test_jobs_of_a_killed_actor_are_re_dispatched(
    fsup: Supervisor,
    fast: Config,
    processes: list[subprocess.Popen[bytes]],
    rds: aioredis.Redis,
) -> None:
    """Without spending its retries (it has none): the actor died, not the job."""
    marker = f"hero-test-{uuid.uuid4().hex}"
    victim = spawn_actor(fast, "--script-type", "python", "--instance", "victim")
    processes.append(victim)
    await fsup.create(job(sleeper(marker, 3600), job_id="orphan"))
    await fsup.start("orphan")
    await eventually(lambda: marked_running(marker), within=20)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    await eventually(lambda: _status_is(fsup, "orphan", "dispatched"), within=10)
    got = await fsup.get("orphan")
    assert got["attempt"] == 0 and "died" in (got["error"] or "")
    assert await rds.hget(keys.job("orphan"), "deaths") == "1"
    await eventually(lambda: marked_gone(marker))  # its job died with it (--die-with-parent)


async def _status_is(sup: Supervisor, job_id: str, status: str) -> bool:
    now: str = (await sup.status(job_id))["status"]
    return now == status


async def test_started_job_whose_actor_never_answers_ends_in_timeout(
    fsup: Supervisor, rds: aioredis.Redis
) -> None:
    await fsup.create(job(script_type="osis", job_id="mute", timeout=1))
    await fsup.start("mute")
    _, job_id = await rds.brpop([keys.work_queue("osis")], timeout=5)
    await rds.hset(keys.job(job_id), "status", "started")  # a hash-only actor that hangs
    result = await fsup.output("mute", wait=10)
    assert result["status"] == "timeout"


async def test_hash_only_completion_is_reconciled_into_events_and_dependents(
    fsup: Supervisor, rds: aioredis.Redis, actors: Any
) -> None:
    await fsup.create(job(script_type="osis", job_id="legacy"))
    await fsup.create(job("print('after legacy')", job_id="next", prerequisites=["legacy"]))
    await fsup.start("next")
    await fsup.start("legacy")
    actors()
    waiting = asyncio.create_task(fsup.output("legacy", wait=10))
    _, job_id = await rds.brpop([keys.work_queue("osis")], timeout=5)
    await rds.hset(keys.job(job_id), mapping={"status": "finished", "output": "done"})
    assert (await waiting)["output"] == "done"

    async def recorded() -> bool:
        """The end in the events: reconciled by the wait's sweep, or (when the
        wait's first read already saw the end, and answered from the hash) by
        the leader's next tick."""
        return [e["event"] for e in await events_of(rds, "legacy")][-1:] == ["finished"]

    await eventually(recorded, within=5)
    assert (await fsup.output("next", wait=20))["output"] == "after legacy\n"
    assert [j["id"] for j in (await fsup.list_jobs(status="finished"))["jobs"]] == [
        "next",
        "legacy",
    ]


async def test_only_one_gateway_leads_maintenance(fast: Config, tmp_path: Path) -> None:
    """On a redis-server of its own: the session's shared gateway leads on the
    session's Redis whenever its tick comes first after a flush (seen in CI)."""
    server = EmbeddedRedis(tmp_path / "lead", appendonly=False).start()
    own = replace(fast, redis_url=server.url)
    a = await Supervisor.connect(own, maintenance=False)
    b = await Supervisor.connect(own, maintenance=False)
    try:
        assert [await a.maintenance.lead(), await b.maintenance.lead()] == [True, False]
        assert await a.maintenance.lead() is True  # renewal by the holder
    finally:
        await a.close()
        await b.close()
        server.stop()


async def test_compat_mode_speaks_the_legacy_keys(fast: Config, rds: aioredis.Redis) -> None:
    sup = await Supervisor.connect(replace(fast, compat_legacy=True))
    try:
        await sup.create(job(script_type="osis", job_id="old", worker_id="w7"))
        await sup.start("old")
        assert await rds.lrange(keys.legacy_work("w7"), 0, -1) == ["old"]
        assert await rds.lrange(keys.work_queue("osis"), 0, -1) == ["old"]
        waiting = asyncio.create_task(sup.output("old", wait=10))
        _, job_id = await rds.brpop([keys.legacy_work("w7")], timeout=5)
        await rds.lpush(keys.legacy_reply(job_id), "legacy output")  # reply only, no hash write
        assert (await waiting)["output"] == "legacy output"
        await sup.create(job(script_type="osis", job_id="old2", worker_id="w7"))
        await sup.start("old2")
        await rds.hset(keys.job("old2"), "status", "started")
        await rds.zadd(keys.index_status("started"), {"old2": 1})
        await sup.stop("old2")
        assert await rds.lrange(keys.legacy_stop("w7"), 0, -1) == ["old2"]
        await sup.create(job(script_type="osis", job_id="old3", worker_id="w7"))
        await sup.start("old3")
        await rds.hset(keys.job("old3"), "status", "started")
        await sup.delete("old3")  # a running job deleted is stopped first
        assert await rds.lrange(keys.legacy_stop("w7"), 0, -1) == ["old3", "old2"]
    finally:
        await sup.close()


async def sigkill_storm(
    sup: Supervisor,
    config: Config,
    rds: aioredis.Redis,
    processes: list[subprocess.Popen[bytes]],
    *actor_argv: str,
    seed: int,
) -> list[dict[str, str]]:
    """Run 500 osis jobs on 3 actor processes while killing, every 0.1-0.3 s,
    one that is running jobs, with SIGKILL (and restarting it), 8 times at most,
    for at most 150 s. Checks that every job finished exactly once with its own
    output; returns the events stream for further checks."""
    argv: tuple[str, ...] = ("--script-type", "osis", "--concurrency", "4")
    argv += ("--handler", "tests.fault_handlers:sleepy", *actor_argv)
    names = ["", "", ""]  # actor name per fleet slot

    def start(slot: int, n: int) -> subprocess.Popen[bytes]:
        proc = spawn_actor(config, *argv, "--instance", f"a{n}")
        processes.append(proc)
        names[slot] = f"default:a{n}"
        return proc

    async def busy() -> list[int]:
        running = await rds.zrange(keys.index_status("started"), 0, -1)
        owners = {await rds.hget(keys.job(j), "actor") for j in running}
        return [slot for slot, name in enumerate(names) if name in owners]

    fleet = [start(n, n) for n in range(3)]
    ids = [f"f{n:03d}" for n in range(500)]
    answers = await sup.submit_many([job(j, script_type="osis", job_id=j, retries=10) for j in ids])
    assert {a["status"] for a in answers} == {"dispatched"}
    rng = random.Random(seed)
    kills = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 150
    while loop.time() < deadline:
        if await rds.zcard(keys.index_status("finished")) == len(ids):
            break
        victims = await busy() if kills < 8 else []
        if victims:
            slot = rng.choice(victims)
            fleet[slot].send_signal(signal.SIGKILL)
            fleet[slot].wait()
            kills += 1
            fleet[slot] = start(slot, 100 + kills)
        await asyncio.sleep(rng.uniform(0.1, 0.3))
    statuses = Counter([(await sup.status(j))["status"] for j in ids])
    assert statuses == {"finished": 500}, statuses
    events = [f for _, f in await rds.xrange(keys.EVENTS)]
    finished = Counter(f["job_id"] for f in events if f["event"] == "finished")
    assert set(finished) == set(ids) and set(finished.values()) == {1}
    outputs = {j: (await sup.output(j))["output"] for j in ids}
    assert outputs == {j: j for j in ids}
    assert kills >= 5  # the faults really happened while jobs ran
    return events


@pytest.mark.timeout(180)
async def test_five_hundred_jobs_survive_random_sigkills(
    fsup: Supervisor, fast: Config, rds: aioredis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Actors are killed at random and restarted; every job still ends finished
    exactly once (our finish is a compare-and-set on the claim)."""
    events = await sigkill_storm(fsup, fast, rds, processes, seed=7)
    assert any(e["event"] == "retrying" and "died" in e["error"] for e in events)


async def test_ended_jobs_expire_and_leave_the_indexes(
    fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    brief = replace(fast, job_ttl=1)  # actors and gateways share HERO_JOB_TTL
    sup = await Supervisor.connect(brief)
    try:
        actors(python_actor(brief))
        await sup.run(job(job_id="brief", caller_id="c"), wait=20)
        assert 0 < await rds.ttl(keys.job("brief")) <= 1
        assert 0 < await rds.ttl(keys.logs("brief")) <= 1

        async def gone() -> bool:
            return await rds.zscore(keys.INDEX_ALL, "brief") is None

        await eventually(gone, within=10)
        assert not await rds.exists(keys.job("brief"))
        assert await rds.zscore(keys.index_caller("c"), "brief") is None
        assert await rds.zscore(keys.index_status("finished"), "brief") is None
        assert (await sup.list_jobs())["jobs"] == []
    finally:
        await sup.close()


async def test_purge_clears_ended_jobs_only(fsup: Supervisor, actors: Any) -> None:
    actors()
    await fsup.run(job(job_id="old"), wait=20)
    await fsup.create(job(job_id="fresh"))
    assert await fsup.purge("finished") == {"deleted": 1}
    assert [j["id"] for j in (await fsup.list_jobs())["jobs"]] == ["fresh"]
    assert await fsup.purge("finished", older_than=3600) == {"deleted": 0}


async def test_purge_passes_over_an_entry_whose_job_is_gone(
    fsup: Supervisor, actors: Any, rds: aioredis.Redis
) -> None:
    """An index entry whose hash expired, its prune still to come, is no job
    to delete: purge goes on past it and ends."""
    actors()
    await fsup.run(job(job_id="ended"), wait=20)
    await rds.zadd(keys.index_status("finished"), {"expired": 1})
    assert await asyncio.wait_for(fsup.purge("finished"), 10) == {"deleted": 1}
    assert await rds.zrange(keys.index_status("finished"), 0, -1) == ["expired"]


async def test_actor_adopts_jobs_it_holds_but_is_not_running(
    fsup: Supervisor, fast: Config, actors: Any
) -> None:
    """A claim whose reply never arrived (Redis dropped the connection after
    running the call), or a restarted process with the same instance name."""
    await fsup.start((await fsup.create(job("lost", script_type="osis", job_id="lost")))["job_id"])
    ghost = ActorLink(fast, "osis", "g", "same")
    await ghost.open()
    [claimed] = await ghost.cycle([], 1)  # claimed, then the reply is "lost"
    assert claimed.job_id == "lost"
    actor = Actor(fast, group="g", instance="same")

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    actors(actor)
    assert (await fsup.output("lost", wait=20))["output"] == "lost"
    await ghost.close()


def lose_the_reply_reporting_a_failure(
    monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[list[Claimed]], Awaitable[None]]
) -> list[str]:
    """Make the first actor cycle (``hero_cycle``) that reports a failure lose
    its reply, after Redis ran it and ``meanwhile`` saw what it claimed.
    Redis is real; the loss is simulated, as it cannot be timed from
    outside. Returns a list that is not empty once the reply was lost."""
    real_call = library.call
    lost: list[str] = []

    async def loses_one_reply(client: Any, config: Config, fcall: Call[Any]) -> Any:
        reply = await real_call(client, config, fcall)
        if not lost and fcall.function == "hero_cycle" and "error" in fcall.args:
            lost.append("yes")
            await meanwhile(list(reply.claimed))
            raise ConnectionError("the reply was lost")
        return reply

    monkeypatch.setattr(library, "call", loses_one_reply)
    return lost


def retried_actor(config: Config, seconds: float) -> Actor:
    """Fails each job's attempt 1 and runs attempt 2 for ``seconds``; the
    script ``quick`` it answers at once."""
    actor = Actor(config, instance="lossy", concurrency=2)

    @actor.handler("osis")
    async def flaky(ctx: JobContext) -> str:
        if ctx.job.script == "quick":
            return "quick"
        if ctx.job.attempt == 1:
            raise JobFailed("attempt 1 failed")
        await asyncio.sleep(seconds)
        return f"attempt {ctx.job.attempt}"

    return actor


async def test_a_report_sent_again_after_a_lost_reply_ends_no_later_attempt(
    fast: Config, rds: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis ran the cycle reporting attempt 1's failure, and the reply was
    lost on the way back, so the actor sends that report again. By then the
    job's retry (attempt 2) was handed to the same actor and runs: the report
    of attempt 1 used to end it, in the dead letters with attempt 1's error."""
    sup = await Supervisor.connect(fast)
    await by_hand(sup, rds)  # the retry is promoted when this test ticks

    async def hand_the_retry_over(claimed: list[Claimed]) -> None:
        await asyncio.sleep(0.3)  # the retry's backoff
        assert (await sup.maintenance.tick())["promoted"] == 1  # handed to this actor

    lost = lose_the_reply_reporting_a_failure(monkeypatch, hand_the_retry_over)
    # attempt 2 is still running when attempt 1's report comes again
    actor = retried_actor(fast, seconds=1.0)
    serving = asyncio.create_task(actor.serve())
    try:
        await until_offering(rds)
        await sup.create(job("x", script_type="osis", job_id="L", retries=1))
        await sup.start("L")
        done = await sup.output("L", wait=20)
        assert lost and (done["status"], done["output"]) == ("finished", "attempt 2")
        assert [e["event"] for e in await events_of(rds, "L")].count("finished") == 1
    finally:
        actor.stop()
        await asyncio.wait_for(serving, 30)
        await sup.close()


@pytest.mark.parametrize("stream_types", [(), ("osis",)], ids=["lists", "stream"])
async def test_a_retry_claimed_in_a_lost_reply_is_adopted_while_its_first_attempt_is_reported(
    fast: Config,
    rds: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    stream_types: tuple[str, ...],
) -> None:
    """With no backoff, the cycle reporting attempt 1's failure also claims
    attempt 2; its reply is lost. The adopt that follows used to pass over the
    held job because attempt 1's report was still in hand (by job id), so
    attempt 2 stayed started and unrun while its actor lived. And once it ran,
    the report of attempt 1 sent again took it off the jobs the actor holds,
    so the actor claimed one job fewer than it had room for until it ended."""
    config = replace(fast, retry_base=0.0, retry_max=0.0, stream_types=stream_types)
    sup = await Supervisor.connect(config)

    async def claimed_the_retry(claimed: list[Claimed]) -> None:
        assert [j.attempt for j in claimed] == [2]

    lost = lose_the_reply_reporting_a_failure(monkeypatch, claimed_the_retry)
    actor = retried_actor(config, seconds=1.5)  # still running when the quick job comes
    serving = asyncio.create_task(actor.serve())
    try:
        await sup.create(job("x", script_type="osis", job_id="L", retries=1))
        await sup.start("L")

        async def second_attempt_runs() -> bool:
            return await rds.hget(keys.job("L"), "attempt") == "2" and bool(lost)

        await eventually(second_attempt_runs)
        await asyncio.sleep(0.3)  # attempt 1's report is sent again meanwhile
        quick = await sup.run(job("quick", script_type="osis", job_id="Q"), wait=1.0)
        assert quick["output"] == "quick"  # a free slot: not held back by attempt 2
        done = await sup.output("L", wait=10)
        assert (done["status"], done["output"]) == ("finished", "attempt 2")
        assert [e["event"] for e in await events_of(rds, "L")].count("finished") == 1
    finally:
        actor.stop()
        await asyncio.wait_for(serving, 30)
        await sup.close()
