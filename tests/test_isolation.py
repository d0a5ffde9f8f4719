"""Callers cannot reach each other: a real gateway, a real redis-server, real
actors, user keys alice and bob and an admin key.

For a user key another caller's job is answered exactly like a job that does
not exist, in every method that names a job (the list comes from the
contract, so a new such method is covered without editing this file); an id
another caller holds is refused with -32005 on create and run, and is never
started or read; another caller's job is no prerequisite. Identifiers are
matched whole: a trailing newline is invalid params.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway import contract
from gateway.cli import main
from gateway.errors import InvalidParams
from gateway.supervisor.auth import KeyStore
from tests import test_server_auth as auth
from tests.helpers import job
from tests.server_support import Rpc, Server

keyring = auth.keyring
as_ = auth.as_


def job_methods() -> list[str]:
    """Every method of the contract that names an existing job (``job_id``/``job_ids``)."""
    return [
        name
        for name in contract.method_names()
        if contract.scope(name) == "owner"
        and {p.name for p in contract.params(name)} & {"job_id", "job_ids"}
    ]


def job_params(method: str, job_id: str) -> dict[str, Any]:
    names = {p.name for p in contract.params(method)}
    params: dict[str, Any] = {"job_id": job_id} if "job_id" in names else {"job_ids": [job_id]}
    if "wait" in names:
        params["wait"] = 0.2
    return params


def test_the_contract_names_every_job_method() -> None:
    """The list below is derived, so it must hold at least what DESIGN names."""
    assert set(job_methods()) >= {
        "job.get", "job.status", "job.output", "job.logs", "job.start", "job.stop",
        "job.delete", "job.subscribe", "start_job", "get_job_status", "get_job_output",
        "get_job_logs", "stop_job", "delete_job",
    }  # fmt: skip


async def error_of(client: Rpc, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await client.request(method, params)
    assert "error" in response, (method, response)
    error: dict[str, Any] = response["error"]
    return error


@pytest.mark.parametrize("method", job_methods())
async def test_another_callers_job_is_answered_as_missing(
    server: Server, keyring: dict[str, str], rds: aioredis.Redis, method: str
) -> None:
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["alice"]) as alice:
        await bob.call("job.create", {"job": job("print('s3cret')", job_id="bob-job-1")})
        before = await rds.hgetall("hero:job:bob-job-1")
        foreign = await error_of(alice, method, job_params(method, "bob-job-1"))
        missing = await error_of(alice, method, job_params(method, "no-such-job"))
        assert foreign == {
            "code": -32001, "message": "Job not found: bob-job-1", "data": {"job_id": "bob-job-1"}
        }  # fmt: skip
        assert json.dumps(missing).replace("no-such-job", "bob-job-1") == json.dumps(foreign)
        assert await rds.hgetall("hero:job:bob-job-1") == before  # untouched
        assert "s3cret" not in json.dumps(alice.received)


async def test_outside_producers_jobs_belong_to_admins(
    server: Server, keyring: dict[str, str], rds: aioredis.Redis
) -> None:
    async with as_(server, keyring["ops"]) as ops, as_(server, keyring["alice"]) as alice:
        await ops.call("job.create", {"job": job(job_id="legacy-1")})  # no caller_id
        assert await rds.hget("hero:job:legacy-1", "caller_id") in (None, "")
        assert (await error_of(alice, "job.get", {"job_id": "legacy-1"}))["code"] == -32001
        taken = await error_of(alice, "job.create", {"job": job(job_id="legacy-1")})
        assert taken["code"] == -32005
        assert (await ops.call("job.get", {"job_id": "legacy-1"}))["id"] == "legacy-1"


@pytest.mark.parametrize("method", ["job.create", "job.run", "create_job", "run_job"])
async def test_an_id_another_caller_holds_is_taken(
    server: Server, keyring: dict[str, str], rds: aioredis.Redis, method: str
) -> None:
    """bob's created job is neither started nor read by alice's create or run."""
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["alice"]) as alice:
        await bob.call("job.create", {"job": job("print('s3cret')", job_id="bob-job-1")})
        params: dict[str, Any] = {"job": job(job_id="bob-job-1"), "wait": 0.5}
        if "create" in method:
            del params["wait"]
        taken = await error_of(alice, method, params)
        assert taken == {"code": -32005, "message": "Job id taken", "data": {"job_id": "bob-job-1"}}
        assert await rds.hget("hero:job:bob-job-1", "status") == "created"
        assert await rds.hget("hero:job:bob-job-1", "caller_id") == "bob"
        again = await bob.call("job.create", {"job": job(job_id="bob-job-1")})
        assert again == {"job_id": "bob-job-1", "status": "created"}  # bob's idempotency holds


async def test_a_finished_job_of_another_caller_gives_no_output(
    server: Server, keyring: dict[str, str], actors: Any
) -> None:
    """The reported attack: bob's job printed a secret; alice runs its id."""
    actors()
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["alice"]) as alice:
        done = await bob.call(
            "job.run", {"job": job("print('s3cret')", job_id="bob-job-1"), "wait": 30}
        )
        assert done["status"] == "finished" and "s3cret" in done["output"]
        taken = await error_of(alice, "job.run", {"job": job(job_id="bob-job-1"), "wait": 5})
        assert taken["code"] == -32005
        missing = await error_of(alice, "job.output", {"job_id": "bob-job-1"})
        assert missing["code"] == -32001
        assert "s3cret" not in json.dumps(alice.received)


async def test_another_callers_job_is_no_prerequisite(
    server: Server, keyring: dict[str, str], rds: aioredis.Redis
) -> None:
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["alice"]) as alice:
        await bob.call("job.create", {"job": job(job_id="bob-job-1")})
        foreign = await error_of(
            alice, "job.create", {"job": job(job_id="a1", prerequisites=["bob-job-1"])}
        )
        missing = await error_of(
            alice, "job.create", {"job": job(job_id="a1", prerequisites=["no-such-job"])}
        )
        assert foreign["code"] == -32602
        assert json.dumps(missing).replace("no-such-job", "bob-job-1") == json.dumps(foreign)
        assert await rds.hget("hero:job:bob-job-1", "dependents") == "[]"
        assert not await rds.exists("hero:job:a1")
        # bob's own job may depend on it, and is listed among its dependents
        await bob.call("job.create", {"job": job(job_id="b2", prerequisites=["bob-job-1"])})
        assert json.loads(await rds.hget("hero:job:bob-job-1", "dependents")) == ["b2"]


async def test_admins_reach_every_job(server: Server, keyring: dict[str, str]) -> None:
    async with as_(server, keyring["bob"]) as bob, as_(server, keyring["ops"]) as ops:
        await bob.call("job.create", {"job": job(job_id="bob-job-1")})
        assert (await ops.call("job.get", {"job_id": "bob-job-1"}))["caller_id"] == "bob"
        same = await ops.call("job.create", {"job": job(job_id="bob-job-1")})
        assert same == {"job_id": "bob-job-1", "status": "created"}
        await ops.call("job.create", {"job": job(job_id="o1", prerequisites=["bob-job-1"])})
        assert (await ops.call("job.stop", {"job_id": "bob-job-1"}))["status"] == "stopped"


async def test_queue_stats_show_a_user_no_other_callers_queues(
    server: Server, keyring: dict[str, str]
) -> None:
    """Bob's group and instance are names he chose: alice sees the type-level
    queues only, an admin sees them all."""
    grouped = job(job_id="bob-grouped", group="bobsecretgrp", instance="bobinst")
    async with as_(server, keyring["bob"]) as bob:
        for spec in (grouped, job(job_id="bob-plain")):
            await bob.call("job.create", {"job": spec})
            await bob.call("job.start", {"job_id": spec["job_id"]})
    async with as_(server, keyring["alice"]) as alice, as_(server, keyring["ops"]) as ops:
        seen = await alice.call("queue.stats", {})
        everything = await ops.call("queue.stats", {})
    assert "bobsecretgrp" not in json.dumps(seen)
    assert all(q["group"] is None for q in seen["queues"])
    assert sum(q["depth"] for q in seen["queues"]) >= 1  # the type queue: shared, shown
    assert any(q["group"] == "bobsecretgrp" and q["depth"] == 1 for q in everything["queues"])


@pytest.mark.parametrize(
    ("method", "params", "path"),
    [
        ("job.create", {"job": job(job_id="alice\n")}, "job.job_id"),
        ("job.create", {"job": job(caller_id="alice\n")}, "job.caller_id"),
        ("job.get", {"job_id": "alice\n"}, "job_id"),
        ("job.list", {"caller_id": "alice\n"}, "caller_id"),
        ("job.subscribe", {"job_ids": ["alice\n"]}, "job_ids.0"),
    ],
)
async def test_identifiers_are_matched_whole(
    server: Server, keyring: dict[str, str], method: str, params: dict[str, Any], path: str
) -> None:
    async with as_(server, keyring["ops"]) as ops:
        error = await error_of(ops, method, params)
    assert error["code"] == -32602
    assert error["data"]["path"] == path


async def test_key_names_are_matched_whole(store: KeyStore) -> None:
    for name, caller in (("alice\n", "alice"), ("alice", "alice\n")):
        with pytest.raises(InvalidParams):
            await store.create(name, "user", caller)
    assert await store.list_keys() == []


async def test_cli_refuses_a_trailing_newline(redis_url: str, store: KeyStore) -> None:
    argv = ["keys", "create", "--name", "alice\n", "--scope", "admin", "--redis-url", redis_url]
    assert await asyncio.to_thread(main, argv) != 0
    assert await store.list_keys() == []


async def test_a_producers_batch_is_held_to_the_same_rules(sup: Any, rds: aioredis.Redis) -> None:
    """``submit_many`` (a producer's batch) runs the same Function: another
    caller's id is refused per job, without failing the rest of the batch."""
    await sup.create(job(job_id="bob-job-1", caller_id="bob"))
    answers = await sup.submit_many(
        [job(job_id="bob-job-1", caller_id="alice"), job(job_id="a2", caller_id="alice")],
        start=False,
    )
    assert answers == [
        {"job_id": "bob-job-1", "status": "invalid", "error": "id taken"},
        {"job_id": "a2", "status": "created", "queue": None},
    ]
    again = await sup.submit_many([job(job_id="bob-job-1", caller_id="bob")], start=True)
    assert again[0]["status"] == "dispatched"  # its owner's run starts the created job
    assert await rds.hget("hero:job:bob-job-1", "status") == "dispatched"
