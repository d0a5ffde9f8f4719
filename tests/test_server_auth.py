"""API keys: the ``keys`` CLI, the key store, and a real server enforcing them
(bearer header on the upgrade and on POST, ``auth.login``, user vs admin
scope, the non-loopback refusal)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import websockets

from gateway.config import Config
from gateway.embedded_redis import free_port
from gateway.server import is_loopback, preflight
from gateway.supervisor.auth import KeyStore, digest
from tests.conftest import ROOT
from tests.helpers import job
from tests.server_support import (
    Rpc,
    RpcError,
    Server,
    http_post,
    post,
    req,
    server_env,
)


@pytest.fixture
async def keyring(store: KeyStore, server: Server) -> AsyncIterator[dict[str, str]]:
    """Three keys (alice and bob are users, ops is admin); afterwards, none of
    them may appear in the server's log."""
    start = len(server.log())
    made = {
        "alice": await store.create("alice", "user", "alice"),
        "bob": await store.create("bob", "user", "bob"),
        "ops": await store.create("ops", "admin"),
    }
    yield made
    log = server.log()[start:]
    assert not [name for name, key in made.items() if key in log or digest(key) in log]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextlib.asynccontextmanager
async def as_(server: Server, key: str) -> AsyncIterator[Rpc]:
    async with Rpc.connect(server.ws, additional_headers=bearer(key)) as client:
        yield client


#: Runs several ``hero-gateway`` commands in one interpreter (one start-up, not
#: one per command): each through ``gateway.cli.main``, as the console script does.
_CLI_SESSION = """
import contextlib, io, json, sys
from gateway.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


async def cli(redis_url: str, *commands: list[str]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each ``hero-gateway`` command, run in order."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _CLI_SESSION, json.dumps(commands)],
        env=server_env(redis_url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [(code, out, err) for code, out, err in json.loads(done.stdout)]


# -- the CLI and the store ---------------------------------------------------------------


async def test_keys_cli_creates_lists_and_revokes(
    redis_url: str, rds: aioredis.Redis, store: KeyStore
) -> None:
    user, admin, nameless, listed, again, revoked, unknown = await cli(
        redis_url,
        ["keys", "create", "--name", "alice", "--scope", "user", "--caller-id", "alice"],
        ["keys", "create", "--name", "ops", "--scope", "admin"],
        ["keys", "create", "--name", "carol", "--scope", "user"],
        ["keys", "list", "--json"],
        ["keys", "create", "--name", "alice", "--scope", "admin"],
        ["keys", "revoke", "--name", "alice"],
        ["keys", "revoke", "--name", "zed"],
    )
    assert user[0] == 0 and admin[0] == 0, user[2] + admin[2]
    key, ops_key = user[1].strip(), admin[1].strip()
    assert key.startswith("hgk_") and len(key) > 40 and "\n" not in key
    assert "only now" in user[2] and key not in user[2]
    assert nameless[0] == 1 and "caller_id" in nameless[2]

    entries = json.loads(listed[1])
    assert [(e["name"], e["scope"], e["caller_id"]) for e in entries] == [
        ("alice", "user", "alice"),
        ("ops", "admin", None),
    ]
    assert key not in listed[1] and digest(key) not in listed[1]
    assert again[0] == 1 and "exists" in again[2]
    assert (revoked[0], unknown[0]) == (0, 1)
    assert await store.verify(key) is None
    assert (await store.verify(ops_key) or {}).get("name") == "ops"

    stored = []
    for name in await rds.keys("*"):
        kind = await rds.type(name)
        value = await {"hash": rds.hgetall, "set": rds.smembers, "string": rds.get}[kind](name)
        stored.append(f"{name} {value}")
    assert not [s for s in stored if ops_key in s], "the plain key must never be stored"
    assert [s for s in stored if digest(ops_key) in s]
    assert not [s for s in stored if digest(key) in s], "a revoked key leaves nothing behind"


async def test_store_verifies_only_real_keys(store: KeyStore) -> None:
    assert not await store.exist()
    key = await store.create("svc", "admin", "svc-caller")
    assert await store.exist()
    assert await store.verify(key) == {
        "name": "svc", "scope": "admin", "caller_id": "svc-caller", "key_id": digest(key)
    }  # fmt: skip
    for wrong in ("", key[:-1], key + "x", "Bearer " + key, digest(key)):
        assert await store.verify(wrong) is None


# -- a server with keys ------------------------------------------------------------------


async def test_without_credentials_every_call_is_minus_32004(
    server: Server, keyring: dict[str, str]
) -> None:
    async with Rpc.connect(server.ws) as anonymous:
        for method, params in [
            ("auth.whoami", None),
            ("job.create", {"job": job()}),
            ("job.list", {}),
            ("queue.stats", {}),
        ]:
            with pytest.raises(RpcError) as caught:
                await anonymous.call(method, params)
            assert caught.value.code == -32004
        assert (await anonymous.call("rpc.discover"))["openrpc"]  # the contract is public
    status, answer = await post(f"{server.http}/rpc", req("auth.whoami", id=1))
    assert status == 401 and answer["error"]["code"] == -32004


async def test_a_post_without_credentials_is_refused_before_its_body_is_read(
    server: Server, keyring: dict[str, str]
) -> None:
    """With keys, a POST showing none is 401 whatever its body: text that does
    not parse, a batch, a public method. A body that never comes is not waited for."""
    for body in ("{", "[" + ",".join(["1"] * 1000) + "]", json.dumps(req("rpc.discover", id=1))):
        status, raw, headers = await asyncio.to_thread(http_post, f"{server.http}/rpc", body)
        assert (status, json.loads(raw)["error"]["code"]) == (401, -32004), body[:20]
        assert headers["www-authenticate"].startswith("Bearer")
    head = b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head)
        assert sock.recv(4096).startswith(b"HTTP/1.1 401 ")


async def test_bearer_header_on_the_upgrade_and_on_post(
    server: Server, keyring: dict[str, str]
) -> None:
    async with as_(server, keyring["ops"]) as ops:
        assert await ops.call("auth.whoami") == {"name": "ops", "scope": "admin", "caller_id": None}
    status, answer = await post(
        f"{server.http}/rpc", req("auth.whoami", id=1), bearer(keyring["alice"])
    )
    assert status == 200
    assert answer["result"] == {"name": "alice", "scope": "user", "caller_id": "alice"}


async def test_a_bad_key_is_refused_without_echoing_it(
    server: Server, keyring: dict[str, str]
) -> None:
    secret = "hgk_" + "s3cret" * 8
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(server.ws, additional_headers=bearer(secret)):
            pass
    assert refused.value.response.status_code == 401
    assert secret.encode() not in refused.value.response.body
    status, raw, headers = await asyncio.to_thread(
        http_post, f"{server.http}/rpc", json.dumps(req("auth.whoami", id=1)), bearer(secret)
    )
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert json.loads(raw)["error"]["code"] == -32004 and secret.encode() not in raw
    status, _, _ = await asyncio.to_thread(
        http_post,
        f"{server.http}/rpc",
        json.dumps(req("auth.whoami", id=1)),
        {"Authorization": "Basic abc"},
    )
    assert status == 401
    assert secret not in server.log()


async def test_auth_login_first_then_calls_behind_it(
    server: Server, keyring: dict[str, str]
) -> None:
    async with Rpc.connect(server.ws) as client:
        wrong = await client.request("auth.login", {"key": "hgk_wrong"})
        assert wrong["error"]["code"] == -32004 and "hgk_wrong" not in json.dumps(wrong)
        # sent back to back, without waiting: the login is answered before whoami runs
        login = asyncio.create_task(client.call("auth.login", {"key": keyring["alice"]}))
        whoami = asyncio.create_task(client.call("auth.whoami"))
        assert await login == {"name": "alice", "scope": "user", "caller_id": "alice"}
        assert (await whoami)["name"] == "alice"


async def test_login_on_a_connection_opened_before_the_first_key(
    server: Server, store: KeyStore
) -> None:
    async with Rpc.connect(server.ws) as early:
        assert (await early.call("auth.whoami"))["scope"] == "anonymous"
        key = await store.create("late", "admin")
        assert (await early.call("auth.login", {"key": key}))["name"] == "late"
        assert (await early.call("auth.whoami"))["name"] == "late"
        with pytest.raises(RpcError):
            await early.call("auth.login", {"key": "hgk_not-a-key"})
    async with Rpc.connect(server.ws) as later:  # keys exist now: no more anonymous
        with pytest.raises(RpcError) as caught:
            await later.call("auth.whoami")
        assert caught.value.code == -32004


async def test_a_user_key_acts_as_its_caller_only(server: Server, keyring: dict[str, str]) -> None:
    async with (
        as_(server, keyring["alice"]) as alice,
        as_(server, keyring["bob"]) as bob,
        as_(server, keyring["ops"]) as ops,
    ):
        mine = await alice.call("job.create", {"job": job(job_id="a1", caller_id="bob")})
        assert mine["job_id"] == "a1"
        assert (await ops.call("job.get", {"job_id": "a1"}))["caller_id"] == "alice"
        await bob.call("job.create", {"job": job(job_id="b1")})
        for method, params in [
            ("job.get", {"job_id": "b1"}),
            ("job.status", {"job_id": "b1"}),
            ("job.output", {"job_id": "b1"}),
            ("job.logs", {"job_id": "b1"}),
            ("job.start", {"job_id": "b1"}),
            ("job.stop", {"job_id": "b1"}),
            ("job.delete", {"job_id": "b1"}),
            ("job.subscribe", {"job_ids": ["b1"]}),
            ("stop_job", {"job_id": "b1"}),
        ]:
            with pytest.raises(RpcError) as caught:
                await alice.call(method, params)
            assert caught.value.code == -32001, method  # as if there were no b1
        for method, params in [
            ("job.list", {"caller_id": "bob"}),
            ("queue.dlq.list", {}),
            ("queue.dlq.replay", {"script_type": "python"}),
        ]:
            with pytest.raises(RpcError) as caught:
                await alice.call(method, params)
            assert caught.value.code == -32005, method
        assert [j["id"] for j in (await alice.call("job.list", {}))["jobs"]] == ["a1"]
        assert {j["id"] for j in (await ops.call("job.list", {}))["jobs"]} == {"a1", "b1"}
        assert (await ops.call("job.stop", {"job_id": "b1"}))["status"] == "stopped"
        assert await ops.call("job.delete", {"job_id": "b1"}) == {"deleted": True}
        assert (await ops.call("queue.dlq.list", {}))["entries"] == []
        with pytest.raises(RpcError) as refused:
            await bob.call("job.delete", {"job_id": "a1"})
        assert refused.value.code == -32001


async def test_a_revoked_key_no_longer_opens_a_connection(
    server: Server, keyring: dict[str, str], store: KeyStore
) -> None:
    async with as_(server, keyring["bob"]) as bob:
        assert (await bob.call("auth.whoami"))["name"] == "bob"
    assert await store.revoke("bob")
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(server.ws, additional_headers=bearer(keyring["bob"])):
            pass
    assert refused.value.response.status_code == 401


# -- listening beyond loopback -------------------------------------------------------------


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.1.2.3")


async def test_preflight_refuses_a_public_address_without_keys(
    redis_url: str, store: KeyStore
) -> None:
    public = Config(redis_url=redis_url, host="0.0.0.0")
    refusal = await preflight(public)
    assert refusal is not None and "--insecure" in refusal
    assert await preflight(Config(redis_url=redis_url, host="0.0.0.0", insecure=True)) is None
    assert await preflight(Config(redis_url=redis_url, host="127.0.0.1")) is None
    await store.create("ops", "admin")
    assert await preflight(public) is None
    dead = Config(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    assert (await preflight(dead) or "").startswith("Redis unreachable")


def test_serve_exits_before_binding_a_public_address_without_keys(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = server_env(redis_url)
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "serve", "--host", "0.0.0.0", "--port", str(port)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "refusing to listen on 0.0.0.0" in done.stderr and "--insecure" in done.stderr
