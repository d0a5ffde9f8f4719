"""The method table's identity rules, through the real dispatcher and contract.

Every call goes through ``build_dispatcher`` and ``handle_frame`` (the params
check, the scope's access rules, the handler) to a real ``Supervisor`` on the
session's redis-server, a real ``KeyStore`` and real
``ConnectionSubscriptions``; only the socket is left out (``handle_frame``
gets the frame, notifications are recorded). So each rule is checked by its
effect in Redis: the job a user submits carries the user's caller_id, another
caller's job is untouched by what a user asks of it, a user's subscription
gets only its own jobs' events. Every result is also checked against the
contract's result schemas (``check_results``). Jobs ``a1`` (alice's) and
``b1`` (bob's) exist, created, before each test.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from gateway.actor import Actor, python_actor
from gateway.config import Config
from gateway.errors import JobNotFound
from gateway.rpc.backends import Backends
from gateway.rpc.context import ANONYMOUS, CallContext, Identity
from gateway.rpc.methods import build_dispatcher, build_methods
from gateway.rpc.protocol import handle_frame
from gateway.rpc.subscriptions import EVENT_METHOD, ConnectionSubscriptions
from gateway.supervisor import Supervisor
from gateway.supervisor.auth import KeyStore
from tests.helpers import eventually, job

ALICE = Identity("alice-key", "user", "alice")
ADMIN = Identity("ops", "admin")

SPEC = job("print(1)")
JOBSPEC = "#/components/schemas/JobSpec"


@pytest.fixture
async def jobs(sup: Supervisor) -> Supervisor:
    """The supervisor, with alice's a1 and bob's b1 created."""
    await sup.create(job(job_id="a1", caller_id="alice"))
    await sup.create(job(job_id="b1", caller_id="bob"))
    return sup


@pytest.fixture
def backends(jobs: Supervisor, config: Config) -> Backends:
    """What a server without API keys serves."""
    return Backends(
        supervisor=jobs, script_types=config.script_types, stream_types=config.stream_types
    )


@pytest.fixture
def keyed(backends: Backends, store: KeyStore) -> Backends:
    """What a server with API keys serves."""
    return replace(backends, keys=store)


async def call(
    backends: Backends, ctx: CallContext, method: str, params: dict[str, Any] | None = None
) -> Any:
    dispatcher = build_dispatcher(backends, check_results=True)
    message = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": 1}
    reply = await handle_frame(json.dumps(message), dispatcher, ctx)
    assert reply is not None
    return json.loads(reply)


def code(reply: Any) -> int | None:
    found: int | None = reply.get("error", {}).get("code")
    return found


async def exists(sup: Supervisor, job_id: str) -> bool:
    try:
        await sup.get(job_id)
    except JobNotFound:
        return False
    return True


async def job_ids(sup: Supervisor) -> set[str]:
    return {j["id"] for j in (await sup.list_jobs(limit=500))["jobs"]}


# -- users act as their caller id ---------------------------------------------------------


async def test_user_jobs_carry_the_users_caller_id(
    backends: Backends, jobs: Supervisor, python_actor: Actor
) -> None:
    spoofed = dict(SPEC, caller_id="bob", job_id="x1")
    reply = await call(backends, CallContext(ALICE), "job.create", {"job": spoofed})
    assert reply["result"] == {"job_id": "x1", "status": "created"}
    assert (await jobs.get("x1"))["caller_id"] == "alice"
    ran = dict(SPEC, caller_id="bob", job_id="x2")
    reply = await call(backends, CallContext(ALICE), "job.run", {"job": ran, "wait": 20})
    assert reply["result"]["status"] == "finished", reply
    assert (await jobs.get("x2"))["caller_id"] == "alice"


@pytest.mark.parametrize("method", ["job.create", "job.run", "create_job", "run_job"])
async def test_a_jobspec_the_contract_accepted_reaches_the_supervisor(
    backends: Backends, jobs: Supervisor, python_actor: Actor, method: str
) -> None:
    """Built into a JobSpec by the rpc layer: the job exists with the fields asked for."""
    spec = dict(SPEC, job_id="n1", priority=2, timeout=30, env_vars={"K": "v"}, retries=1)
    params: dict[str, Any] = {"job": spec}
    if "run" in method:
        params["wait"] = 20
    reply = await call(backends, CallContext(ADMIN), method, params)
    assert reply["result"]["job_id"] == "n1", reply
    stored = await jobs.get("n1")
    assert (stored["script"], stored["script_type"]) == (SPEC["script"], "python")
    assert (stored["priority"], stored["timeout"], stored["retries"]) == (2, 30, 1)
    assert stored["env_vars"] == {"K": "v"} and stored["caller_id"] is None
    assert stored["status"] == ("finished" if "run" in method else "created")


async def test_a_users_batch_is_answered_in_order_each_element_on_its_own(
    backends: Backends, jobs: Supervisor
) -> None:
    """The throughput path: a batch of ``job.create`` and ``job.start`` (merged
    submits and starts, handlers that hand on the supervisor's awaitable)
    answers every element in its place, each as that call answers alone."""
    calls = [
        ("job.create", {"job": dict(SPEC, job_id="o1")}),
        ("job.create", {"job": dict(SPEC, job_id="o2", prerequisites=["nowhere"])}),
        ("job.start", {"job_id": "o1"}),
        ("job.start", {"job_id": "b1"}),  # bob's: answered as missing
        ("job.create", {"job": dict(SPEC, job_id="o3", priority=9)}),
        ("start_job", {"job_id": "a1"}),
        ("job.start", {"job_id": "o1"}),  # started by its own batch already
    ]
    frame = [
        {"jsonrpc": "2.0", "method": m, "params": p, "id": i} for i, (m, p) in enumerate(calls)
    ]
    dispatcher = build_dispatcher(backends, check_results=True)
    reply = await handle_frame(json.dumps(frame), dispatcher, CallContext(ALICE))
    answers = json.loads(reply or "[]")
    assert [a["id"] for a in answers] == list(range(len(calls)))
    queue = "hero:q:work:type:python"
    assert answers[0]["result"] == {"job_id": "o1", "status": "created"}
    assert answers[2]["result"] == {"job_id": "o1", "status": "dispatched", "queue": queue}
    assert answers[5]["result"] == {"job_id": "a1", "status": "dispatched", "queue": queue}
    assert [code(a) for a in answers] == [None, -32602, None, -32001, -32602, None, -32002]
    assert answers[1]["error"]["data"]["path"] == "job.prerequisites"
    assert answers[4]["error"]["data"]["path"] == "job.priority"
    assert (await jobs.get("o1"))["caller_id"] == "alice"
    assert await job_ids(jobs) == {"a1", "b1", "o1"}


def test_handlers_that_only_hand_on_make_no_coroutine_of_their_own(backends: Backends) -> None:
    """Each awaits nothing of its own: the dispatcher awaits the supervisor's
    awaitable (one coroutine frame fewer per call, every ``job.start`` of a batch)."""
    methods = build_methods(backends)
    for name in ("job.start", "job.status", "job.get", "job.stop", "job.logs", "job.output"):
        assert not inspect.iscoroutinefunction(methods[name]), name


@pytest.mark.parametrize(
    ("bad", "path", "schema_path"),
    [
        ({"priority": 7}, "job.priority", f"{JOBSPEC}/properties/priority/maximum"),
        ({"script_type": "ruby"}, "job.script_type", JOBSPEC),
    ],
)
@pytest.mark.parametrize("method", ["job.create", "job.run", "create_job"])
async def test_an_invalid_jobspec_creates_nothing(
    backends: Backends,
    jobs: Supervisor,
    method: str,
    bad: dict[str, Any],
    path: str,
    schema_path: str,
) -> None:
    """The contract's schema (priority) and the configured types (script_type,
    checked by ``Backends.job_spec``) give the same -32602 shape."""
    spec = {**SPEC, "job_id": "z", **bad}
    reply = await call(backends, CallContext(ADMIN), method, {"job": spec})
    assert code(reply) == -32602, reply
    data = reply["error"]["data"]
    assert (data["path"], data["schema_path"]) == (path, schema_path)
    assert data["errors"] == [{k: data[k] for k in ("path", "schema_path", "message")}]
    assert await job_ids(jobs) == {"a1", "b1"}


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("job.get", {}),
        ("job.status", {}),
        ("job.output", {"wait": 0.1}),
        ("job.stop", {}),
        ("job.delete", {}),
        ("job.logs", {}),
        ("job.start", {}),
        ("get_job_status", {}),
        ("delete_job", {}),
    ],
)
async def test_another_callers_job_is_not_found(
    backends: Backends, jobs: Supervisor, method: str, extra: dict[str, Any]
) -> None:
    """Answered exactly as a job that does not exist (the id aside), and left as it was."""
    before = await jobs.get("b1")
    reply = await call(backends, CallContext(ALICE), method, {"job_id": "b1", **extra})
    missing = await call(backends, CallContext(ALICE), method, {"job_id": "zz", **extra})
    assert reply["error"] == {
        "code": -32001,
        "message": "Job not found: b1",
        "data": {"job_id": "b1"},
    }
    assert json.dumps(missing).replace("zz", "b1") == json.dumps(reply)
    assert await jobs.get("b1") == before  # nothing was done to it
    own = await call(backends, CallContext(ALICE), method, {"job_id": "a1", **extra})
    if method == "job.output":  # a1 is found, and never ends: the wait times out
        assert code(own) == -32003, own
    else:
        assert "result" in own, own


@pytest.mark.parametrize("who", [ADMIN, ANONYMOUS])
async def test_admin_and_anonymous_see_every_job(
    backends: Backends, jobs: Supervisor, who: Identity
) -> None:
    ctx = CallContext(who)
    assert (await call(backends, ctx, "job.get", {"job_id": "b1"}))["result"]["id"] == "b1"
    assert "result" in await call(backends, ctx, "job.stop", {"job_id": "b1"})
    assert (await jobs.status("b1"))["status"] == "stopped"


async def test_missing_job_is_not_found_for_everyone(backends: Backends) -> None:
    for who in (ALICE, ADMIN):
        reply = await call(backends, CallContext(who), "job.output", {"job_id": "zz"})
        assert code(reply) == -32001
        assert reply["error"]["data"] == {"job_id": "zz"}


async def test_user_lists_only_its_own_jobs(backends: Backends) -> None:
    ctx = CallContext(ALICE)
    reply = await call(backends, ctx, "job.list", {"limit": 10})
    assert [j["id"] for j in reply["result"]["jobs"]] == ["a1"]
    assert code(await call(backends, ctx, "job.list", {"caller_id": "bob"})) == -32005
    reply = await call(backends, ctx, "list_jobs", {"caller_id": "alice"})
    assert [j["id"] for j in reply["result"]["jobs"]] == ["a1"]


async def test_admin_lists_anyone(backends: Backends) -> None:
    reply = await call(backends, CallContext(ADMIN), "job.list", {"caller_id": "bob"})
    assert [j["id"] for j in reply["result"]["jobs"]] == ["b1"]
    reply = await call(backends, CallContext(ADMIN), "job.list")
    assert {j["id"] for j in reply["result"]["jobs"]} == {"a1", "b1"}


async def test_purge_is_for_admins(backends: Backends, jobs: Supervisor) -> None:
    await jobs.stop("a1")
    params = {"status": "stopped", "older_than": 0}
    assert code(await call(backends, CallContext(ALICE), "job.purge", params)) == -32005
    assert await exists(jobs, "a1")
    bad = await call(backends, CallContext(ADMIN), "job.purge", {"status": "started"})
    assert code(bad) == -32602  # only ended jobs can be purged
    assert await job_ids(jobs) == {"a1", "b1"}
    purged = await call(backends, CallContext(ADMIN), "job.purge", params)
    assert purged["result"] == {"deleted": 1}
    assert await job_ids(jobs) == {"b1"}  # the created job stays


async def test_dead_letters_are_for_admins(
    backends: Backends, jobs: Supervisor, config: Config, actors: Callable[..., Actor]
) -> None:
    actor = actors(python_actor(replace(config, retry_base=0.01, retry_max=0.05)))
    dead = await jobs.run(job("raise SystemExit(3)", job_id="dead", retries=1), wait=20)
    assert dead["status"] == "dlq"
    actor.stop()  # a replayed job must stay on its queue
    params = {"script_type": "python", "job_ids": ["dead"]}
    assert code(await call(backends, CallContext(ALICE), "queue.dlq.replay", params)) == -32005
    assert code(await call(backends, CallContext(ALICE), "queue.dlq.list")) == -32005
    assert (await jobs.status("dead"))["status"] == "dlq"
    listed = await call(backends, CallContext(ADMIN), "queue.dlq.list", {"limit": 5})
    assert [e["job_id"] for e in listed["result"]["entries"]] == ["dead"]
    reply = await call(backends, CallContext(ADMIN), "queue.dlq.replay", params)
    assert reply["result"] == {"replayed": ["dead"]}
    assert await jobs.dlq_list("python") == []


async def test_operational_reads_for_any_identity(
    backends: Backends, jobs: Supervisor, actors: Callable[..., Actor]
) -> None:
    """A user sees the type-level queues only (group names come from callers)."""
    await jobs.start("a1")
    await jobs.create(job(job_id="g1", caller_id="bob", group="bobs"))
    await jobs.start("g1")
    seen = {}
    for who in (ALICE, ADMIN):
        reply = await call(backends, CallContext(who), "queue.stats")
        seen[who.name] = {(q["group"], q["depth"]) for q in reply["result"]["queues"]}
    assert (None, 1) in seen["alice-key"] and ("bobs", 1) in seen["ops"]
    assert {group for group, _ in seen["alice-key"]} == {None}
    assert (await call(backends, CallContext(ALICE), "stats.report"))["result"] is None
    actors()

    async def listed() -> bool:
        reply = await call(backends, CallContext(ALICE), "actor.list")
        return [a["pid"] for a in reply["result"]["actors"]] == [os.getpid()]

    await eventually(listed)


# -- authentication ---------------------------------------------------------------------------


async def test_no_identity_is_unauthenticated(keyed: Backends, jobs: Supervisor) -> None:
    ctx = CallContext(None)
    for method, params in [("job.get", {"job_id": "a1"}), ("auth.whoami", {}), ("queue.stats", {})]:
        assert code(await call(keyed, ctx, method, params)) == -32004
    assert code(await call(keyed, ctx, "job.delete", {"job_id": "a1"})) == -32004
    assert await exists(jobs, "a1")


async def test_anonymous_only_without_keys(backends: Backends, keyed: Backends) -> None:
    ctx = CallContext(ANONYMOUS)
    assert code(await call(keyed, ctx, "job.get", {"job_id": "a1"})) == -32004
    assert "result" in await call(backends, ctx, "job.get", {"job_id": "a1"})


async def test_login_sets_the_connections_identity(keyed: Backends, store: KeyStore) -> None:
    key = await store.create("alice-key", "user", "alice")
    ctx = CallContext(None)
    assert code(await call(keyed, ctx, "auth.login", {"key": key + "x"})) == -32004
    assert ctx.identity is None
    reply = await call(keyed, ctx, "auth.login", {"key": key})
    assert reply["result"] == {"name": "alice-key", "scope": "user", "caller_id": "alice"}
    assert ctx.identity == ALICE
    assert (await call(keyed, ctx, "auth.whoami"))["result"]["caller_id"] == "alice"
    assert code(await call(keyed, ctx, "job.get", {"job_id": "b1"})) == -32001
    assert await store.revoke("alice-key")
    assert code(await call(keyed, CallContext(None), "auth.login", {"key": key})) == -32004


async def test_login_without_keys_says_anonymous(backends: Backends) -> None:
    reply = await call(backends, CallContext(ANONYMOUS), "auth.login", {"key": "anything"})
    assert reply["result"]["scope"] == "anonymous"


async def test_discovery_needs_no_identity(keyed: Backends) -> None:
    reply = await call(keyed, CallContext(None), "rpc.discover")
    assert reply["result"]["openrpc"] == "1.3.2"


def test_user_identity_needs_a_caller_id() -> None:
    with pytest.raises(ValueError):
        Identity("k", "user")
    with pytest.raises(ValueError):
        Identity.from_mapping({"name": "k", "scope": "root"})


# -- subscriptions ------------------------------------------------------------------------------


class Pushed:
    """A connection's subscriptions, with the notifications it would send and
    why it would be closed recorded instead of going to a socket."""

    def __init__(self, sup: Supervisor) -> None:
        self.events: dict[str, list[str]] = {}  # subscription id -> job ids, in order
        self.lost: list[str] = []
        self.subs = ConnectionSubscriptions(sup, self.notify, self.on_lost)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        assert method == EVENT_METHOD
        self.events.setdefault(params["subscription"], []).append(params["event"]["job_id"])

    async def on_lost(self, reason: str) -> None:
        self.lost.append(reason)


@pytest.fixture
async def push(jobs: Supervisor) -> AsyncIterator[Pushed]:
    pushed = Pushed(jobs)
    yield pushed
    await pushed.subs.close()


async def test_subscriptions_need_a_push_channel(backends: Backends) -> None:
    reply = await call(backends, CallContext(ADMIN), "job.subscribe", {"script_type": "python"})
    assert code(reply) == -32002
    reply = await call(backends, CallContext(ADMIN), "job.unsubscribe", {"subscription": "s"})
    assert code(reply) == -32002


async def test_user_subscriptions_get_only_own_jobs(
    backends: Backends, jobs: Supervisor, push: Pushed
) -> None:
    """Replayed (``since``) and live events alike; an admin's subscription gets both callers'."""
    subs = push.subs
    params = {"script_type": "python", "since": "0-0"}
    mine = await call(backends, CallContext(ALICE, subscriptions=subs), "job.subscribe", params)
    every = await call(backends, CallContext(ADMIN, subscriptions=subs), "job.subscribe", params)
    alice, admin = mine["result"]["subscription"], every["result"]["subscription"]
    await jobs.create(job(job_id="b2", caller_id="bob"))
    await jobs.create(job(job_id="a2", caller_id="alice"))  # after b2 in the stream

    async def delivered() -> bool:
        return all("a2" in push.events.get(sub, []) for sub in (alice, admin))

    await eventually(delivered)
    assert push.events[alice] == ["a1", "a2"]
    assert push.events[admin] == ["a1", "b1", "b2", "a2"]
    assert push.lost == []


async def test_a_user_cannot_subscribe_to_another_callers_job(
    backends: Backends, push: Pushed
) -> None:
    subs = push.subs
    ctx = CallContext(ALICE, subscriptions=subs)
    assert code(await call(backends, ctx, "job.subscribe", {"job_ids": ["a1", "b1"]})) == -32001
    assert len(subs) == 0
    reply = await call(backends, ctx, "job.subscribe", {"job_ids": ["a1"]})
    subscription = reply["result"]["subscription"]
    assert len(subs) == 1
    params = {"subscription": subscription}
    twice = [await call(backends, ctx, "job.unsubscribe", params) for _ in range(2)]
    assert [r["result"]["unsubscribed"] for r in twice] == [True, False]
    assert len(subs) == 0


async def test_admin_subscribes_to_anyones_job(
    backends: Backends, jobs: Supervisor, push: Pushed
) -> None:
    subs = push.subs
    ctx = CallContext(ADMIN, subscriptions=subs)
    reply = await call(backends, ctx, "job.subscribe", {"job_ids": ["b1"], "since": "0-0"})
    subscription = reply["result"]["subscription"]
    await jobs.stop("b1")

    async def stopped() -> bool:
        return len(push.events.get(subscription, [])) == 2

    await eventually(stopped)
    assert push.events[subscription] == ["b1", "b1"]  # created, stopped


# -- shapes ------------------------------------------------------------------------------------


async def test_hero_names_behave_like_the_new_ones(backends: Backends, jobs: Supervisor) -> None:
    await jobs.stop("a1")
    ctx = CallContext(ADMIN)
    new = await call(backends, ctx, "job.output", {"job_id": "a1", "wait": 2})
    old = await call(backends, ctx, "get_job_output", {"job_id": "a1", "wait": 2})
    assert new == old and new["result"]["status"] == "stopped"
