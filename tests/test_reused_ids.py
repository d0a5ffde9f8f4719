"""A job id freed by a delete and taken by another caller: what was in place
for the first job never serves the second. A real gateway, a real
redis-server, real actors, user keys alice and bob.

alice waits on her job (``job.output`` or ``job.run`` with ``wait``), deletes
it, and bob runs a job of his under the same id: alice's wait ends as for a
missing job (-32001), never with bob's output. A subscription of alice's to
the id sees none of bob's events.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from gateway.actor import python_actor
from gateway.actor.runtime import _InFlight
from gateway.config import Config
from gateway.model import Claimed, Outcome
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.worker import ActorLink
from tests import test_server_auth as auth
from tests.helpers import eventually, job
from tests.server_support import Rpc, Server

keyring = auth.keyring
as_ = auth.as_

JOB_ID = "payroll-2026-11-25"
SECRET = "BOB PRIVATE OUTPUT 42"
NOT_FOUND = {"code": -32001, "message": f"Job not found: {JOB_ID}", "data": {"job_id": JOB_ID}}


PAYROLL = job("print('payroll')", job_id=JOB_ID)


async def alice_deletes_and_bob_takes(alice: Rpc, server: Server, bob_key: str) -> None:
    """alice deletes her job; bob runs one of his under its id, to its end."""
    assert (await alice.call("job.delete", {"job_id": JOB_ID})) == {"deleted": True}
    async with as_(server, bob_key) as bob:
        done = await bob.call(
            "job.run", {"job": job(f"print({SECRET!r})", job_id=JOB_ID), "wait": 30}
        )
        assert done["status"] == "finished" and SECRET in done["output"]


async def told_not_found(alice: Rpc, waiting: asyncio.Task[dict[str, Any]]) -> None:
    assert (await waiting).get("error") == NOT_FOUND
    assert SECRET not in json.dumps(alice.received)


async def test_an_output_wait_on_a_deleted_job_gets_not_found_not_the_next_owners_output(
    server: Server, keyring: dict[str, str], actors: Any
) -> None:
    """The reported attack, step by step."""
    actors()
    async with as_(server, keyring["alice"]) as alice:
        await alice.call("job.create", {"job": PAYROLL})
        waiting = await alice.sent("job.output", {"job_id": JOB_ID, "wait": 60}, within=40)
        # barrier: a shorter wait sent after it ends once the first is in place
        # (both read the job's hash on the one connection, in order)
        short = await alice.request("job.output", {"job_id": JOB_ID, "wait": 0.2})
        assert short["error"]["data"] == {"job_id": JOB_ID}  # timed out: the job still exists
        await alice_deletes_and_bob_takes(alice, server, keyring["bob"])
        await told_not_found(alice, waiting)


async def test_a_run_wait_on_a_deleted_job_gets_not_found_not_the_next_owners_output(
    server: Server, keyring: dict[str, str], actors: Any, rds: aioredis.Redis
) -> None:
    """alice's run waits while no actor serves; she deletes the queued job."""
    async with as_(server, keyring["alice"]) as alice:
        waiting = await alice.sent("job.run", {"job": PAYROLL, "wait": 60}, within=40)
        await eventually(lambda: rds.exists(f"hero:job:{JOB_ID}"))  # submitted: its waiter is in
        actors()
        await alice_deletes_and_bob_takes(alice, server, keyring["bob"])
        await told_not_found(alice, waiting)


async def test_a_subscription_to_a_deleted_job_sees_none_of_the_next_owners_events(
    server: Server, keyring: dict[str, str], actors: Any
) -> None:
    """The feed holds to alice's caller (``Subscription.matches``), not to the id alone."""
    actors()
    async with as_(server, keyring["alice"]) as alice:
        for job_id in (JOB_ID, "alice-after"):
            await alice.call("job.create", {"job": job(job_id=job_id)})
            await alice.call("job.subscribe", {"job_ids": [job_id]})
        await alice_deletes_and_bob_takes(alice, server, keyring["bob"])
        # barrier: alice's own next job's end comes after every event of bob's
        await alice.call("job.start", {"job_id": "alice-after"})
        seen = [(await alice.event(20))["event"]]
        while (seen[-1]["job_id"], seen[-1]["event"]) != ("alice-after", "finished"):
            seen.append((await alice.event(20))["event"])
        assert {event["job_id"] for event in seen} == {"alice-after"}
        assert SECRET not in json.dumps(alice.received)


#: Prints a secret line every 0.25 s, twelve times (flushed by the executor's -u).
CHATTY = """
import time
for i in range(12):
    print(f"BOB SECRET LINE {i}")
    time.sleep(0.25)
"""


async def logs_of(rpc: Rpc) -> str:
    text: str = (await rpc.call("job.logs", {"job_id": JOB_ID}))["logs"] or ""
    return text


async def test_a_deleted_running_jobs_late_logs_never_reach_the_next_owners_job(
    server: Server, keyring: dict[str, str], actors: Any, rds: aioredis.Redis
) -> None:
    """bob deletes his running job; its script runs on a while, its actor
    still reporting its lines and, at its end, its whole log tail. alice's
    job under the id (one no actor serves) gets none of them."""
    actor = actors()
    held = keys.held("python", actor.group, actor.instance)
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["alice"]) as alice:
        await bob.call("job.create", {"job": job(CHATTY, job_id=JOB_ID)})
        await bob.call("job.start", {"job_id": JOB_ID})

        async def bob_sees_a_line() -> bool:
            return "BOB SECRET LINE 1" in await logs_of(bob)

        await eventually(bob_sees_a_line)
        assert (await bob.call("job.delete", {"job_id": JOB_ID})) == {"deleted": True}
        await alice.call("job.create", {"job": job("print('mine')", job_id=JOB_ID, group="nobody")})
        seen = []

        async def bobs_run_reported() -> bool:
            """Its end reported (after its last log report): nothing more comes."""
            seen.append(await logs_of(alice))
            return bool(await rds.llen(held) == 0)

        await eventually(bobs_run_reported, within=20)
        seen.append(await logs_of(alice))
        assert not [text for text in seen if "BOB SECRET" in text]
        assert (await alice.call("job.status", {"job_id": JOB_ID}))["status"] == "created"


async def test_a_run_of_a_deleted_job_is_not_the_run_of_the_next_job_under_its_id(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """alice's job runs on an actor; she deletes it, and bob's job under its id
    goes to the same actor as the same attempt (1). Each run has its own token
    (hero.lua ``take``): the first run's late lines, its last tail and its
    report are not bob's (they were, when the attempt told runs apart)."""
    link = ActorLink(config, "python", "g", "i")
    await link.open()
    held = keys.held("python", "g", "i")
    try:
        await sup.create(job(job_id=JOB_ID, caller_id="alice"))
        await sup.start(JOB_ID)
        (first,) = await link.cycle([], 2)
        assert first.run == await rds.hget(keys.job(JOB_ID), "run")
        ctl = await rds.hget(keys.job(JOB_ID), "ctl")
        await sup.delete(JOB_ID)
        (stop,) = [json.loads(m) for m in await rds.lrange(ctl, 0, -1)]
        assert stop == {"action": "stop", "job_id": JOB_ID, "run": first.run}
        await sup.create(job(job_id=JOB_ID, caller_id="bob"))
        await sup.start(JOB_ID)
        (second,) = await link.cycle([], 2)
        assert (first.attempt, second.attempt) == (1, 1) and first.run != second.run

        async def log(run: str, lines: str = "", tail: str = "") -> bool:
            return await link.report_output(
                JOB_ID, lines, None, attempt=1, run=run, cap=100, tail=tail
            )

        assert not await log(first.run, lines=SECRET)
        assert not await log(first.run, tail=SECRET + "\n")
        assert await log(second.run, lines="bob")
        assert await rds.llen(held) == 2
        stopped = Outcome(JOB_ID, "stopped", "", "stopped", attempt=1, run=first.run)
        await link.cycle([stopped], 0)
        assert (await sup.status(JOB_ID))["status"] == "started"  # bob's job runs on
        assert await rds.llen(held) == 1  # the first run's held entry went with its report
        await link.cycle([stopped], 0)  # sent again (its reply lost): the entry left is bob's
        assert await rds.llen(held) == 1
        await link.cycle(
            [Outcome(JOB_ID, "finished", "bob's output", attempt=1, run=second.run)], 0
        )
        done = await sup.output(JOB_ID)
        assert (done["status"], done["output"]) == ("finished", "bob's output")
        assert await rds.get(keys.logs(JOB_ID)) == "bob\n"
        assert await rds.llen(held) == 0
    finally:
        await link.close()


async def test_a_stop_names_the_run_it_stops() -> None:
    """An actor running two runs of one id (the first deleted and stopping, the
    second its id's next job) stops only the run a stop message names, and the
    first one's end does not take the second off the runs in flight."""
    release = asyncio.Event()

    async def run(job: Claimed) -> Outcome:
        await release.wait()
        return Outcome(job.job_id, "finished", job.run, attempt=job.attempt, run=job.run)

    jobs = _InFlight()
    jobs.start = run
    runs = [Claimed.from_row([JOB_ID, "s", "python", "5", "{}", "", "", "1", "0", "", "", "", r])
            for r in ("r1", "r2")]  # fmt: skip
    jobs.launch(runs)
    await asyncio.sleep(0)
    jobs.stop(JOB_ID, "r1")
    await asyncio.sleep(0.01)
    assert list(jobs.running) == [(JOB_ID, "r2")]
    assert [(o.status, o.run) for o in jobs.done] == [("stopped", "r1")]
    release.set()
    await asyncio.sleep(0.01)
    assert not jobs.running
    assert [(o.status, o.run) for o in jobs.done][1:] == [("finished", "r2")]


async def test_a_stop_that_comes_before_its_run_stops_it_as_it_starts() -> None:
    """A run deleted while its hand-off was on its way to the actor does not
    run on unseen: the stop is kept until the run is launched."""
    jobs = _InFlight()

    async def run(job: Claimed) -> Outcome:
        raise AssertionError("a stopped run ran")

    jobs.start = run
    jobs.stop(JOB_ID, "r1")
    jobs.launch(
        [Claimed.from_row([JOB_ID, "s", "python", "5", "{}", "", "", "1", "0", "", "", "", "r1"])]
    )
    await asyncio.sleep(0.01)
    assert not jobs.running
    assert [(o.status, o.run) for o in jobs.done] == [("stopped", "r1")]


async def test_an_adopt_runs_a_run_held_twice_under_its_id_once(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """The held list has the id twice (the deleted job's run, not reported yet,
    and the next job's); a process that adopts them runs the running job's
    run once, not once per held entry."""
    link = ActorLink(config, "python", "g", "i")
    await link.open()
    try:
        await sup.create(job(job_id=JOB_ID, caller_id="alice"))
        await sup.start(JOB_ID)
        await link.cycle([], 2)
        await sup.delete(JOB_ID)
        await sup.create(job(job_id=JOB_ID, caller_id="bob"))
        await sup.start(JOB_ID)
        (second,) = await link.cycle([], 2)
    finally:
        await link.close()
    again = ActorLink(config, "python", "g", "i")  # the same actor, started again
    await again.open()
    try:
        assert await rds.llen(keys.held("python", "g", "i")) == 2
        assert [(j.job_id, j.run, j.caller_id) for j in await again.adopt()] == [
            (JOB_ID, second.run, "bob")
        ]
    finally:
        await again.close()


async def test_a_deleted_jobs_log_on_the_actors_disk_is_not_the_next_owners_log(
    server: Server, keyring: dict[str, str], actors: Any, config: Config
) -> None:
    """bob's job ran and filled its log up to the actor's limit; he deletes it,
    and alice runs a job of hers under its id on the same actor. Her log is
    her run's alone: bob's bytes once counted against her limit, so all her
    ``job.logs`` said was that her log was cut, and his lines sat in her file."""
    actors(python_actor(replace(config, job_max_log=2000)))
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["alice"]) as alice:
        await bob.call("job.run", {"job": job("print('BOB' * 1000)", job_id=JOB_ID), "wait": 30})
        assert (await logs_of(bob)).endswith("[log cut at 2000 bytes]\n")
        assert (await bob.call("job.delete", {"job_id": JOB_ID})) == {"deleted": True}
        mine = await alice.call("job.run", {"job": job("print('mine')", job_id=JOB_ID), "wait": 30})
        assert mine["status"] == "finished"
        assert await logs_of(alice) == "mine\n"
        log_path = Path((await alice.call("job.get", {"job_id": JOB_ID}))["log_path"])
        assert log_path.read_text() == "mine\n"  # this run's file, of this run alone
