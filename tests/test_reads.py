"""A job's reads and changes check the owner where they read: ``supervisor/reads.py``
and hero.lua's ``hero_start_jobs``, ``hero_stop`` and ``hero_delete``.

The RPC layer looks no named job up before the handler (``rpc.access``): the
read or change is the one check, in the same Redis command or Function as
the read, so an id that changed hands (alice's job deleted, or expired, and
bob's created under its id) answers alice as a missing job whenever it
happened. Through the real dispatcher and contract, to a real ``Supervisor``
on the session's redis-server: alice is answered as for a missing job, and
bob's job, logs and state are untouched.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.config import Config
from gateway.errors import JobNotFound
from gateway.rpc.backends import Backends
from gateway.rpc.context import CallContext, Identity
from gateway.rpc.methods import build_dispatcher
from gateway.rpc.protocol import handle_frame
from gateway.supervisor import Supervisor, keys
from tests.helpers import job

ALICE = CallContext(Identity("alice-key", "user", "alice"))
JOB_ID = "report-2026-11-25"
BOBS = "BOB PRIVATE 7731"


@pytest.fixture
async def taken(sup: Supervisor, rds: aioredis.Redis) -> Backends:
    """alice's job, whose id is now bob's job, with logs."""
    await sup.create(job("print('alice')", job_id=JOB_ID, caller_id="alice"))
    await sup.delete(JOB_ID)
    await sup.create(job(f"print({BOBS!r})", job_id=JOB_ID, caller_id="bob"))
    await rds.set(keys.logs(JOB_ID), BOBS)
    return Backends(supervisor=sup, script_types=sup.config.script_types)


async def as_alice(backends: Backends, method: str) -> dict[str, Any]:
    dispatcher = build_dispatcher(backends, check_results=True)
    frame = {"jsonrpc": "2.0", "method": method, "params": {"job_id": JOB_ID}, "id": 1}
    reply = await handle_frame(json.dumps(frame), dispatcher, ALICE)
    assert reply is not None
    answer: dict[str, Any] = json.loads(reply)
    return answer


@pytest.mark.parametrize(
    "method",
    ["job.status", "job.get", "job.logs", "job.output", "job.start", "job.stop", "job.delete"],
)
async def test_an_id_taken_by_another_caller_answers_as_missing_in_one_read(
    taken: Backends, sup: Supervisor, rds: aioredis.Redis, method: str, config: Config
) -> None:
    reply = await as_alice(taken, method)
    assert reply["error"] == {
        "code": -32001,
        "message": f"Job not found: {JOB_ID}",
        "data": {"job_id": JOB_ID},
    }, reply
    assert BOBS not in json.dumps(reply)
    bobs = await sup.get(JOB_ID)
    assert (bobs["caller_id"], bobs["status"], bobs["script"]) == (
        "bob",
        "created",
        f"print({BOBS!r})",
    )
    assert await rds.get(keys.logs(JOB_ID)) == BOBS


async def test_an_admin_read_is_not_restricted(sup: Supervisor) -> None:
    """No caller named: any job answers (an admin's call, a server without keys)."""
    await sup.create(job(job_id=JOB_ID, caller_id="bob"))
    assert (await sup.status(JOB_ID))["status"] == "created"
    assert (await sup.get(JOB_ID))["caller_id"] == "bob"
    assert (await sup.output(JOB_ID))["status"] == "created"
    assert (await sup.logs(JOB_ID))["logs"] == ""
    assert (await sup.start(JOB_ID))["status"] in ("dispatched", "started")
    assert (await sup.stop(JOB_ID))["status"] == "stopped"
    assert (await sup.delete(JOB_ID))["deleted"] is True


async def test_starts_of_several_callers_in_one_call_each_check_their_own(
    sup: Supervisor,
) -> None:
    """The starts of one loop turn go to Redis in one ``hero_start_jobs``, each
    with its caller: bob's start of alice's job finds none, the others start."""
    for job_id, caller in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")):
        await sup.create(job(job_id=job_id, caller_id=caller))
    answers = await asyncio.gather(
        sup.start("a1", "alice"), sup.start("a2", "bob"), sup.start("b1", "bob"),
        return_exceptions=True,
    )  # fmt: skip
    assert [a["status"] if isinstance(a, dict) else type(a).__name__ for a in answers] == [
        "dispatched",
        "JobNotFound",
        "dispatched",
    ]
    assert (await sup.status("a2"))["status"] == "created"


async def test_logs_of_a_job_key_of_another_type_find_no_job(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A job key a producer made another type is no job for ``job.logs``, as for
    ``job.get`` (the owner's read runs inside the ``MULTI``)."""
    await rds.set(keys.job(JOB_ID), "not a hash")
    await rds.set(keys.logs(JOB_ID), "someone's text")
    for caller in (None, "alice"):
        with pytest.raises(JobNotFound):
            await sup.logs(JOB_ID, caller)
