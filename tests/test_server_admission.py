"""The budget of unidentified connections (``gateway.admission``) in a real
gateway: a stranger holding half-sent requests or sockets that never log in
cannot keep other clients out.

The stranger connects from 127.0.0.2 and everyone else from 127.0.0.1: the
whole of 127.0.0.0/8 is loopback, and the gateway tells clients apart by
address.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from gateway.protocols import CLOSE_HANDSHAKE
from tests import raw_ws
from tests.server_support import Rpc, Server, http_get, running_server

STRANGER = "127.0.0.2"
PER_CLIENT = 6
#: Past admission.STALE_AFTER: time is the case.
STALE = 1.6


@pytest.fixture
def server(redis_url: str, tmp_path: Path, admin_key: str) -> Iterator[Server]:
    """Room for 4 x PER_CLIENT connections: a stranger alone could fill it."""
    with running_server(
        redis_url,
        tmp_path / "serve.log",
        max_connections=4 * PER_CLIENT,
        max_unidentified_per_client=PER_CLIENT,
        header_timeout=30,
        auth_timeout=30,
    ) as started:
        yield started


def half_sent(port: int, source: str = STRANGER) -> socket.socket:
    """A connection that sends half a request and waits."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return sock


def answer(sock: socket.socket, within: float = 0.2) -> bytes | None:
    """What the gateway sent within ``within`` seconds, or by the time it
    closed the connection; None: nothing."""
    sock.settimeout(within)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except TimeoutError:
        pass
    return data or None


def stranger(port: int) -> socket.socket:
    """A connection of the stranger's."""
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(STRANGER, 0))


def get(port: int, source: str = "127.0.0.1") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s.makefile("rb").read()


def test_half_sent_requests_past_the_budget_are_refused_and_others_served(
    server: Server,
) -> None:
    """Four times the budget of half-sent requests, enough to take every
    slot: once they are stale the stranger keeps PER_CLIENT of them (the rest
    answered 503 and closed, and so is a new one), and everyone else is
    served, the stranger's complete requests too. Without the budget this
    /healthz was a 503."""
    held = [half_sent(server.port) for _ in range(4 * PER_CLIENT)]
    try:
        time.sleep(STALE)
        answers = [answer(s) for s in held]
        waiting = [s for s, a in zip(held, answers, strict=True) if a is None]
        refused = [a for a in answers if a is not None]
        assert len(waiting) == PER_CLIENT, answers
        assert all(a.startswith(b"HTTP/1.1 503 ") for a in refused), refused
        body = json.loads(refused[0].split(b"\r\n\r\n", 1)[1])
        assert body["error"] == {"code": -32006, "message": "Too many unidentified connections"}
        assert b" 200 " in get(server.port).split(b"\r\n", 1)[0]
        assert b" 200 " in get(server.port, STRANGER).split(b"\r\n", 1)[0]  # said who it is
        late = half_sent(server.port)
        assert answer(late) is None  # not refused as it opens: it had no time to say
        assert (answer(late, within=5) or b"").startswith(b"HTTP/1.1 503 ")  # stale: closed
        status, raw = http_get(f"{server.http}/metrics")
        assert f"hero_gateway_unidentified_connections {PER_CLIENT}.0" in raw.decode()
        for sock in waiting:  # they finish their requests: identified, and served
            sock.sendall(b"1\r\nConnection: close\r\n\r\n")
            assert (answer(sock, within=5) or b"").startswith(b"HTTP/1.1 200 ")
        room = half_sent(server.port)  # the budget is free again: this one may wait
        time.sleep(STALE)
        assert answer(room) is None
        room.close()
        lines = [json.loads(x) for x in server.log().splitlines() if "unidentified" in x]
        assert len(lines) == 1, lines  # the first told at once, the rest summed later
        assert (lines[0]["client"], lines[0]["closed"]) == (STRANGER, 1)
        status, raw = http_get(f"{server.http}/metrics")
        metrics = raw.decode()
        assert status == 200, metrics
        closed = 3 * PER_CLIENT + 1  # the flood's and the late one
        assert f"hero_gateway_unidentified_closed_total {closed}.0" in metrics
        assert "hero_gateway_unidentified_connections 0.0" in metrics
    finally:
        for sock in held:
            sock.close()


def test_a_kept_alive_connection_counts_again_while_its_next_request_is_half_sent(
    server: Server,
) -> None:
    """A complete request first, then half of the next one on the same
    connection: the wait for the second is counted like a new connection's."""
    kept = []
    try:
        for _ in range(PER_CLIENT + 2):
            sock = stranger(server.port)
            kept.append(sock)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\n")
        time.sleep(STALE)
        answers = [answer(s) or b"" for s in kept]
        assert all(a.startswith(b"HTTP/1.1 200 ") for a in answers), answers  # the first request
        closed = [a for a in answers if b"HTTP/1.1 503 " in a]
        assert len(closed) == 2, answers  # the two over the budget, after their first answer
    finally:
        for sock in kept:
            sock.close()


async def test_sockets_that_never_log_in_past_the_budget_are_closed_and_refused(
    server: Server, admin_key: str
) -> None:
    """WebSockets opened without a key while keys exist: past the budget, the
    stale ones are closed 1013, while a socket with a key, from the same
    address, is served; one that logs in leaves the count."""
    source = (STRANGER, 0)
    sockets = [
        await websockets.connect(server.ws, local_addr=source) for _ in range(PER_CLIENT + 2)
    ]
    try:
        await asyncio.sleep(STALE)
        closed = []
        for ws in sockets:
            try:
                await asyncio.wait_for(ws.recv(), 0.2)
            except ConnectionClosed as exc:
                closed.append((exc.rcvd.code, exc.rcvd.reason) if exc.rcvd else None)
            except TimeoutError:
                pass
        assert closed == [(1013, "Too many unidentified connections")] * 2, closed
        bearer = {"Authorization": f"Bearer {admin_key}"}
        async with Rpc.connect(server.ws, additional_headers=bearer, local_addr=source) as keyed:
            assert (await keyed.call("auth.whoami"))["scope"] == "admin"
        async with Rpc.connect(server.ws, local_addr=source) as quick:  # logs in at once
            assert (await quick.call("auth.login", {"key": admin_key}))["scope"] == "admin"
            await asyncio.sleep(STALE)
            assert (await quick.call("auth.whoami"))["scope"] == "admin"
        async with Rpc.connect(server.ws) as other:  # another address: its own budget
            await other.call("auth.login", {"key": admin_key})
        login = {"jsonrpc": "2.0", "id": 1, "method": "auth.login", "params": {"key": admin_key}}
        await sockets[0].send(json.dumps(login))
        assert json.loads(await sockets[0].recv())["result"]["scope"] == "admin"
        async with Rpc.connect(server.ws, local_addr=source) as newcomer:  # room again
            await asyncio.sleep(STALE)  # unidentified past the time: kept, there is room
            assert (await newcomer.call("auth.login", {"key": admin_key}))["scope"] == "admin"
    finally:
        for ws in sockets:
            await ws.close()


async def test_sockets_reset_as_they_open_leave_nothing_counted(
    redis_url: str, tmp_path: Path, admin_key: str
) -> None:
    """WebSocket upgrades without a key, each reset by the stranger a moment
    after it sent it, 50 at a time: some are gone by the time the gateway,
    having learnt that keys exist, accepts them, and the accept fails. None
    may stay counted (each once kept its ticket for good, so the budget
    filled with connections that no longer existed and every slow client
    after was closed)."""
    loop = asyncio.get_running_loop()

    async def reset_after_sending(port: int, pause: float) -> None:
        sock = socket.socket()
        sock.bind((STRANGER, 0))
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, raw_ws.upgrade_request(port))
        await asyncio.sleep(pause)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, not a FIN

    def counted(gateway: Server) -> str:
        metrics = http_get(f"{gateway.http}/metrics")[1].decode()
        return next(m for m in metrics.splitlines() if m.startswith("hero_gateway_unidentified_c"))

    # room for every burst (the usual fixture's 24 connections refuse most)
    with running_server(redis_url, tmp_path / "serve.log", header_timeout=30) as gateway:
        for _ in range(30):  # pauses spread over the window (0.1-0.5 ms on loopback)
            pauses = [random.uniform(0, 0.003) for _ in range(50)]
            await asyncio.gather(*(reset_after_sending(gateway.port, p) for p in pauses))
        await asyncio.sleep(STALE)  # a ticket kept would be stale now, and counted
        deadline = time.monotonic() + 10
        while counted(gateway) != "hero_gateway_unidentified_connections 0.0":
            assert time.monotonic() < deadline, counted(gateway)
            await asyncio.sleep(0.1)


def test_a_socket_closed_for_the_budget_does_not_linger(server: Server) -> None:
    """A stranger's WebSocket closed 1013 whose client never answers the close
    frame is let go CLOSE_HANDSHAKE later (uvicorn's own 10 s kept each in
    the connection count, so a stranger reconnecting held the slots)."""
    held = []
    try:
        for _ in range(PER_CLIENT + 1):
            held.append(raw_ws.connect(server.port, source=STRANGER))
        deadline = time.monotonic() + STALE + 5
        while not (framed := [s for s in held if answer(s, within=0.05)]):
            assert time.monotonic() < deadline, "no socket was closed"
        closing = framed[0]  # sent its close frame (1013); we never answer it
        since = time.monotonic()
        closing.settimeout(CLOSE_HANDSHAKE + 5)
        with contextlib.suppress(ConnectionResetError):  # aborted, else a FIN
            assert closing.recv(4096) == b""
        assert time.monotonic() - since < CLOSE_HANDSHAKE + 1.5
    finally:
        for sock in held:
            sock.close()
