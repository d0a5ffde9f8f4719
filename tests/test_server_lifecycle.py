"""A server's life: Redis going away (-32007, quickly), Redis missing at start,
keepalive pings, and a graceful shutdown (in-flight calls answered, then 1012).
Each test runs its own server, since each ends or breaks it."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.embedded_redis import free_port
from tests.conftest import ROOT
from tests.helpers import eventually, job
from tests.server_support import (
    Rpc,
    RpcError,
    Server,
    http_get,
    post,
    private_redis,
    req,
    running_server,
    server_env,
)


async def test_a_stopped_server_restarts_on_the_same_port(own_server: Server) -> None:
    """What the reconnect tests rely on: a stop closes the sockets, a restart serves again."""
    async with Rpc.connect(own_server.ws) as client:
        assert (await client.call("auth.whoami"))["scope"] == "anonymous"
        await asyncio.to_thread(own_server.stop)
        assert (await client.closed())[0] == 1012
    with pytest.raises(OSError):
        async with Rpc.connect(own_server.ws, open_timeout=2):
            pass
    await asyncio.to_thread(own_server.restart)
    async with Rpc.connect(own_server.ws) as client:
        assert (await client.call("auth.whoami"))["scope"] == "anonymous"


async def test_redis_going_away_is_minus_32007_quickly(tmp_path: Path) -> None:
    redis = private_redis(tmp_path / "redis")
    try:
        with running_server(redis.url, tmp_path / "serve.log") as server:
            async with Rpc.connect(server.ws) as client:
                await client.call("job.create", {"job": job(job_id="before")})
                redis.stop()
                started = time.monotonic()
                with pytest.raises(RpcError) as caught:
                    await client.call("job.status", {"job_id": "before"})
                assert caught.value.code == -32007
                assert caught.value.message == "Redis unavailable"
                assert time.monotonic() - started < 3.0
                assert (await client.call("auth.whoami"))["scope"] == "anonymous"
            _, answer = await post(f"{server.http}/rpc", req("job.create", {"job": job()}, 1))
            assert answer["error"]["code"] == -32007
            status, body = await asyncio.to_thread(http_get, f"{server.http}/healthz")
            assert (status, json.loads(body)) == (503, {"status": "unavailable", "redis": False})
            async with Rpc.connect(server.ws) as late:  # a new connection still gets answers
                with pytest.raises(RpcError) as again:
                    await late.call("job.get", {"job_id": "before"})
                assert again.value.code == -32007
            assert "Traceback" not in server.log()
    finally:
        redis.stop()


def test_serve_without_redis_says_so_and_exits(tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "serve", "--port", str(free_port())],
        env=server_env(dead),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"Redis unreachable at {dead}" in done.stderr
    assert time.monotonic() - started < 20


async def test_keepalive_closes_a_peer_that_never_answers_pings(
    redis_url: str, tmp_path: Path
) -> None:
    with running_server(
        redis_url, tmp_path / "serve.log", ping_interval=0.2, ping_timeout=0.4
    ) as server:
        async with Rpc.connect(server.ws) as polite:  # websockets answers pings itself
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write(
                f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 101")
            opcodes = []
            started = time.monotonic()
            while True:  # read frames, answering nothing, until the server gives up
                frame = await asyncio.wait_for(_read_frame(reader), 5)
                if frame is None:
                    break
                opcodes.append(frame[0])
                if frame[0] == 0x8:
                    assert int.from_bytes(frame[1][:2], "big") == 1011
                    break
            assert opcodes[0] == 0x9  # a ping came first
            assert time.monotonic() - started < 3
            writer.close()
            await asyncio.sleep(0.6)  # several ping rounds later the polite client is fine
            assert (await polite.call("auth.whoami"))["scope"] == "anonymous"


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes] | None:
    """(opcode, payload) of one unmasked server frame; None at EOF."""
    try:
        first, second = await reader.readexactly(2)
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(await reader.readexactly(2), "big")
        elif size == 127:
            size = int.from_bytes(await reader.readexactly(8), "big")
        return first & 0x0F, await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def test_sigterm_answers_in_flight_calls_then_closes_1012(
    redis_url: str, tmp_path: Path, actors: Any
) -> None:
    actors()
    with running_server(redis_url, tmp_path / "serve.log", shutdown_grace=5) as server:
        async with Rpc.connect(server.ws) as busy, Rpc.connect(server.ws) as idle:
            await busy.call("job.subscribe", {"job_ids": ["slow"]})
            spec = job("import time; time.sleep(1.0); print('done')", job_id="slow")
            running = asyncio.create_task(busy.call("job.run", {"job": spec, "wait": 20}))
            while (await busy.event())["event"]["event"] != "started":
                pass
            server.proc.send_signal(signal.SIGTERM)

            async def refused() -> bool:  # draining: a new call is refused, not dropped
                answer = await busy.request("auth.whoami")
                return "error" in answer and answer["error"]["code"] == -32006

            await eventually(refused, within=5)
            with pytest.raises(RpcError) as refusal:
                await busy.call("auth.whoami")
            assert refusal.value.code == -32006
            assert refusal.value.message == "Server is shutting down"
            result = await running
            assert (result["status"], result["output"]) == ("finished", "done\n")
            for client in (busy, idle):
                assert await client.closed(10) == (1012, "server shutting down")
        assert server.proc.wait(15) in (0, -signal.SIGTERM)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
