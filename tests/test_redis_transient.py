"""A real redis-server in a transient state (LOADING, BUSY), behind a real gateway.

Redis answers ``-LOADING`` while it reads its dataset after a restart. The
test makes that last: it saves 100,000 keys, restarts the server on the same
port with ``key-load-delay`` (a Redis config that slows loading per key,
meant for exactly this kind of test) and
``loading-process-events-interval-bytes`` (so it answers while loading), and
calls the gateway meanwhile. Every call must be -32007 (HTTP 503 with
Retry-After), the same as for an unreachable Redis; a wait in progress keeps
waiting instead of logging ``wait sweep failed``; afterwards all is well.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.embedded_redis import EmbeddedRedis
from gateway.supervisor.auth import KeyStore
from gateway.supervisor.connection import RedisNotReady
from gateway.supervisor.wire import Wire
from tests.server_support import Rpc, Server, http_post, running_server

KEYS = 100_000


def loading(port: int) -> bool:
    """Whether the server at ``port`` answers LOADING (one try, no retries)."""
    client = redis.Redis(port=port, socket_timeout=30, retry_on_error=[], retry=None)
    try:
        client.ping()
    except redis.BusyLoadingError:
        return True
    finally:
        client.close()
    return False


@pytest.fixture
def slow_loading_redis(tmp_path: Path) -> Iterator[tuple[EmbeddedRedis, Path]]:
    """A private Redis with a saved dataset; the test restarts it slowly loading."""
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False).start()
    client = redis.Redis(port=server.port)
    pipe = client.pipeline(transaction=False)
    for chunk in range(KEYS // 1000):
        pipe.mset({f"pad:{chunk}:{i}": "v" for i in range(1000)})
    pipe.execute()
    client.close()
    yield server, tmp_path / "redis"
    server.stop()


def restart_loading(server: EmbeddedRedis, data_dir: Path) -> subprocess.Popen[bytes]:
    """Save, stop, and start again on the same port, loading slowly."""
    client = redis.Redis(port=server.port)
    client.save()
    client.close()
    server.stop()
    binary = shutil.which("redis-server")
    assert binary is not None
    process = subprocess.Popen(
        [
            binary,
            *("--bind", "127.0.0.1", "--port", str(server.port), "--dir", str(data_dir)),
            *("--appendonly", "no", "--save", "", "--logfile", str(data_dir / "redis.log")),
            *("--key-load-delay", "30", "--loading-process-events-interval-bytes", "1024"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server.process = process  # stopped by the fixture
    deadline = time.monotonic() + 20
    while True:
        try:
            if loading(server.port):
                return process
        except redis.ConnectionError:
            pass  # not listening yet
        assert time.monotonic() < deadline, "redis-server never answered LOADING"
        time.sleep(0.05)


async def test_loading_is_answered_minus_32007_and_waits_survive(
    slow_loading_redis: tuple[EmbeddedRedis, Path], tmp_path: Path
) -> None:
    redis_server, data_dir = slow_loading_redis
    keys = Wire(redis_server.url, "test-keys")
    key = await KeyStore(keys, redis_server.url).create("root", "admin")
    await keys.aclose()
    bearer = {"Authorization": f"Bearer {key}"}
    with running_server(redis_server.url, tmp_path / "serve.log") as gateway:
        async with Rpc.connect(gateway.ws, additional_headers=bearer) as rpc:
            spec = {"script": "print(1)", "script_type": "osis", "job_id": "queued"}
            await rpc.call("job.create", {"job": spec})
            await rpc.call("job.start", {"job_id": "queued"})  # no osis actor: it waits
            waiting = asyncio.create_task(
                rpc.request("job.output", {"job_id": "queued", "wait": 120}, within=150)
            )
            # the wait is being swept (no actor of ours); nothing public shows a
            # registered wait, so it gets time to register
            await asyncio.sleep(0.3)
            await asyncio.to_thread(restart_loading, redis_server, data_dir)
            await assert_unavailable(rpc, gateway, bearer)
            assert await asyncio.to_thread(loading, redis_server.port), "loaded too soon"
            await until_loaded(redis_server.port)
            listed = await rpc_until_ok(rpc, "job.get", {"job_id": "queued"})
            assert listed["id"] == "queued"
            assert not waiting.done()  # still waiting, not failed
            # ended as an outside actor ends a job: the wait that outlived the
            # reload answers with that end
            ender = redis.Redis(port=redis_server.port, decode_responses=True)
            try:
                ender.hset("hero:job:queued", mapping={"status": "finished", "output": "late"})
                ender.lpush("hero:q:reply:queued", "late")
            finally:
                ender.close()
            answer = await asyncio.wait_for(waiting, 30)
            assert answer["result"]["status"] == "finished", answer
            assert answer["result"]["output"] == "late"
        log = gateway.log()
    assert "wait sweep failed" not in log
    assert "TypeError" not in log
    assert '"level": "error"' not in log, log[-3000:]


async def assert_unavailable(rpc: Rpc, gateway: Server, bearer: dict[str, str]) -> None:
    """While loading: WebSocket calls -32007, HTTP 503 with Retry-After (both
    for a call and for the key check before it)."""
    answer = await rpc.request("job.get", {"job_id": "queued"}, within=60)
    assert answer["error"]["code"] == -32007, answer
    answer = await rpc.request("job.list", {}, within=60)
    assert answer["error"]["code"] == -32007, answer
    frame = {"jsonrpc": "2.0", "id": 1, "method": "job.status", "params": {"job_id": "queued"}}
    status, raw, headers = await asyncio.to_thread(
        http_post, f"{gateway.http}/rpc", json.dumps(frame), bearer, 60
    )
    body = json.loads(raw)
    assert (status, body["error"]["code"]) == (503, -32007), body
    assert headers["retry-after"] == "1"


async def until_loaded(port: int) -> None:
    deadline = time.monotonic() + 120
    while await asyncio.to_thread(loading, port):
        assert time.monotonic() < deadline, "still loading"
        await asyncio.sleep(0.2)


async def rpc_until_ok(rpc: Rpc, method: str, params: dict[str, object]) -> dict[str, object]:
    """The result once the gateway's connections have found Redis back."""
    deadline = time.monotonic() + 20
    while True:
        answer = await rpc.request(method, params, within=30)
        if "result" in answer:
            return answer["result"]  # type: ignore[no-any-return]
        assert answer["error"]["code"] == -32007 and time.monotonic() < deadline, answer
        await asyncio.sleep(0.1)


async def test_a_redis_busy_in_a_script_is_answered_minus_32007(
    redis_url: str, tmp_path: Path
) -> None:
    """Another transient state, for real: a script that runs past
    ``busy-reply-threshold`` makes Redis answer BUSY to everyone else until it
    is killed. Calls meanwhile are -32007 (no -32603); afterwards they work."""
    redis_server = EmbeddedRedis(tmp_path / "busy", appendonly=False).start()
    admin = redis.Redis(port=redis_server.port)
    admin.config_set("busy-reply-threshold", 50)
    spinner = redis.Redis(port=redis_server.port, socket_timeout=60)
    wire = Wire(redis_server.url, "test-busy")
    try:
        await wire.execute_command("PING")  # connected before Redis gets busy
        with running_server(redis_server.url, tmp_path / "serve.log") as gateway:
            async with Rpc.connect(gateway.ws) as rpc:
                assert (await rpc.call("job.list", {}))["jobs"] == []
                spin = asyncio.create_task(asyncio.to_thread(spinner.eval, "while true do end", 0))
                await asyncio.to_thread(until_busy, redis_server.port)
                answer = await rpc.request("job.list", {}, within=30)
                assert answer["error"]["code"] == -32007, answer
                answer = await rpc.request("job.get", {"job_id": "x"}, within=30)
                assert answer["error"]["code"] == -32007, answer
                # a batch refused by BUSY is answered element by element, not
                # failed as a whole (some of its commands may have run)
                refused = await wire.pipeline([("PING",), ("GET", "x")], errors_in_place=True)
                assert [type(r) for r in refused] == [RedisNotReady, RedisNotReady]
                with pytest.raises(RedisNotReady):
                    await wire.pipeline([("PING",), ("GET", "x")])
                # a connection made meanwhile is not ready yet, not refused (an
                # actor starting now waits instead of giving up)
                with pytest.raises(RedisNotReady):
                    await Wire(redis_server.url, "test-busy-dial").execute_command("PING")
                admin.script_kill()
                with contextlib.suppress(redis.ResponseError):
                    await spin
                assert "jobs" in await rpc_until_ok(rpc, "job.list", {})
            log = gateway.log()
        assert "rpc method failed" not in log
    finally:
        await wire.aclose()
        admin.close()
        spinner.close()
        redis_server.stop()


def until_busy(port: int) -> None:
    client = redis.Redis(port=port, retry=None, retry_on_error=[])
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                client.ping()
            except redis.ResponseError as exc:
                if str(exc).startswith("BUSY"):
                    return
            assert time.monotonic() < deadline, "Redis never got BUSY"
            time.sleep(0.05)
    finally:
        client.close()


async def test_a_stopped_redis_is_answered_minus_32007_after_the_redis_timeout(
    tmp_path: Path,
) -> None:
    """Redis stopped (SIGSTOP: a frozen host, its sockets open, so no error
    ever comes): calls are answered -32007 after about HERO_REDIS_TIMEOUT,
    over WebSocket and HTTP (503), instead of never; once Redis runs again so
    do they. A create answered -32007 may still have happened (Redis had its
    bytes): retried with the same job_id, it is the one job either way."""
    redis_server = EmbeddedRedis(tmp_path / "stopped", appendonly=False).start()
    process = redis_server.process
    assert process is not None
    spec = {"script": "print(1)", "script_type": "osis", "job_id": "during"}
    try:
        with running_server(redis_server.url, tmp_path / "serve.log", redis_timeout=1) as gateway:
            async with Rpc.connect(gateway.ws) as rpc:
                assert (await rpc.call("job.list", {}))["jobs"] == []
                process.send_signal(signal.SIGSTOP)
                try:
                    started = time.monotonic()
                    answers = await asyncio.gather(
                        rpc.request("job.list", {}, within=30),
                        rpc.request("job.create", {"job": spec}, within=30),
                    )
                    waited = time.monotonic() - started
                    assert [a["error"]["code"] for a in answers] == [-32007, -32007], answers
                    assert 0.5 <= waited < 1.25 + 1.5, waited  # silent since its last reply
                    # meanwhile every new connection's handshake times out too
                    answer = await rpc.request("job.get", {"job_id": "during"}, within=30)
                    assert answer["error"]["code"] == -32007, answer
                    frame = {"jsonrpc": "2.0", "id": 1, "method": "job.list", "params": {}}
                    status, raw, _ = await asyncio.to_thread(
                        http_post, f"{gateway.http}/rpc", json.dumps(frame), {}, 30
                    )
                    assert (status, json.loads(raw)["error"]["code"]) == (503, -32007), raw
                finally:
                    process.send_signal(signal.SIGCONT)
                await rpc_until_ok(rpc, "job.list", {})
                again = await rpc.call("job.create", {"job": spec})  # the id is the idempotency key
                assert again["job_id"] == "during", again
                listed = await rpc.call("job.list", {})
                assert [j["id"] for j in listed["jobs"]] == ["during"], listed
            log = gateway.log()
        assert "Traceback" not in log
        assert "rpc method failed" not in log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # stop() must reach a stopped one
        redis_server.stop()
