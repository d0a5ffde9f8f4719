"""wire: the multiplexed connection of the job path, against a real redis-server."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway import eventloop
from gateway.embedded_redis import EmbeddedRedis, free_port
from gateway.supervisor.connection import CONNECT_TIMEOUT
from gateway.supervisor.subscriber import Subscriber
from gateway.supervisor.wire import Wire
from tests.helpers import blocked_in, eventually


@pytest.fixture
async def wire(redis_url: str) -> AsyncIterator[Wire]:
    w = Wire(redis_url, "test-wire")
    yield w
    await w.aclose()


async def wire_client_id(rds: aioredis.Redis, name: str) -> int:
    clients: list[dict[str, Any]] = await rds.client_list()
    (found,) = [int(c["id"]) for c in clients if c["name"] == f"hero-gateway/{name}"]
    return found


async def test_replies_and_error_replies_each_reach_their_caller(
    wire: Wire, rds: aioredis.Redis
) -> None:
    await rds.rpush("wi-list", "x")
    assert await wire.execute_command("SET", "wi-key", "v") == "OK"
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await wire.execute_command("HGET", "wi-list", "f")
    replies = await asyncio.gather(
        wire.execute_command("GET", "wi-key"),
        wire.execute_command("HGET", "wi-list", "f"),
        wire.execute_command("LRANGE", "wi-list", 0, -1),
        return_exceptions=True,
    )
    assert replies[0] == "v"
    assert isinstance(replies[1], ResponseError)
    assert replies[2] == ["x"]


async def test_commands_of_one_loop_turn_leave_in_one_write(
    wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    await wire.execute_command("PING")  # connected
    conn = wire._link.conn  # type: ignore[union-attr]
    writes: list[bytes] = []
    real = conn.send_packed_command

    async def spy(data: bytes, check_health: bool = True) -> None:
        writes.append(data)
        await real(data, check_health=check_health)

    monkeypatch.setattr(conn, "send_packed_command", spy)
    replies = await asyncio.gather(*(wire.execute_command("INCR", "wi-turn") for _ in range(100)))
    assert replies == list(range(1, 101))  # and in the order they were issued
    assert len(writes) == 1


async def test_a_flood_of_concurrent_callers_is_answered_in_full(wire: Wire) -> None:
    n = 20_000
    replies = await asyncio.gather(*(wire.execute_command("INCR", "wi-flood") for _ in range(n)))
    assert replies == list(range(1, n + 1))


async def test_pipeline_raises_the_first_error_reply_once_all_ran(wire: Wire) -> None:
    await wire.execute_command("SET", "wi-raise", "1")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await wire.pipeline([("LPUSH", "wi-raise", "x"), ("INCR", "wi-raise")])
    assert await wire.execute_command("GET", "wi-raise") == "2"  # the rest ran all the same


async def test_pipeline_keeps_an_error_reply_in_its_place_when_asked(wire: Wire) -> None:
    await wire.execute_command("SET", "wi-str", "1")
    batch = [("INCR", "wi-str"), ("LPUSH", "wi-str", "x"), ("GET", "wi-str")]
    replies = await wire.pipeline(batch, errors_in_place=True)
    assert replies[0] == 2
    assert isinstance(replies[1], ResponseError)
    assert replies[2] == "2"


async def test_a_lost_connection_fails_the_calls_in_flight_and_the_next_call_reconnects(
    wire: Wire, rds: aioredis.Redis
) -> None:
    blocked = asyncio.create_task(wire.execute_command("BLPOP", "wi-nothing", 30))
    await eventually(lambda: blocked_in(rds, "blpop", name="hero-gateway/test-wire"))
    await rds.client_kill_filter(_id=await wire_client_id(rds, "test-wire"))
    with pytest.raises(RedisConnectionError):
        await asyncio.wait_for(blocked, 5)
    assert await wire.execute_command("PING") == "PONG"


async def test_aclose_ends_a_blocked_read_at_once_and_later_calls_fail(
    wire: Wire, rds: aioredis.Redis
) -> None:
    blocked = asyncio.create_task(wire.execute_command("BLPOP", "wi-nothing", 30))
    await eventually(lambda: blocked_in(rds, "blpop", name="hero-gateway/test-wire"))
    await asyncio.wait_for(wire.aclose(), 2)
    with pytest.raises(RedisConnectionError):
        await asyncio.wait_for(blocked, 2)
    with pytest.raises(RedisConnectionError):
        await wire.execute_command("PING")


async def test_the_url_selects_the_database_and_authenticates(
    redis_server: EmbeddedRedis, rds: aioredis.Redis
) -> None:
    await rds.execute_command("ACL", "SETUSER", "wire-user", "on", ">s3cret", "~*", "&*", "+@all")
    base = f"redis://wire-user:{{}}@127.0.0.1:{redis_server.port}"
    wire = Wire(base.format("s3cret") + "/5", "test-wire-db")
    wrong = Wire(base.format("nope") + "/0", "test-wire-auth")
    other = aioredis.Redis(port=redis_server.port, db=5, decode_responses=True)
    try:
        await wire.execute_command("SET", "wi-db", "five")
        assert await other.get("wi-db") == "five"
        with pytest.raises(RedisConnectionError, match="refused") as caught:
            await wrong.execute_command("PING")
        assert "nope" not in str(caught.value)  # the password never reaches an error
    finally:
        await rds.execute_command("ACL", "DELUSER", "wire-user")
        for closing in (wire, wrong, other):
            await closing.aclose()


async def test_an_unreachable_redis_is_a_connection_error() -> None:
    wire = Wire(f"redis://127.0.0.1:{free_port()}/0", "test-wire-down")
    with pytest.raises(RedisConnectionError):
        await wire.execute_command("PING")
    await wire.aclose()


async def test_subscriber_hears_from_the_confirmation_on_and_knows_when_it_is_lost(
    redis_url: str, rds: aioredis.Redis
) -> None:
    heard: list[tuple[str, str]] = []
    sub = Subscriber(redis_url, "test-sub", lambda channel, data: heard.append((channel, data)))
    try:
        lost = await sub.subscribe(["wi-a", "wi-b"])
        assert await rds.publish("wi-a", "one") == 1  # confirmed: Redis delivers from here
        await rds.publish("wi-b", "two")
        await rds.publish("wi-c", "not ours")
        await rds.publish("wi-a", "three")  # barrier: "not ours" would come before it
        await eventually(lambda: asyncio.sleep(0, len(heard) >= 3))
        assert heard == [("wi-a", "one"), ("wi-b", "two"), ("wi-a", "three")]
        await rds.client_kill_filter(_id=await wire_client_id(rds, "test-sub"))
        await asyncio.wait_for(lost, 5)
        lost = await sub.subscribe(["wi-a"])  # subscribing again reconnects
        assert await rds.publish("wi-a", "three") == 1
    finally:
        await sub.aclose()


def test_wire_and_subscriber_work_on_uvloop(redis_url: str) -> None:
    """serve and actor run on uvloop (HERO_EVENT_LOOP=auto), whose transports
    differ from asyncio's; the tests above run on asyncio's loop."""

    async def scenario() -> list[Any]:
        heard: list[str] = []
        wire = Wire(redis_url, "test-wire-uv")
        sub = Subscriber(redis_url, "test-sub-uv", lambda _, data: heard.append(data))
        try:
            await sub.subscribe(["wi-uv"])
            replies = await wire.pipeline([("SET", "wi-uv", "1"), ("PUBLISH", "wi-uv", "hi")])
            await eventually(lambda: asyncio.sleep(0, bool(heard)))
            return [*replies, *heard]
        finally:
            await sub.aclose()
            await wire.aclose()

    assert eventloop.run(scenario(), "uvloop") == ["OK", 1, "hi"]


async def test_a_unix_socket_url(tmp_path: Path) -> None:
    """``unix://`` URLs (a Redis on the same host without TCP), db included."""
    sock = tmp_path / "redis.sock"
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(sock), "--save", "", "--appendonly",
         "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wire = Wire(f"unix://{sock}?db=3", "test-wire-unix")
    try:
        await eventually(lambda: asyncio.sleep(0, sock.exists()))
        assert await wire.execute_command("SET", "wi-unix", "yes") == "OK"
        other = aioredis.Redis(unix_socket_path=str(sock), db=3, decode_responses=True)
        assert await other.get("wi-unix") == "yes"
        await other.aclose()
    finally:
        await wire.aclose()
        server.terminate()
        server.wait(10)


async def test_a_vanished_host_is_noticed_by_tcp_keepalive_within_about_a_minute(
    wire: Wire,
) -> None:
    """No read timeout (BLOCKing reads wait by design), so the kernel's probes
    are what ends a call to a host that went away without closing."""
    await wire.execute_command("PING")
    sock = wire._link.conn._writer.get_extra_info("socket")  # type: ignore[union-attr]
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    idle, interval, count = (
        sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name))
        for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")
    )
    assert idle + interval * count <= 90


async def test_an_empty_pipeline_is_answered_empty_and_leaves_the_wire_usable(wire: Wire) -> None:
    await wire.execute_command("PING")
    empty = await asyncio.gather(wire.pipeline([]), wire.pipeline([]))
    assert list(empty) == [[], []]
    after = await asyncio.gather(wire.execute_command("PING"), wire.pipeline([("PING",)]))
    assert list(after) == ["PONG", ["PONG"]]


async def test_aclose_while_connecting_fails_the_call_in_flight(
    redis_url: str, rds: aioredis.Redis
) -> None:
    """Closed while its first call is still connecting (an actor stopped as it
    starts): the link made meanwhile is closed before its reader task ever
    ran, and the call still fails at once instead of waiting forever."""
    wire = Wire(redis_url, "test-wire-early")
    blocked = asyncio.create_task(wire.execute_command("BLPOP", "wi-nothing", 30))
    await asyncio.sleep(0)  # dialling
    started = time.monotonic()
    await asyncio.wait_for(wire.aclose(), 2)
    with pytest.raises(RedisConnectionError):
        await asyncio.wait_for(blocked, 2)
    assert time.monotonic() - started < 1

    async def closed() -> bool:  # the link made meanwhile too, not only the call
        clients: list[dict[str, Any]] = await rds.client_list()
        return all(c["name"] != "hero-gateway/test-wire-early" for c in clients)

    await eventually(closed, within=5)


async def test_a_command_that_cannot_be_packed_leaves_the_replies_in_step(
    wire: Wire, rds: aioredis.Redis
) -> None:
    """An argument hiredis cannot pack (None, a dict) fails that call alone:
    nothing of it is queued, so every later reply still reaches its caller."""
    await rds.mset({"wi-a": "1", "wi-b": "2"})
    for bad in (None, {"x": 1}):
        with pytest.raises(TypeError):
            await wire.execute_command("SET", "wi-bad", bad)
    with pytest.raises(TypeError):
        await wire.pipeline([("GET", "wi-a"), ("SET", "wi-bad", None)])
    replies = await asyncio.gather(*(wire.execute_command("GET", k) for k in ("wi-a", "wi-b")))
    assert replies == ["1", "2"]


async def test_a_caller_cancelled_while_its_write_waits_leaves_the_others_connected(
    tmp_path: Path,
) -> None:
    """A write stuck behind a Redis that does not read (here: stopped with
    SIGSTOP), cancelled by its caller (a wait that timed out, a socket that
    closed): the shared connection stays up and the other calls are answered."""
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    wire = Wire(server.url, "test-wire-cancel")
    assert server.process is not None
    try:
        await wire.execute_command("PING")
        server.process.send_signal(signal.SIGSTOP)
        try:
            big = asyncio.create_task(wire.execute_command("SET", "wi-big", "x" * 16_000_000))
            await asyncio.sleep(0.2)  # no event to wait on: the kernel's buffers fill
            assert not big.done()  # 16 MB do not fit them: the write waits
            ping = asyncio.create_task(wire.execute_command("PING"))
            await asyncio.sleep(0)
            big.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await big
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert await asyncio.wait_for(ping, 10) in ("PONG", True)
        assert await wire.execute_command("GET", "wi-big") == "x" * 16_000_000
    finally:
        await wire.aclose()
        server.stop()


async def test_a_stopped_redis_fails_the_calls_after_the_timeout_and_is_dialled_again(
    tmp_path: Path,
) -> None:
    """Redis stopped (SIGSTOP: its sockets stay open, so no error ever comes):
    the commands in flight fail with TimeoutError after about ``timeout``
    seconds, not never. A retry at once dials again (not the dead link), and
    callers that find it down share one dial, failing together; once Redis
    runs again the next command is answered."""
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    wire = Wire(server.url, "test-wire-stall", timeout=0.8)
    assert server.process is not None
    try:
        assert await wire.execute_command("SET", "wi-stall", "before") == "OK"
        server.process.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            calls = [wire.execute_command("GET", "wi-stall"), wire.pipeline([("PING",)] * 3)]
            failed = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)
            waited = time.monotonic() - started
            assert [type(f) for f in failed] == [RedisTimeoutError, RedisTimeoutError]
            assert 0.8 <= waited < 0.8 * 1.25 + 0.5, waited
            started = time.monotonic()
            retries = [wire.execute_command("PING") for _ in range(8)]
            again = await asyncio.wait_for(asyncio.gather(*retries, return_exceptions=True), 30)
            waited = time.monotonic() - started
            assert {str(e) for e in again} == {"timed out connecting to Redis"}, again
            assert CONNECT_TIMEOUT <= waited < 2 * CONNECT_TIMEOUT, waited  # one dial for all
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert await wire.execute_command("GET", "wi-stall") == "before"
    finally:
        await wire.aclose()
        server.stop()


async def test_a_retry_right_after_a_stall_dials_again(tmp_path: Path) -> None:
    """The caller woken by the stall's TimeoutError calls again at once, before
    the loss's callbacks ran: that call dials, it does not fail on the dead link."""
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    wire = Wire(server.url, "test-wire-retry", timeout=0.4)
    assert server.process is not None
    try:
        await wire.execute_command("PING")
        server.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(RedisTimeoutError):
                await wire.execute_command("PING")
            retry = asyncio.ensure_future(wire.execute_command("PING"))
            await asyncio.sleep(0.3)
            assert not retry.done()  # dialling, not failed at once
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert await asyncio.wait_for(retry, 10) in ("PONG", True)
    finally:
        await wire.aclose()
        server.stop()


async def test_a_blocked_loop_does_not_blame_redis(redis_url: str) -> None:
    """This process's loop blocked for longer than the timeout while a reply
    sat unread: the late tick waits for the reader, and the reply is taken."""
    wire = Wire(redis_url, "test-wire-blocked", timeout=0.4)
    try:
        await wire.execute_command("PING")
        ping = asyncio.ensure_future(wire.execute_command("PING"))
        for _ in range(3):
            await asyncio.sleep(0)  # written
        time.sleep(0.8)  # noqa: ASYNC251  (blocks the loop on purpose: the reply waits unread)
        assert await asyncio.wait_for(ping, 5) in ("PONG", True)
    finally:
        await wire.aclose()


async def test_a_slow_redis_that_keeps_answering_is_not_a_stalled_one(redis_url: str) -> None:
    """The stall watch counts replies, not time per call: slow commands (each
    0.15 s of Lua) that keep Redis busy for several timeouts in all, and a wire
    idle for longer than one, stay connected. (They go one after the other:
    Redis answers what it read in one go together, so a pipeline is one step.)"""
    wire = Wire(redis_url, "test-wire-slow", timeout=0.4)
    busy = """local t0 = redis.call('TIME')
while true do
  local t = redis.call('TIME')
  if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 150000 then return 1 end
end"""
    try:
        assert await wire.execute_command("PING") in ("PONG", True)
        await asyncio.sleep(1.0)  # idle: nothing owed, nothing to watch
        started = time.monotonic()
        for _ in range(8):
            assert await wire.execute_command("EVAL", busy, 0) == 1
        assert time.monotonic() - started > 1.0  # longer than two timeouts in all
        assert await wire.execute_command("PING") in ("PONG", True)
    finally:
        await wire.aclose()


async def test_a_push_callback_that_fails_closes_the_socket(
    redis_url: str, rds: aioredis.Redis
) -> None:
    """A link whose reader ended (here: its push callback raised) is lost and its
    socket closed, not left open until garbage collection."""

    def fails(_: list[Any]) -> None:
        raise RuntimeError("a listener's bug")

    wire = Wire(redis_url, "test-wire-push", on_push=fails)
    try:
        lost = await wire.post("SUBSCRIBE", "wi-channel")
        await rds.publish("wi-channel", "hello")
        await asyncio.wait_for(lost, 10)

        async def gone() -> bool:
            clients: list[dict[str, Any]] = await rds.client_list()
            return all(c["name"] != "hero-gateway/test-wire-push" for c in clients)

        await eventually(gone, within=5)
    finally:
        await wire.aclose()
