"""Every method of the contract by {no key, user, other user, admin}, on a real
gateway and a real redis-server.

The cases are generated from ``openrpc/openrpc.json``: each method's declared
``x-scope`` says what each identity must get, and its params are built from
their names (a param this file does not know fails the test, so a new method
cannot be left out). "Allowed" means no access error: a wait that times out
or an unknown subscription is the method working.

The target job of every call belongs to the user (``alice``), freshly made
for that call, so a call that stops or deletes it spoils nothing else.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from gateway import contract
from tests import test_server_auth as auth
from tests.helpers import job
from tests.server_support import Rpc, Server

keyring = auth.keyring

IDENTITIES = ("none", "user", "other", "admin")
KEY_OF = {"user": "alice", "other": "bob", "admin": "ops"}
ACCESS_ERRORS = {-32004, -32005, -32001}
_fresh = itertools.count()


def params_for(method: str, target: str, keys: dict[str, str]) -> dict[str, Any]:
    """Valid params naming ``target`` wherever the method takes a job."""
    values: dict[str, Any] = {
        "job": job(job_id=target),
        "job_id": target,
        "job_ids": [target],
        "wait": 0.1,
        "script_type": "python",
        "subscription": "no-such-subscription",
        "key": keys["alice"],
    }
    params = {}
    for param in contract.params(method):
        if param.required or param.name in {"job_ids", "wait"}:
            params[param.name] = values[param.name]
    return params


def expected(scope: str, who: str, names_a_job: bool) -> int | None:
    """The access error ``who`` must get (None: allowed)."""
    if scope == "public":
        return None
    if who == "none":
        return -32004
    if scope == "admin":
        return None if who == "admin" else -32005
    if scope == "owner" and who == "other" and names_a_job:
        return -32001
    if scope not in {"user", "owner"}:
        raise AssertionError(f"unknown x-scope {scope!r}")
    return None


def names_a_job(method: str) -> bool:
    return bool({p.name for p in contract.params(method)} & {"job", "job_id", "job_ids"})


@pytest.mark.parametrize("method", contract.method_names())
async def test_method_by_identity(server: Server, keyring: dict[str, str], method: str) -> None:
    scope = contract.scope(method)
    seen: dict[str, Any] = {}
    for who in IDENTITIES:
        target = f"alices-{next(_fresh)}"
        async with auth.as_(server, keyring["ops"]) as ops:
            await ops.call("job.create", {"job": job(job_id=target, caller_id="alice")})
        headers = auth.bearer(keyring[KEY_OF[who]]) if who != "none" else {}
        async with Rpc.connect(server.ws, additional_headers=headers) as client:
            response = await client.request(method, params_for(method, target, keyring))
        seen[who] = response
        code = response.get("error", {}).get("code")
        want = expected(scope, who, names_a_job(method))
        if method in {"job.create", "create_job", "job.run", "run_job"} and want == -32001:
            want = -32005  # an id held by another caller: taken, not missing
        if want is None:
            assert code not in ACCESS_ERRORS, (method, who, response)
        else:
            assert code == want, (method, who, response)
        if who == "other" and "result" in response:  # e.g. job.list: none of alice's jobs
            assert target not in str(response["result"]), (method, response)
    assert set(seen) == set(IDENTITIES)


def test_every_method_declares_a_known_scope() -> None:
    for method in contract.method_names():
        assert contract.scope(method) in {"public", "user", "owner", "admin"}, method


@pytest.mark.parametrize(
    "method", [m for m in contract.method_names() if contract.scope(m) != "public"]
)
async def test_identity_is_checked_before_params(
    server: Server, keyring: dict[str, str], method: str
) -> None:
    """A caller without the right identity learns nothing of a method's params:
    broken params still get the access error, not -32602."""
    bad = {"no_such_param": object.__name__}
    async with Rpc.connect(server.ws) as client:
        response = await client.request(method, bad)
    assert response["error"]["code"] == -32004, response
    if contract.scope(method) == "admin":
        async with Rpc.connect(server.ws, additional_headers=auth.bearer(keyring["alice"])) as c:
            response = await c.request(method, bad)
        assert response["error"]["code"] == -32005, response
