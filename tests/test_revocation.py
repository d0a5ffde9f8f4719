"""A revoked key stops working on sockets it already opened, on every gateway,
within a second.

Two real gateway processes share one real redis-server (this test's own, as
the test kills its pub/sub clients); keys are revoked with the real CLI
(``hero-gateway keys revoke`` with an explicit ``--redis-url``). Also after a
gateway's pub/sub connection was killed and came back, and when a key was
revoked while nobody was subscribed (the gateway asks about its sockets'
keys again when it resubscribes).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.embedded_redis import EmbeddedRedis
from gateway.rpc.revocation import CLOSE_POLICY, REVOKED_REASON
from gateway.supervisor import keys
from gateway.supervisor.auth import KeyStore, digest
from gateway.supervisor.wire import Wire
from tests import server_support as support
from tests.helpers import eventually
from tests.server_support import Rpc, Server

#: Budget from the revocation to the socket's close.
WITHIN = 1.0
CLI = Path(sys.executable).with_name("hero-gateway")


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = support.private_redis(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture
async def rds(own_redis: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def keyring(own_redis: EmbeddedRedis) -> AsyncIterator[dict[str, str]]:
    client = Wire(own_redis.url, "test-keys")
    store = KeyStore(client, own_redis.url)
    yield {
        "alice": await store.create("alice", "user", "alice"),
        "bob": await store.create("bob", "user", "bob"),
    }
    await client.aclose()


@pytest.fixture
def gateways(own_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[list[Server]]:
    with (
        support.running_server(own_redis.url, tmp_path / "a.log") as a,
        support.running_server(own_redis.url, tmp_path / "b.log") as b,
    ):
        yield [a, b]


@contextlib.asynccontextmanager
async def sockets(gateways: list[Server], key: str) -> AsyncIterator[list[Rpc]]:
    """One authenticated socket per gateway."""
    headers = {"Authorization": f"Bearer {key}"}
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(Rpc.connect(g.ws, additional_headers=headers))
            for g in gateways
        ]


async def subscribed(rds: aioredis.Redis, count: int) -> None:
    """Wait until ``count`` gateways listen for revocations."""

    async def check() -> bool:
        found = await rds.pubsub_numsub(keys.API_KEY_REVOKED)
        return bool(found) and int(found[0][1]) == count

    await eventually(check)


async def revoke_with_cli(redis_url: str, name: str) -> float:
    """Run ``hero-gateway keys revoke``; the monotonic time it finished."""
    done = await asyncio.to_thread(
        subprocess.run,
        [str(CLI), "keys", "revoke", "--name", name, "--redis-url", redis_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return time.monotonic()


async def assert_closed_by(clients: list[Rpc], deadline: float) -> None:
    for client in clients:
        code, reason = await client.closed(within=max(0.0, deadline - time.monotonic()) + 0.01)
        assert (code, reason) == (CLOSE_POLICY, REVOKED_REASON)
    assert time.monotonic() <= deadline


async def assert_still_served(clients: list[Rpc]) -> None:
    for client in clients:
        assert (await client.call("auth.whoami"))["name"] == "alice"


async def test_revoking_closes_open_sockets_on_every_gateway(
    gateways: list[Server], own_redis: EmbeddedRedis, rds: aioredis.Redis, keyring: dict[str, str]
) -> None:
    await subscribed(rds, 2)
    async with (
        sockets(gateways, keyring["bob"]) as bobs,
        sockets(gateways, keyring["alice"]) as alices,
    ):
        for bob in bobs:
            await bob.call("job.subscribe", {})  # a live subscription ends too
        finished = await revoke_with_cli(own_redis.url, "bob")
        await assert_closed_by(bobs, finished + WITHIN)
        await assert_still_served(alices)


async def test_revoking_after_the_subscription_dropped_and_came_back(
    gateways: list[Server], own_redis: EmbeddedRedis, rds: aioredis.Redis, keyring: dict[str, str]
) -> None:
    await subscribed(rds, 2)
    async with (
        sockets(gateways, keyring["bob"]) as bobs,
        sockets(gateways, keyring["alice"]) as alices,
    ):
        assert await rds.client_kill_filter(_type="pubsub") >= 2
        await subscribed(rds, 2)  # both came back
        finished = await revoke_with_cli(own_redis.url, "bob")
        await assert_closed_by(bobs, finished + WITHIN)
        await assert_still_served(alices)


async def test_a_revocation_nobody_heard_is_found_on_resubscribing(
    gateways: list[Server], rds: aioredis.Redis, keyring: dict[str, str]
) -> None:
    """The subscriptions are killed and the key deleted in one transaction, so
    no gateway can hear of it: each finds out when it subscribes again."""
    await subscribed(rds, 2)
    async with (
        sockets(gateways, keyring["bob"]) as bobs,
        sockets(gateways, keyring["alice"]) as alices,
    ):
        async with rds.pipeline(transaction=True) as pipe:
            pipe.client_kill_filter(_type="pubsub")
            pipe.delete(keys.api_key(digest(keyring["bob"])))
            pipe.srem(keys.API_KEYS, digest(keyring["bob"]))
            killed, *_ = await pipe.execute()
        revoked = time.monotonic()
        assert killed >= 2
        await assert_closed_by(bobs, revoked + WITHIN)
        await assert_still_served(alices)
