"""Connection hygiene against a real gateway: an authentication deadline for
sockets that never log in, a deadline for HTTP headers, a connection cap,
and no credential in the log at debug level."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import resource
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from gateway.rpc.websocket import AUTH_TIMEOUT
from tests.server_support import Rpc, Server, http_post, post, running_server

DEADLINE = 3.0
IDLE_SOCKETS = 2000


@pytest.fixture
def open_files() -> Iterator[None]:
    """Room for a few thousand sockets in this process (and the server it starts)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(soft, min(hard, 3 * IDLE_SOCKETS + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def keyed_server(
    redis_url: str, tmp_path: Path, admin_key: str, open_files: None
) -> Iterator[Server]:
    with running_server(
        redis_url,
        tmp_path / "serve.log",
        auth_timeout=DEADLINE,
        header_timeout=DEADLINE,
        max_connections=3 * IDLE_SOCKETS,
        # these tests hold thousands of unidentified sockets from one address
        # to see the deadlines end them; the budget is test_server_admission's
        max_unidentified=3 * IDLE_SOCKETS,
        max_unidentified_per_client=3 * IDLE_SOCKETS,
        log_level="debug",
    ) as started:
        yield started


async def upgrade(
    port: int, target: str = "/ws", headers: str = "", status: int = 101
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw upgrade of ``target``, answered ``status``; ``headers`` are extra
    ``Name: value\\r\\n`` lines."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET {target} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{headers}\r\n".encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    assert f" {status} ".encode() in head.split(b"\r\n", 1)[0], head
    return reader, writer


async def close_frame(reader: asyncio.StreamReader, within: float) -> tuple[int, str]:
    head = await asyncio.wait_for(reader.readexactly(2), within)
    assert head[0] & 0x0F == 0x8, head  # nothing but a close frame is sent unasked
    payload = await reader.readexactly(head[1] & 0x7F)
    return struct.unpack("!H", payload[:2])[0], payload[2:].decode()


async def test_idle_unauthenticated_sockets_are_closed_by_the_deadline(
    keyed_server: Server, admin_key: str
) -> None:
    """2,000 sockets upgrade without a key and say nothing: each is closed 1008
    about DEADLINE seconds after it opened. An authenticated one stays."""
    async with Rpc.connect(
        keyed_server.ws, additional_headers={"Authorization": f"Bearer {admin_key}"}
    ) as keyed:
        gate = asyncio.Semaphore(100)

        async def one() -> float:
            async with gate:
                reader, writer = await upgrade(keyed_server.port)
            opened = time.monotonic()
            try:
                code, reason = await close_frame(reader, DEADLINE + 30)
            finally:
                writer.close()
            assert (code, reason) == (1008, AUTH_TIMEOUT)
            return time.monotonic() - opened

        lived = await asyncio.gather(*(one() for _ in range(IDLE_SOCKETS)))
        assert min(lived) > DEADLINE / 3, min(lived)  # by the deadline, not at once
        assert (await keyed.call("auth.whoami"))["scope"] == "admin"  # past the deadline


async def test_logging_in_within_the_deadline_keeps_the_socket(
    keyed_server: Server, admin_key: str
) -> None:
    async with Rpc.connect(keyed_server.ws) as client:
        assert (await client.call("auth.login", {"key": admin_key}))["scope"] == "admin"
        await asyncio.sleep(DEADLINE + 1)  # past the login deadline: time is the case
        assert (await client.call("auth.whoami"))["scope"] == "admin"


async def test_half_sent_headers_are_closed_by_the_header_timeout(
    keyed_server: Server, admin_key: str
) -> None:
    async def half() -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", keyed_server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        opened = time.monotonic()
        try:
            assert await asyncio.wait_for(reader.read(), DEADLINE + 30) == b""
        finally:
            writer.close()
        return time.monotonic() - opened

    lived = await asyncio.gather(*(half() for _ in range(1000)))
    assert min(lived) > DEADLINE / 3
    # a call that takes longer than the header timeout, its headers sent: answered
    url, header = f"{keyed_server.http}/rpc", {"Authorization": f"Bearer {admin_key}"}
    spec = {"script": "print(1)", "script_type": "python", "job_id": "slow"}
    await post(
        url, {"jsonrpc": "2.0", "id": 1, "method": "job.create", "params": {"job": spec}}, header
    )
    wait = {"job_id": "slow", "wait": DEADLINE + 1}
    started = time.monotonic()
    status, body = await post(
        url, {"jsonrpc": "2.0", "id": 2, "method": "job.output", "params": wait}, header
    )
    assert (status, body["error"]["code"]) == (200, -32003)
    assert time.monotonic() - started > DEADLINE


async def test_a_body_that_never_comes_is_answered_408_by_the_deadline(
    keyed_server: Server, admin_key: str
) -> None:
    """A keyed POST whose headers arrive and whose body stops short: answered
    408 and closed about DEADLINE seconds later, not held for good."""
    reader, writer = await asyncio.open_connection("127.0.0.1", keyed_server.port)
    writer.write(
        f"POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin_key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
    )
    started = time.monotonic()
    try:
        answer = await asyncio.wait_for(reader.read(), DEADLINE + 30)  # until closed
    finally:
        writer.close()
    assert DEADLINE / 2 < time.monotonic() - started < DEADLINE + 10
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["data"] == {"limit_seconds": DEADLINE}, body


def test_keep_alive_connections_serve_requests_after_the_header_timeout(
    keyed_server: Server,
) -> None:
    """The deadline runs from the last response: requests spaced under it on
    one connection are all served, though together they outlast it."""
    with socket.create_connection(("127.0.0.1", keyed_server.port), timeout=10) as sock:
        stream = sock.makefile("rb")
        for _ in range(3):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert stream.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := stream.readline()) != b"\r\n":
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            assert json.loads(stream.read(length))["status"] == "ok"
            time.sleep(DEADLINE - 1.5)  # idle, within the deadline: time is the case


async def test_past_the_connection_cap_an_upgrade_gets_503(redis_url: str, tmp_path: Path) -> None:
    with running_server(redis_url, tmp_path / "serve.log", max_connections=4) as server:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(4):
                await stack.enter_async_context(Rpc.connect(server.ws))
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(server.ws, open_timeout=10)
            response = refused.value.response
            assert response.status_code == 503
            assert response.headers["Retry-After"] == "1"
            assert json.loads(response.body)["error"]["code"] == -32006
            await stack.aclose()
            async with Rpc.connect(server.ws) as again:  # room again once they left
                assert (await again.call("auth.whoami"))["scope"] == "anonymous"


async def test_a_batch_past_the_configured_length_is_one_error(
    redis_url: str, tmp_path: Path
) -> None:
    """HERO_MAX_BATCH at another value than its default reaches both transports."""
    whoami = [{"jsonrpc": "2.0", "id": i, "method": "auth.whoami"} for i in range(1, 5)]
    too_long = {
        "code": -32600,
        "message": "Invalid Request",
        "data": {"message": "a batch may hold at most 3 elements", "limit": 3},
    }
    with running_server(redis_url, tmp_path / "serve.log", max_batch=3) as server:
        async with Rpc.connect(server.ws) as client:
            assert len(await client.batch(whoami[:3])) == 3
            answer = await client.raw(json.dumps(whoami))
            assert answer == {"jsonrpc": "2.0", "id": None, "error": too_long}
        status, body = await post(f"{server.http}/rpc", whoami)
        assert (status, body) == (200, {"jsonrpc": "2.0", "id": None, "error": too_long})
        status, body = await post(f"{server.http}/rpc", whoami[:3])
        assert status == 200 and [a["id"] for a in body] == [1, 2, 3]


async def test_no_credential_reaches_the_log_at_debug_level(
    keyed_server: Server, admin_key: str
) -> None:
    header = {"Authorization": f"Bearer {admin_key}"}
    async with Rpc.connect(keyed_server.ws, additional_headers=header) as client:
        assert (await client.call("auth.whoami"))["scope"] == "admin"
        assert (await client.call("auth.login", {"key": admin_key}))["scope"] == "admin"
    status, body = await post(
        f"{keyed_server.http}/rpc", {"jsonrpc": "2.0", "id": 1, "method": "auth.whoami"}, header
    )
    assert (status, body["result"]["scope"]) == (200, "admin")
    bad = {"Authorization": "Bearer hgk_not-a-real-key"}
    assert (
        await post(
            f"{keyed_server.http}/rpc", {"jsonrpc": "2.0", "id": 1, "method": "auth.whoami"}, bad
        )
    )[0] == 401
    log = keyed_server.log()
    assert '"level": "debug"' in log and "[redacted]" in log  # the headers were logged, masked
    assert admin_key not in log
    assert admin_key.removeprefix("hgk_") not in log
    assert "hgk_not-a-real-key" not in log


async def test_no_frame_text_reaches_the_log_at_debug_level(
    keyed_server: Server, admin_key: str
) -> None:
    """Frames carry keys (auth.login) and env_vars (job.create, job.get): no
    part of their text is logged, not even the tail websockets keeps of a long
    frame, whose key prefix is cut away. Connection-level records stay."""
    secret = "hunter2-very-secret"
    env = {"DB_PASSWORD": secret}
    spec = {"script": "print(1)", "script_type": "python", "job_id": "env", "env_vars": env}
    async with Rpc.connect(keyed_server.ws) as client:
        assert (await client.call("auth.login", {"key": admin_key}))["scope"] == "admin"
        await client.call("job.create", {"job": spec})
        got = await client.call("job.get", {"job_id": "env"})
        assert got["env_vars"] == env
    header = {"Authorization": f"Bearer {admin_key}"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "job.get", "params": {"job_id": "env"}}
    status, body = await post(f"{keyed_server.http}/rpc", call, header)
    assert (status, body["result"]["env_vars"]) == (200, env)
    log = keyed_server.log()
    for text in (admin_key.removeprefix("hgk_"), secret):
        pieces = [text[i : i + 10] for i in range(len(text) - 9)]
        assert not [piece for piece in pieces if piece in log]
    assert "connection is OPEN" in log and "GET /ws" in log


async def test_credential_headers_and_query_parameters_are_masked_at_debug_level(
    keyed_server: Server,
) -> None:
    """What clients other than ours send: a Digest Authorization (quoted
    parts), API keys without our prefix in headers of their own, a token in the
    subprotocol, credentials in the query string. The log (debug level, so
    the upgrade's headers are in it) keeps the names and masks every value."""
    headers = (
        'Authorization: Digest username="u", response="DIGESTSECRET1"\r\n'
        "X-Api-Key: RAWSECRETNOPREFIX1\r\n"
        "X-Auth-Token: AUTHTOKENSECRET1\r\n"
        "Sec-WebSocket-Protocol: jsonrpc, bearer.PROTOSECRET1\r\n"
    )
    target = "/ws?access_token=QUERYSECRET1&key=hgk_QUERYKEYSECRET1&job=j-1"
    _, writer = await upgrade(keyed_server.port, target, headers, status=401)  # not our scheme
    writer.close()
    nowhere = f"{keyed_server.http}/nope?password=PWQUERY1&page=2"
    assert (await asyncio.to_thread(http_post, nowhere, "{}", None))[0] == 404
    secrets = ("DIGESTSECRET1", "RAWSECRETNOPREFIX1", "AUTHTOKENSECRET1", "PROTOSECRET1")
    log = keyed_server.log()
    assert not [s for s in (*secrets, "QUERYSECRET1", "QUERYKEYSECRET1", "PWQUERY1") if s in log]
    assert "x-api-key: [redacted]" in log.lower()  # the names stay, to debug with
    assert "/ws?access_token=[redacted]&key=[redacted]&job=j-1" in log  # info level
    assert "/nope?password=[redacted]&page=2" in log  # uvicorn.access


def test_a_client_that_reads_nothing_of_its_responses_is_let_go(keyed_server: Server) -> None:
    """Hundreds of pipelined requests for the 46 KB contract, and not a byte
    of the answers read: once its socket has been full for DEADLINE seconds
    the gateway gives up on the connection (it held it past every timeout,
    rendering for it whenever a little drained)."""
    count, contract_bytes = 400, 40_000
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", keyed_server.port))
        sock.sendall(b"GET /openrpc.json HTTP/1.1\r\nHost: x\r\n\r\n" * count)
        time.sleep(DEADLINE + 3)
        sock.settimeout(5)
        got = 0
        with contextlib.suppress(ConnectionResetError):  # aborted: a reset
            while chunk := sock.recv(1 << 20):
                got += len(chunk)
    assert got < count * contract_bytes / 2, got  # not served to the end
