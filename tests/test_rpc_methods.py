"""The method table's identity rules, through the real dispatcher and contract.

Pure logic: the handlers only call the supervisor through its protocol, so an
in-memory stand-in that records calls is enough to check who may do what.
Every result is also checked against the contract's result schemas
(``check_results``), so realistic supervisor answers must fit the contract.
The supervisor's own behaviour is tested against a real Redis elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import pytest

from gateway.errors import InvalidJob, JobNotFound
from gateway.rpc.backends import Backends, JobIds, JsonObject, JsonObjects
from gateway.rpc.context import ANONYMOUS, CallContext, Identity
from gateway.rpc.methods import build_dispatcher
from gateway.rpc.protocol import handle_frame

ALICE = Identity("alice-key", "user", "alice")
BOB = Identity("bob-key", "user", "bob")
ADMIN = Identity("ops", "admin")


def _job(job_id: str, caller_id: str | None) -> JsonObject:
    return {
        "id": job_id,
        "caller_id": caller_id,
        "context_id": None,
        "worker_id": None,
        "script": "print(1)",
        "script_type": "python",
        "timeout": 300,
        "retries": 0,
        "concurrent": False,
        "log_path": None,
        "created_at": "2025-01-01T00:00:00+00:00",
        "updated_at": None,
        "status": "created",
        "env_vars": {},
        "prerequisites": [],
        "dependents": [],
        "output": None,
        "error": None,
        "group": None,
        "instance": None,
        "priority": 1,
        "attempt": 0,
        "started_at": None,
        "finished_at": None,
        "actor": None,
        "queue": None,
    }


class FakeSupervisor:
    """Two jobs, one per caller; records what it was asked."""

    def __init__(self) -> None:
        self.jobs = {"a1": _job("a1", "alice"), "b1": _job("b1", "bob")}
        self.calls: list[tuple[str, Any]] = []
        self.invalid_job = False
        self.validated: list[bool] = []  # per create/run: was the spec marked checked?

    def _find(self, job_id: str) -> JsonObject:
        if job_id not in self.jobs:
            raise JobNotFound(job_id)
        return self.jobs[job_id]

    async def create(self, spec: JsonObject, *, validated: bool = False) -> JsonObject:
        self.calls.append(("create", spec))
        self.validated.append(validated)
        if self.invalid_job:
            raise InvalidJob(
                "Invalid job: script_type must be one of osis, python",
                [
                    {
                        "field": "script_type",
                        "message": "must be one of osis, python",
                        "schema_path": "",
                    }
                ],
            )
        job_id = spec.get("job_id", "new1")
        self.jobs[job_id] = _job(job_id, spec.get("caller_id"))
        return {"job_id": job_id, "status": "created"}

    async def start(self, job_id: str) -> JsonObject:
        self.calls.append(("start", job_id))
        self._find(job_id)
        return {"job_id": job_id, "status": "dispatched", "queue": "q"}

    async def run(
        self, spec: JsonObject, wait: float | None = None, *, validated: bool = False
    ) -> JsonObject:
        self.calls.append(("run", (spec, wait)))
        self.validated.append(validated)
        return {"job_id": "r1", "status": "finished", "output": "1", "error": None}

    async def output(self, job_id: str, wait: float | None = None) -> JsonObject:
        self.calls.append(("output", (job_id, wait)))
        self._find(job_id)
        return {"job_id": job_id, "status": "finished", "output": "1", "error": None}

    async def status(self, job_id: str) -> JsonObject:
        self.calls.append(("status", job_id))
        return {"job_id": job_id, "status": self._find(job_id)["status"]}

    async def get(self, job_id: str) -> JsonObject:
        self.calls.append(("get", job_id))
        return self._find(job_id)

    async def owner(self, job_id: str) -> str | None:
        return self._find(job_id)["caller_id"] or ""

    async def list_jobs(
        self,
        status: str | None = None,
        script_type: str | None = None,
        caller_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> JsonObject:
        self.calls.append(("list", {"caller_id": caller_id, "limit": limit, "status": status}))
        jobs = [j for j in self.jobs.values() if caller_id in (None, j["caller_id"])]
        return {"jobs": jobs[:limit], "next_cursor": None}

    async def stop(self, job_id: str) -> JsonObject:
        self.calls.append(("stop", job_id))
        self._find(job_id)
        return {"job_id": job_id, "status": "stopped"}

    async def delete(self, job_id: str) -> JsonObject:
        self.calls.append(("delete", job_id))
        return {"deleted": self.jobs.pop(job_id, None) is not None}

    async def logs(self, job_id: str) -> JsonObject:
        self.calls.append(("logs", job_id))
        self._find(job_id)
        return {"job_id": job_id, "logs": ""}

    async def queue_stats(self, script_type: str | None = None) -> JsonObjects:
        return [
            {
                "queue": "q",
                "mode": "list",
                "script_type": "python",
                "group": None,
                "instance": None,
                "priority": 1,
                "depth": 2,
                "lag": 2,
                "pending": 0,
                "oldest_age": 1.5,
                "consumers": 1,
            }
        ]

    async def actors(self, script_type: str | None = None) -> JsonObjects:
        return [
            {
                "script_type": "python",
                "group": "g",
                "instance": "i",
                "pid": 42,
                "hostname": "h",
                "started_at": 1.7e9,
                "version": "0.1.0",
                "capabilities": [],
                "last_heartbeat": 1.7e9,
            }
        ]

    async def report(self) -> JsonObject | None:
        return None

    async def dlq_list(self, script_type: str | None = None, limit: int = 50) -> JsonObjects:
        self.calls.append(("dlq_list", (script_type, limit)))
        return []

    async def purge(self, status: str = "finished", older_than: float = 0.0) -> JsonObject:
        self.calls.append(("purge", (status, older_than)))
        return {"deleted": 3}

    async def dlq_replay(self, script_type: str, job_ids: JobIds | None = None) -> JobIds:
        self.calls.append(("dlq_replay", (script_type, job_ids)))
        return list(job_ids or [])


class FakeKeys:
    async def verify(self, key: str) -> Mapping[str, Any] | None:
        if key != "k-a":
            return None
        return {"name": "alice-key", "scope": "user", "caller_id": "alice"}


class FakeSubscriptions:
    def __init__(self) -> None:
        self.made: list[dict[str, Any]] = []

    async def subscribe(
        self,
        *,
        job_ids: Collection[str] | None,
        script_type: str | None,
        caller_id: str | None,
        since: str | None,
    ) -> str:
        self.made.append(
            {"job_ids": job_ids, "script_type": script_type, "caller_id": caller_id, "since": since}
        )
        return f"sub{len(self.made)}"

    async def unsubscribe(self, subscription: str) -> bool:
        return subscription == "sub1"


@pytest.fixture
def sup() -> FakeSupervisor:
    return FakeSupervisor()


async def call(
    sup: FakeSupervisor,
    ctx: CallContext,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    keys: FakeKeys | None = None,
) -> Any:
    dispatcher = build_dispatcher(Backends(supervisor=sup, keys=keys), check_results=True)
    message = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": 1}
    reply = await handle_frame(json.dumps(message), dispatcher, ctx)
    assert reply is not None
    return json.loads(reply)


def code(reply: Any) -> int | None:
    found: int | None = reply.get("error", {}).get("code")
    return found


SPEC = {"script": "print(1)", "script_type": "python"}


# -- users act as their caller id ---------------------------------------------------------


async def test_user_jobs_carry_the_users_caller_id(sup: FakeSupervisor) -> None:
    spoofed = dict(SPEC, caller_id="bob", job_id="x1")
    reply = await call(sup, CallContext(ALICE), "job.create", {"job": spoofed})
    assert reply["result"] == {"job_id": "x1", "status": "created"}
    assert sup.calls[-1] == ("create", dict(spoofed, caller_id="alice"))
    await call(sup, CallContext(ALICE), "job.run", {"job": SPEC, "wait": 5})
    run: tuple[str, Any] = sup.calls[-1]
    assert run == ("run", (dict(SPEC, caller_id="alice"), 5))


@pytest.mark.parametrize("method", ["job.create", "job.run", "create_job", "run_job"])
async def test_a_checked_jobspec_reaches_the_supervisor_marked_validated(
    sup: FakeSupervisor, method: str
) -> None:
    """The params check already validated the JobSpec: the supervisor is told so,
    and does not run the schema a second time."""
    reply = await call(sup, CallContext(ADMIN), method, {"job": SPEC})
    assert "result" in reply
    assert sup.validated == [True]


async def test_an_invalid_jobspec_never_reaches_the_supervisor(sup: FakeSupervisor) -> None:
    reply = await call(sup, CallContext(ADMIN), "job.create", {"job": dict(SPEC, priority=7)})
    assert code(reply) == -32602
    assert reply["error"]["data"]["path"] == "job.priority"
    assert sup.calls == [] and sup.validated == []


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("job.get", {}),
        ("job.status", {}),
        ("job.output", {"wait": 1}),
        ("job.stop", {}),
        ("job.delete", {}),
        ("job.logs", {}),
        ("job.start", {}),
        ("get_job_status", {}),
        ("delete_job", {}),
    ],
)
async def test_another_callers_job_is_not_found(
    sup: FakeSupervisor, method: str, extra: dict[str, Any]
) -> None:
    """Answered exactly as a job that does not exist (the id aside)."""
    reply = await call(sup, CallContext(ALICE), method, {"job_id": "b1", **extra})
    missing = await call(sup, CallContext(ALICE), method, {"job_id": "zz", **extra})
    assert reply["error"] == {
        "code": -32001,
        "message": "Job not found: b1",
        "data": {"job_id": "b1"},
    }
    assert json.dumps(missing).replace("zz", "b1") == json.dumps(reply)
    assert sup.calls == []  # nothing was done to it
    assert "b1" in sup.jobs
    own = await call(sup, CallContext(ALICE), method, {"job_id": "a1", **extra})
    assert "result" in own, own


@pytest.mark.parametrize("who", [ADMIN, ANONYMOUS])
async def test_admin_and_anonymous_see_every_job(sup: FakeSupervisor, who: Identity) -> None:
    assert (await call(sup, CallContext(who), "job.get", {"job_id": "b1"}))["result"]["id"] == "b1"
    assert "result" in await call(sup, CallContext(who), "job.stop", {"job_id": "a1"})


async def test_missing_job_is_not_found_for_everyone(sup: FakeSupervisor) -> None:
    for who in (ALICE, ADMIN):
        reply = await call(sup, CallContext(who), "job.output", {"job_id": "zz"})
        assert code(reply) == -32001
        assert reply["error"]["data"] == {"job_id": "zz"}


async def test_user_lists_only_its_own_jobs(sup: FakeSupervisor) -> None:
    reply = await call(sup, CallContext(ALICE), "job.list", {"limit": 10})
    assert [j["id"] for j in reply["result"]["jobs"]] == ["a1"]
    assert sup.calls[-1] == ("list", {"caller_id": "alice", "limit": 10, "status": None})
    assert code(await call(sup, CallContext(ALICE), "job.list", {"caller_id": "bob"})) == -32005
    assert "result" in await call(sup, CallContext(ALICE), "list_jobs", {"caller_id": "alice"})


async def test_admin_lists_anyone(sup: FakeSupervisor) -> None:
    reply = await call(sup, CallContext(ADMIN), "job.list", {"caller_id": "bob"})
    assert [j["id"] for j in reply["result"]["jobs"]] == ["b1"]
    reply = await call(sup, CallContext(ADMIN), "job.list")
    assert sup.calls[-1] == ("list", {"caller_id": None, "limit": 50, "status": None})


async def test_purge_is_for_admins(sup: FakeSupervisor) -> None:
    assert code(await call(sup, CallContext(ALICE), "job.purge")) == -32005
    assert sup.calls == []
    params = {"status": "error", "older_than": 60}
    assert (await call(sup, CallContext(ADMIN), "job.purge", params))["result"] == {"deleted": 3}
    assert sup.calls[-1] == ("purge", ("error", 60))
    await call(sup, CallContext(ADMIN), "job.purge")
    assert sup.calls[-1] == ("purge", ("finished", 0.0))
    bad = await call(sup, CallContext(ADMIN), "job.purge", {"status": "started"})
    assert code(bad) == -32602 and len(sup.calls) == 2  # only ended jobs can be purged


async def test_dead_letters_are_for_admins(sup: FakeSupervisor) -> None:
    params = {"script_type": "python", "job_ids": ["a1"]}
    assert code(await call(sup, CallContext(ALICE), "queue.dlq.replay", params)) == -32005
    assert code(await call(sup, CallContext(ALICE), "queue.dlq.list")) == -32005
    assert sup.calls == []
    reply = await call(sup, CallContext(ADMIN), "queue.dlq.replay", params)
    assert reply["result"] == {"replayed": ["a1"]}
    assert (await call(sup, CallContext(ADMIN), "queue.dlq.list", {"limit": 5}))["result"] == {
        "entries": []
    }
    assert sup.calls[-1] == ("dlq_list", (None, 5))


async def test_operational_reads_for_any_identity(sup: FakeSupervisor) -> None:
    ctx = CallContext(ALICE)
    assert (await call(sup, ctx, "queue.stats"))["result"]["queues"][0]["depth"] == 2
    assert (await call(sup, ctx, "actor.list"))["result"]["actors"][0]["pid"] == 42
    assert (await call(sup, ctx, "stats.report"))["result"] is None


# -- authentication ---------------------------------------------------------------------------


async def test_no_identity_is_unauthenticated(sup: FakeSupervisor) -> None:
    ctx = CallContext(None)
    for method, params in [("job.get", {"job_id": "a1"}), ("auth.whoami", {}), ("queue.stats", {})]:
        assert code(await call(sup, ctx, method, params, keys=FakeKeys())) == -32004
    assert sup.calls == []


async def test_anonymous_only_without_keys(sup: FakeSupervisor) -> None:
    ctx = CallContext(ANONYMOUS)
    assert code(await call(sup, ctx, "job.get", {"job_id": "a1"}, keys=FakeKeys())) == -32004
    assert "result" in await call(sup, ctx, "job.get", {"job_id": "a1"})


async def test_login_sets_the_connections_identity(sup: FakeSupervisor) -> None:
    ctx = CallContext(None)
    keys = FakeKeys()
    assert code(await call(sup, ctx, "auth.login", {"key": "wrong"}, keys=keys)) == -32004
    assert ctx.identity is None
    reply = await call(sup, ctx, "auth.login", {"key": "k-a"}, keys=keys)
    assert reply["result"] == {"name": "alice-key", "scope": "user", "caller_id": "alice"}
    assert ctx.identity == ALICE
    assert (await call(sup, ctx, "auth.whoami", keys=keys))["result"]["caller_id"] == "alice"
    assert code(await call(sup, ctx, "job.get", {"job_id": "b1"}, keys=keys)) == -32001


async def test_login_without_keys_says_anonymous(sup: FakeSupervisor) -> None:
    reply = await call(sup, CallContext(ANONYMOUS), "auth.login", {"key": "anything"})
    assert reply["result"]["scope"] == "anonymous"


async def test_discovery_needs_no_identity(sup: FakeSupervisor) -> None:
    reply = await call(sup, CallContext(None), "rpc.discover", keys=FakeKeys())
    assert reply["result"]["openrpc"] == "1.3.2"


def test_user_identity_needs_a_caller_id() -> None:
    with pytest.raises(ValueError):
        Identity("k", "user")
    with pytest.raises(ValueError):
        Identity.from_mapping({"name": "k", "scope": "root"})


# -- subscriptions ------------------------------------------------------------------------------


async def test_subscriptions_need_a_push_channel(sup: FakeSupervisor) -> None:
    reply = await call(sup, CallContext(ADMIN), "job.subscribe", {"script_type": "python"})
    assert code(reply) == -32002
    reply = await call(sup, CallContext(ADMIN), "job.unsubscribe", {"subscription": "s"})
    assert code(reply) == -32002


async def test_user_subscriptions_are_limited_to_own_jobs(sup: FakeSupervisor) -> None:
    subs = FakeSubscriptions()
    ctx = CallContext(ALICE, subscriptions=subs)
    reply = await call(sup, ctx, "job.subscribe", {"script_type": "python", "since": "1-0"})
    assert reply["result"] == {"subscription": "sub1"}
    assert subs.made[-1] == {
        "job_ids": None,
        "script_type": "python",
        "caller_id": "alice",
        "since": "1-0",
    }
    assert code(await call(sup, ctx, "job.subscribe", {"job_ids": ["a1", "b1"]})) == -32001
    assert len(subs.made) == 1
    assert (await call(sup, ctx, "job.unsubscribe", {"subscription": "sub1"}))["result"] == {
        "unsubscribed": True
    }


async def test_admin_subscriptions_are_unfiltered(sup: FakeSupervisor) -> None:
    subs = FakeSubscriptions()
    await call(sup, CallContext(ADMIN, subscriptions=subs), "job.subscribe", {"job_ids": ["b1"]})
    assert subs.made[-1]["caller_id"] is None and subs.made[-1]["job_ids"] == ["b1"]


# -- shapes ------------------------------------------------------------------------------------


async def test_supervisor_invalid_job_is_reshaped_like_every_32602(sup: FakeSupervisor) -> None:
    sup.invalid_job = True
    reply = await call(sup, CallContext(ADMIN), "create_job", {"job": SPEC})
    assert code(reply) == -32602
    data = reply["error"]["data"]
    assert data["path"] == "job.script_type"
    assert data["schema_path"] == "#/components/schemas/JobSpec"
    assert data["errors"] == [{k: data[k] for k in ("path", "schema_path", "message")}]


async def test_hero_names_behave_like_the_new_ones(sup: FakeSupervisor) -> None:
    ctx = CallContext(ADMIN)
    new = await call(sup, ctx, "job.output", {"job_id": "a1", "wait": 2})
    old = await call(sup, ctx, "get_job_output", {"job_id": "a1", "wait": 2})
    assert new == old and new["result"]["status"] == "finished"
