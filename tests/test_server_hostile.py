"""A client that never reads, and frames no honest client sends, against a real gateway.

The never-reading client is a plain socket with a 4 KB receive buffer that
never calls ``recv`` while it writes, so the server's replies back up for
real; the gateway process's RSS is read from ``/proc`` (the uvicorn
subprocess itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import websockets
from websockets.sync.client import connect as ws_connect

from gateway.protocols import CLOSE_HANDSHAKE
from gateway.rpc.websocket import CLOSE_TIMEOUT, NOT_READING
from gateway.supervisor import keys
from tests import raw_ws
from tests.server_support import (
    MAX_MESSAGE_BYTES,
    Rpc,
    Server,
    http_post,
    post,
    req,
    running_server,
)

MAX_UNSENT = 256 * 1024
GRACE = 2.0
RSS_GROWTH_LIMIT_KB = 20 * 1024


@pytest.fixture
def bounded_server(redis_url: str, tmp_path: Path) -> Iterator[Server]:
    with running_server(
        redis_url, tmp_path / "serve.log", max_unsent_bytes=MAX_UNSENT, unsent_grace=GRACE
    ) as started:
        yield started


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def discover_over_ws(server: Server, times: int) -> None:
    with ws_connect(server.ws, max_size=None) as ws:
        for i in range(times):
            ws.send(json.dumps(req("rpc.discover", id=i + 1)))
            assert "result" in json.loads(ws.recv(timeout=10))


def flood(sock: socket.socket, sample: Callable[[], None]) -> tuple[int, bool]:
    """Write rpc.discover requests without ever reading, until the gateway stops
    taking them (blocked for two seconds), 100,000 were sent, or 30 s passed.
    ``sample`` runs about every 0.2 s. Returns (requests sent, blocked)."""
    # About 1 KB a request (a long id): the kernel's buffers on both sides
    # (loopback autotunes a receive buffer up to tens of MB) then hold a few
    # tens of thousands of requests at most, so a gateway that stopped reading
    # blocks the client well before the 100,000 cap, whatever the buffer sizes.
    one = raw_ws.frame(json.dumps(req("rpc.discover", id="r" * 1000)).encode())
    data = one * 100
    sock.setblocking(False)
    started = time.monotonic()
    sent_bytes = position = 0
    blocked_since: float | None = None
    sampled = 0.0
    while sent_bytes // len(one) < 100_000 and time.monotonic() - started < 30:
        now = time.monotonic()
        if now - sampled > 0.2:
            sample()
            sampled = now
        _, writable, _ = select.select([], [sock], [], 0.2)
        if not writable:
            blocked_since = blocked_since or now
            if now - blocked_since > 2.0:
                return sent_bytes // len(one), True
            continue
        blocked_since = None
        try:
            n = sock.send(data[position:])
        except BlockingIOError:
            continue
        sent_bytes += n
        position = (position + n) % len(data)
    return sent_bytes // len(one), False


def test_a_client_that_never_reads_is_stopped_and_closed_1008(bounded_server: Server) -> None:
    """Requests for large replies (the 35 KB contract) are written without ever
    reading: the gateway stops reading the socket once MAX_UNSENT bytes wait,
    its RSS stays within +20 MB, and after the grace the socket is closed 1008."""
    pid = bounded_server.proc.pid
    discover_over_ws(bounded_server, 50)  # warm: the contract encoded, allocator settled
    baseline = rss_kb(pid)
    peaks = [baseline]
    sock = raw_ws.connect(bounded_server.port, rcvbuf=4096)
    requests, blocked = flood(sock, lambda: peaks.append(rss_kb(pid)))
    assert blocked, f"the gateway kept reading ({requests} requests)"
    until = time.monotonic() + GRACE + 1
    while time.monotonic() < until:  # past the grace, still not reading
        peaks.append(rss_kb(pid))
        time.sleep(0.2)
    assert max(peaks) - baseline < RSS_GROWTH_LIMIT_KB, (baseline, max(peaks), requests)
    sock.setblocking(True)
    got = raw_ws.read_until_close(sock)
    sock.close()
    assert (got.close_code, got.close_reason) == (1008, NOT_READING), got
    assert got.texts < requests
    discover_over_ws(bounded_server, 1)  # the gateway is fine


def test_a_client_that_never_reads_at_all_is_let_go(bounded_server: Server) -> None:
    """Not even the close frame is read: the gateway gives the socket up (aborts
    it) instead of holding it, its buffers and a file descriptor, for good."""
    pid = bounded_server.proc.pid
    discover_over_ws(bounded_server, 1)
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    sock = raw_ws.connect(bounded_server.port, rcvbuf=4096)
    try:
        _, blocked = flood(sock, lambda: None)
        assert blocked
        assert len(os.listdir(f"/proc/{pid}/fd")) > fds
        # grace, then CLOSE_TIMEOUT for the close frame, then the closing handshake
        deadline = time.monotonic() + GRACE + CLOSE_TIMEOUT + CLOSE_HANDSHAKE + 15
        while len(os.listdir(f"/proc/{pid}/fd")) > fds:
            assert time.monotonic() < deadline, "the gateway still holds the socket"
            time.sleep(0.5)
    finally:
        sock.close()


#: A frame no honest client sends: as many two-byte invalid elements as a
#: message may hold. Each used to cost the gateway a 129-byte -32600 answer.
TINY_ELEMENTS = "[" + ",".join(["1"] * (MAX_MESSAGE_BYTES // 2 - 8)) + "]"


def assert_one_refusal(reply: str | bytes, sent: str) -> None:
    """One -32600 for the whole batch (not one per element), naming the limit."""
    assert len(reply) < len(sent) // 100, len(reply)
    error = json.loads(reply)["error"]
    assert error["code"] == -32600
    assert str(error["data"]["limit"]) in error["data"]["message"]


async def test_a_batch_over_the_element_cap_is_one_refusal_on_both_transports(
    server: Server,
) -> None:
    async with websockets.connect(server.ws, max_size=None) as ws:
        await ws.send(TINY_ELEMENTS)
        assert_one_refusal(await asyncio.wait_for(ws.recv(), 30), TINY_ELEMENTS)
    status, raw, _ = await asyncio.to_thread(http_post, f"{server.http}/rpc", TINY_ELEMENTS)
    assert status == 200
    assert_one_refusal(raw, TINY_ELEMENTS)


def test_clients_that_never_read_their_invalid_batches_stay_bounded(
    bounded_server: Server,
) -> None:
    """Six sockets that never read send batches of invalid elements: what waits
    for them stays near MAX_UNSENT each, and the gateway's RSS within +20 MB."""
    pid = bounded_server.proc.pid
    discover_over_ws(bounded_server, 50)
    baseline = rss_kb(pid)
    peaks = [baseline]
    data = raw_ws.frame(TINY_ELEMENTS.encode()) * 4
    socks = [raw_ws.connect(bounded_server.port, rcvbuf=4096) for _ in range(6)]
    try:
        for sock in socks:
            sock.settimeout(0.2)
            with contextlib.suppress(TimeoutError):
                sock.sendall(data)
        until = time.monotonic() + GRACE / 2  # within the grace: nothing closed yet
        while time.monotonic() < until:
            peaks.append(rss_kb(pid))
            time.sleep(0.1)
    finally:
        for sock in socks:
            sock.close()
    assert max(peaks) - baseline < RSS_GROWTH_LIMIT_KB, (baseline, max(peaks))
    discover_over_ws(bounded_server, 1)


def test_a_client_that_reads_slowly_gets_every_answer(bounded_server: Server) -> None:
    """Over the bound but reading within the grace: nothing is lost, nothing closed."""
    sock = raw_ws.connect(bounded_server.port, rcvbuf=4096)
    n = 40  # 40 x 35 KB: well over MAX_UNSENT
    sock.sendall(
        b"".join(raw_ws.frame(json.dumps(req("rpc.discover", id=i)).encode()) for i in range(n))
    )
    time.sleep(GRACE / 4)  # a slow reader: time passing (within the grace) is the case
    sock.sendall(raw_ws.frame(b"", raw_ws.CLOSE))
    got = raw_ws.read_until_close(sock)
    sock.close()
    assert (got.texts, got.close_code) in {(n, None), (n, 1000)}, got


# -- invalid Unicode and deep nesting -------------------------------------------------

WHOAMI_BAD_ID = '{"jsonrpc":"2.0","id":"\\ud800","method":"auth.whoami"}'
GOOD = '{"jsonrpc":"2.0","id":2,"method":"auth.whoami"}'


def create(job: dict[str, Any]) -> str:
    return json.dumps(
        req("job.create", {"job": {"script": "print(1)", "script_type": "python", **job}}, id=7)
    )


SURROGATE_PARAMS = [
    ({"env_vars": {"X": "\udfff"}}, "job.env_vars.X"),
    ({"env_vars": {"\ud800": "x"}}, "job.env_vars"),
    ({"job_id": "a\ud800"}, "job.job_id"),
    ({"script": "print('\udc00')"}, "job.script"),
    ({"prerequisites": ["\ud800"]}, "job.prerequisites.0"),
]


async def test_a_lone_surrogate_in_a_frame_is_a_parse_error(rpc: Rpc, server: Server) -> None:
    answer = await rpc.raw(WHOAMI_BAD_ID, key=None)
    assert answer["error"]["code"] == -32700 and answer["id"] is None
    method = '{"jsonrpc":"2.0","id":3,"method":"auth.who\\udfffami"}'
    assert (await rpc.raw(method, key=None))["error"]["code"] == -32700
    status, body = await post(f"{server.http}/rpc", WHOAMI_BAD_ID)
    assert (status, body["error"]["code"]) == (200, -32700)


async def test_a_lone_surrogate_in_a_batch_costs_only_its_element(rpc: Rpc, server: Server) -> None:
    batch = f"[{WHOAMI_BAD_ID},{GOOD}]"
    answers = await rpc.raw(batch, key=("batch", 2))
    by_id = {a["id"]: a for a in answers}
    assert by_id[None]["error"]["code"] == -32600
    assert by_id[2]["result"]["scope"] == "anonymous"
    status, body = await post(f"{server.http}/rpc", batch)
    assert status == 200 and sorted(str(a["id"]) for a in body) == ["2", "None"]


@pytest.mark.parametrize(("job", "path"), SURROGATE_PARAMS)
async def test_a_lone_surrogate_in_params_is_invalid_params_and_never_stored(
    rpc: Rpc, server: Server, job: dict[str, Any], path: str
) -> None:
    text = create(job)
    answer = await rpc.raw(text, key=7)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["path"] == path
    status, body = await post(f"{server.http}/rpc", text)
    assert (status, body["error"]["code"], body["error"]["data"]["path"]) == (200, -32602, path)
    assert (await rpc.call("job.list", {}))["jobs"] == []
    await rpc.call("job.create", {"job": {"script": "print(1)", "script_type": "python"}})
    assert len((await rpc.call("job.list", {}))["jobs"]) == 1


async def test_deep_nesting_is_invalid_params(rpc: Rpc, server: Server) -> None:
    deep = "[" * 950 + "]" * 950
    text = create({}).replace('"python"', f'"python","prerequisites":{deep}')
    answer = await rpc.raw(text, key=7)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["path"].startswith("job.prerequisites")
    status, body = await post(f"{server.http}/rpc", text)
    assert (status, body["error"]["code"]) == (200, -32602)
    assert (await rpc.call("job.list", {}))["jobs"] == []
    assert "RecursionError" not in server.log()


def test_an_oversized_fragmented_message_is_closed_1009(server: Server) -> None:
    sock = raw_ws.connect(server.port)
    half = b"x" * (MAX_MESSAGE_BYTES // 2 + 1024)
    sock.sendall(raw_ws.frame(b'{"pad":"' + half, fin=False))
    sock.sendall(raw_ws.frame(half + b'"}', raw_ws.CONTINUATION))
    got = raw_ws.read_until_close(sock)
    sock.close()
    assert got.close_code == 1009


def test_a_fragmented_message_far_over_the_limit_still_gets_1009(server: Server) -> None:
    """The client is still sending fragments when the server gives up on the
    message: the close frame must reach it all the same (not a reset, 1006)."""
    sock = raw_ws.connect(server.port)
    piece = b"x" * 8192
    frames = [raw_ws.frame(b'{"pad":"' + piece, fin=False)]
    frames += [raw_ws.frame(piece, raw_ws.CONTINUATION, fin=False) for _ in range(60)]
    frames.append(raw_ws.frame(b'"}', raw_ws.CONTINUATION))
    sock.sendall(b"".join(frames))
    got = raw_ws.read_until_close(sock)
    sock.close()
    assert got.close_code == 1009


@pytest.mark.parametrize("pieces", [2, 20])
async def test_a_fragmented_message_sent_by_websockets_gets_1009_not_1006(
    server: Server, pieces: int
) -> None:
    """The client library streams fragments while the server has already failed
    the message: the server half-closes and drains, so the 1009 close frame is
    not destroyed by a reset (which the client would see as 1006)."""
    async with websockets.connect(server.ws, max_size=None, compression=None) as ws:
        piece = "x" * (3 * MAX_MESSAGE_BYTES // pieces)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.send(iter(['{"pad":"', *[piece] * pieces, '"}']))
            await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_a_lone_surrogate_an_outside_producer_stored_is_served_escaped(
    rpc: Rpc, server: Server, rds: aioredis.Redis
) -> None:
    """Any Hero client may HSET a job hash; one whose env_vars JSON holds a
    ``\\udfff`` escape must not make job.get or job.list fail (500 or silence)."""
    await rpc.call("job.create", {"job": {"script": "print(1)", "script_type": "python"}})
    (mine,) = (await rpc.call("job.list", {}))["jobs"]
    stored = await rds.hgetall(keys.job(mine["id"]))
    await rds.hset(
        keys.job("outside"), mapping={**stored, "id": "outside", "env_vars": '{"X": "\\udfff"}'}
    )
    got = await rpc.call("job.get", {"job_id": "outside"})
    assert got["env_vars"] == {"X": "\udfff"}
    status, body = await post(
        f"{server.http}/rpc",
        {"jsonrpc": "2.0", "id": 1, "method": "job.get", "params": {"job_id": "outside"}},
    )
    assert status == 200 and body["result"]["id"] == "outside"


def test_invalid_utf8_in_a_text_frame_is_closed_1007(server: Server) -> None:
    sock = raw_ws.connect(server.port)
    sock.sendall(raw_ws.frame(b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}'))
    got = raw_ws.read_until_close(sock)
    sock.close()
    assert got.close_code == 1007
    discover_over_ws(server, 1)
