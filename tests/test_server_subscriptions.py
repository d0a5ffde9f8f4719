"""job.subscribe over a real WebSocket: order, filters, replay with ``since``
across a reconnect, per-caller filtering, the slow-subscriber cut-off, and
subscriptions ending with their connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
import uvicorn
import websockets

from gateway.embedded_redis import free_port
from gateway.model import Event
from gateway.rpc.app import Gateway, Limits, Services
from gateway.rpc.subscriptions import MAX_SUBSCRIPTIONS
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.auth import KeyStore
from gateway.supervisor.wire import Wire
from tests.helpers import eventually, job
from tests.server_support import (
    Rpc,
    RpcError,
    Server,
    assert_event_shape,
)


async def events_until(rpc: Rpc, job_id: str, last: str, within: float = 20) -> list[Any]:
    """Events (params) until ``job_id`` reports event ``last``."""
    seen = []
    while True:
        params = await rpc.event(within)
        seen.append(params)
        event = params["event"]
        if event["job_id"] == job_id and event["event"] == last:
            return seen


async def test_answer_first_then_every_transition_in_stream_order(
    rpc: Rpc, actors: Any, rds: aioredis.Redis
) -> None:
    actors()
    sub = (await rpc.call("job.subscribe", {"job_ids": ["s1"]}))["subscription"]
    result = await rpc.call("job.run", {"job": job("print(1)", job_id="s1"), "wait": 20})
    assert result["status"] == "finished"
    seen = await events_until(rpc, "s1", "finished")
    assert {p["subscription"] for p in seen} == {sub}
    events = [p["event"] for p in seen]
    for event in events:
        assert_event_shape(event)
    # its print is also a `log` event when the job outlived the actor's first look (load)
    transitions = [e["event"] for e in events if e["event"] != "log"]
    assert transitions == ["created", "dispatched", "started", "finished"]
    stream = [
        entry_id for entry_id, fields in await rds.xrange(keys.EVENTS) if fields["job_id"] == "s1"
    ]
    assert [e["id"] for e in events] == stream
    assert isinstance(events[-1]["ts"], int) and events[-1]["attempt"] == 1
    assert events[0]["group"] is None and events[0]["error"] is None
    assert events[-1]["output"] == "1\n" and "output" not in events[0]


async def test_replayed_events_never_come_before_the_subscribe_answer(rpc: Rpc) -> None:
    for i in range(20):
        await rpc.call("job.create", {"job": job(job_id=f"old{i}")})
    sub = (await rpc.call("job.subscribe", {"since": "0-0"}))["subscription"]
    replayed = [(await rpc.event())["event"]["job_id"] for _ in range(20)]
    assert replayed == [f"old{i}" for i in range(20)]
    answer_at = next(
        i for i, m in enumerate(rpc.received) if m.get("result") == {"subscription": sub}
    )
    first_event_at = next(i for i, m in enumerate(rpc.received) if m.get("method"))
    assert answer_at < first_event_at


async def test_filters_by_script_type(rpc: Rpc) -> None:
    await rpc.call("job.subscribe", {"script_type": "osis"})
    await rpc.call("job.create", {"job": job(job_id="py")})
    await rpc.call("job.create", {"job": job(script_type="osis", job_id="os")})
    event = (await rpc.event())["event"]
    assert (event["job_id"], event["script_type"]) == ("os", "osis")
    await rpc.call("job.create", {"job": job(script_type="osis", job_id="os-2")})  # barrier
    assert (await rpc.event())["event"]["job_id"] == "os-2"  # nothing leaked before it
    assert rpc.notifications.empty()


async def test_unsubscribe_stops_the_events(rpc: Rpc) -> None:
    sub = (await rpc.call("job.subscribe", {}))["subscription"]
    barrier = (await rpc.call("job.subscribe", {"script_type": "osis"}))["subscription"]
    await rpc.call("job.create", {"job": job(job_id="a")})
    assert (await rpc.event())["event"]["job_id"] == "a"
    assert await rpc.call("job.unsubscribe", {"subscription": sub}) == {"unsubscribed": True}
    await rpc.call("job.create", {"job": job(job_id="b")})
    # barrier: the events reader hands "b" to the feeds before "c", each to its pump
    await rpc.call("job.create", {"job": job(script_type="osis", job_id="c")})
    params = await rpc.event()
    assert (params["subscription"], params["event"]["job_id"]) == (barrier, "c")
    assert rpc.notifications.empty()
    assert await rpc.call("job.unsubscribe", {"subscription": sub}) == {"unsubscribed": False}


async def test_bad_since_is_invalid_params(rpc: Rpc) -> None:
    with pytest.raises(RpcError) as caught:
        await rpc.call("job.subscribe", {"since": "yesterday"})
    assert caught.value.code == -32602 and caught.value.data["path"] == "since"
    with pytest.raises(RpcError) as caught:  # matches the pattern, but Redis would refuse it
        await rpc.call("job.subscribe", {"since": f"{2**64}-0"})
    assert caught.value.code == -32602


async def test_reconnect_with_since_misses_nothing_and_repeats_nothing(
    server: Server, rds: aioredis.Redis
) -> None:
    got: list[str] = []
    async with Rpc.connect(server.ws) as first:
        await first.call("job.subscribe", {"script_type": "python"})
        for i in range(5):
            await first.call("job.create", {"job": job(job_id=f"r{i}")})
        got += [(await first.event())["event"]["id"] for _ in range(2)]
    # disconnected: these happen while nobody listens
    async with Rpc.connect(server.ws) as writer:
        for i in range(5, 10):
            await writer.call("job.create", {"job": job(job_id=f"r{i}")})
        async with Rpc.connect(server.ws) as second:
            # live events race the replay: the handover must neither drop nor repeat
            racing = [
                asyncio.create_task(writer.call("job.create", {"job": job(job_id=f"r{i}")}))
                for i in range(10, 15)
            ]
            await second.call("job.subscribe", {"script_type": "python", "since": got[-1]})
            await asyncio.gather(*racing)
            for i in range(15, 17):
                await writer.call("job.create", {"job": job(job_id=f"r{i}")})
            # barrier: r17, created last, comes after any repeat of an earlier one
            await writer.call("job.create", {"job": job(job_id="r17")})
            stream = [entry_id for entry_id, _ in await rds.xrange(keys.EVENTS)]
            while len(got) < len(stream):
                got.append((await second.event())["event"]["id"])
            assert second.notifications.empty()
    assert got == stream
    assert len(set(got)) == len(got) == 18


async def test_user_keys_see_only_their_own_events(server: Server, redis_url: str) -> None:
    client = Wire(redis_url, "test-keys")
    store = KeyStore(client, redis_url)
    alice = await store.create("alice", "user", "alice")
    bob = await store.create("bob", "user", "bob")
    admin = await store.create("ops", "admin")
    await client.aclose()
    headers = {"alice": alice, "bob": bob, "ops": admin}
    async with contextlib.AsyncExitStack() as stack:
        conns = {
            name: await stack.enter_async_context(
                Rpc.connect(server.ws, additional_headers={"Authorization": f"Bearer {key}"})
            )
            for name, key in headers.items()
        }
        for name in ("alice", "ops"):
            await conns[name].call("job.subscribe", {})
        await conns["bob"].call("job.create", {"job": job(job_id="bobs")})
        await conns["alice"].call("job.create", {"job": job(job_id="alices")})
        assert (await conns["alice"].event())["event"]["job_id"] == "alices"
        admin_saw = {(await conns["ops"].event())["event"]["job_id"] for _ in range(2)}
        assert admin_saw == {"bobs", "alices"}
        await conns["alice"].call("job.create", {"job": job(job_id="alices-2")})  # barrier
        assert (await conns["alice"].event())["event"]["job_id"] == "alices-2"
        assert conns["alice"].notifications.empty()
        with pytest.raises(RpcError) as caught:
            await conns["alice"].call("job.subscribe", {"job_ids": ["bobs"]})
        assert caught.value.code == -32001  # as if bob's job did not exist


async def test_a_subscriber_that_does_not_read_is_cut_off_with_1013(
    server: Server, rds: aioredis.Redis
) -> None:
    """The client stops reading (tiny receive buffer, no compression, one queued
    frame) while a burst of large events arrives: once the kernel buffers and the
    supervisor's bounded per-subscription buffer are full, the server closes
    with 1013 instead of buffering more."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: small window
    sock.connect(("127.0.0.1", server.port))
    async with websockets.connect(server.ws, sock=sock, max_queue=1, compression=None) as ws:
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "job.subscribe",
                    "params": {"script_type": "flood"},
                    "id": 1,
                }
            )
        )
        assert "subscription" in json.loads(await ws.recv())["result"]
        fields = {
            "job_id": "j",
            "event": "created",
            "status": "created",
            "script_type": "flood",
            "attempt": "0",
            "ts": "1",
            "error": "x" * 4000,
        }
        async with rds.pipeline(transaction=False) as pipe:
            for _ in range(3000):
                pipe.xadd(keys.EVENTS, fields)
            await pipe.execute()
        await asyncio.sleep(0.5)  # a client that does not read for a while: time is the case
        received = 0
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), 10)
                received += 1
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1013, "subscriber too slow")
    assert received < 3000
    async with Rpc.connect(server.ws) as other:  # the server is fine
        assert (await other.call("auth.whoami"))["scope"] == "anonymous"


# -- in-process: what the supervisor holds for a connection ---------------------------


@contextlib.asynccontextmanager
async def in_process_server(sup: Supervisor) -> AsyncIterator[str]:
    """A real uvicorn serving the app in this event loop, on ``sup``."""

    @contextlib.asynccontextmanager
    async def services() -> AsyncIterator[Services]:
        yield Services(sup, KeyStore(sup.wire, sup.config.redis))

    app = Gateway(services, Limits(check_results=True))
    port = free_port()
    config = uvicorn.Config(
        app.app,
        host="127.0.0.1",
        port=port,
        ws="websockets-sansio",
        lifespan="on",
        log_config=None,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        return server.started

    try:
        await eventually(started)
        yield f"ws://127.0.0.1:{port}/ws"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


async def test_subscriptions_end_with_their_connection(sup: Supervisor) -> None:
    async with in_process_server(sup) as url:
        async with Rpc.connect(url) as client:
            await client.call("job.subscribe", {})
            await client.call("job.subscribe", {"script_type": "python", "since": "0-0"})
            assert len(sup.subscriptions) == 2
            async with Rpc.connect(url) as other:
                sub = (await other.call("job.subscribe", {}))["subscription"]
                await other.call("job.unsubscribe", {"subscription": sub})
                assert len(sup.subscriptions) == 2

        async def none_left() -> bool:
            return len(sup.subscriptions) == 0

        await eventually(none_left, within=5)


async def test_subscriptions_per_connection_are_capped(rpc: Rpc) -> None:
    for _ in range(MAX_SUBSCRIPTIONS):
        await rpc.call("job.subscribe", {"script_type": "osis"})
    with pytest.raises(RpcError) as caught:
        await rpc.call("job.subscribe", {})
    assert caught.value.code == -32006
    assert caught.value.data == {"limit": MAX_SUBSCRIPTIONS}


def test_events_from_older_actors_still_fit_the_contract() -> None:
    """Entries without ts/attempt (legacy writers) and with extra fields."""
    event = Event.from_entry(
        "1700000000123-4",
        {
            "job_id": "j",
            "event": "finished",
            "status": "finished",
            "script_type": "osis",
            "extra": "dropped",
        },
    ).to_contract()
    assert_event_shape(event)
    assert (event["ts"], event["attempt"], event["error"]) == (1700000000123, 0, None)


async def test_a_feed_hands_out_each_event_once_in_stream_order(sup: Supervisor) -> None:
    """The supervisor's feed, not the transport, holds the order rule: an event
    at or before the last one handed out (a repeat, or one the reader hands
    over late) is dropped, and a user's feed passes its own caller's only."""
    feed = await sup.subscribe(caller_id="alice")

    def at(entry_id: str, job_id: str, caller: str = "alice") -> Event:
        fields = {"job_id": job_id, "event": "created", "status": "created", "caller_id": caller}
        return Event.from_entry(entry_id, {**fields, "script_type": "python"})

    sup.subscriptions.on_events([at("5-0", "a"), at("5-0", "a"), at("4-9", "old")])
    sup.subscriptions.on_events([at("6-0", "b", caller="bob"), at("7-0", "c"), at("6-5", "d")])
    sup.unsubscribe(feed.id)
    assert [event.job_id async for event in feed] == ["a", "c"]
