"""The dead-actor detector, with real actor processes and real redis-servers:
a job that kills its actors is poison, a Redis outage of any length never
makes a live actor look dead, and outside actors that only write the
protocol's presence key are listed."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from gateway import contract
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis, free_port
from gateway.errors import BackendUnavailable
from gateway.supervisor import Supervisor, keys
from tests import server_support as support
from tests.helpers import by_hand, eventually, job, spawn_actor
from tests.server_support import Rpc, Server, http_get


async def connect(config: Config) -> Supervisor:
    return await Supervisor.connect(replace(config, maintenance_interval=0.2))


@pytest.fixture
async def quick(config: Config) -> AsyncIterator[tuple[Config, Supervisor]]:
    fast = replace(config, presence_ttl=1, retry_base=0.05, retry_max=0.2)
    sup = await connect(fast)
    yield fast, sup
    await sup.close()


@pytest.mark.timeout(90)
async def test_a_job_that_kills_its_actors_is_dead_lettered_as_poison(
    quick: tuple[Config, Supervisor], processes: list[subprocess.Popen[bytes]]
) -> None:
    config, sup = quick
    assert config.max_actor_deaths == 2  # the default
    handler = ("--script-type", "osis", "--handler", "tests.fault_handlers:deadly")
    for n in range(3):
        processes.append(spawn_actor(config, *handler, "--instance", f"a{n}"))

    async def fleet_up() -> bool:
        return len(await sup.actors("osis")) == 3

    await eventually(fleet_up, within=30)
    # retries it has, and keeps: deaths have their own budget
    await sup.create(job("die", script_type="osis", job_id="poison", retries=5))
    await sup.start("poison")

    async def dead_lettered() -> bool:
        return bool((await sup.status("poison"))["status"] == "dlq")

    await eventually(dead_lettered, within=40)
    dead = [p for p in processes if p.poll() is not None]
    assert len(dead) == config.max_actor_deaths
    entry = next(e for e in await sup.dlq_list("osis") if e["job_id"] == "poison")
    assert entry["reason"] == "poison" and "died" in entry["error"]
    assert (await sup.output("poison"))["status"] == "dlq"
    assert contract.schema_validator("Job").problems(await sup.get("poison")) == []
    # the survivor still serves
    result = await sup.run(job("fine", script_type="osis", job_id="after"), wait=20)
    assert (result["status"], result["output"]) == ("finished", "fine")


async def test_the_detector_counts_only_time_redis_was_reachable(
    quick: tuple[Config, Supervisor], rds: aioredis.Redis
) -> None:
    """Step by step, on the leader's ticks: a presence that lapsed while Redis
    was out of reach gets a full TTL; one that lapses while it is reachable
    is a death."""
    config, sup = quick
    await by_hand(sup, rds)
    lease = keys.presence("osis", "default", "ghost")
    await sup.create(job(script_type="osis", job_id="held"))
    await rds.hset(keys.job("held"), mapping={"status": "started", "lease": lease,
                                              "actor": "default:ghost", "attempt": 1})  # fmt: skip
    await rds.lpush(keys.held("osis", "default", "ghost"), "held")
    now_ms = int((await rds.time())[0]) * 1000
    await rds.zadd(keys.ACTORS, {lease: now_ms - 1000})  # lapsed a second ago...
    await rds.set(keys.WATCH, now_ms - 60_000)  # ...during a minute nobody reached Redis
    assert await sup.maintenance.lead()
    done = await sup.maintenance.tick()
    assert done["reaped"] == 0 and (await sup.status("held"))["status"] == "started"
    assert (await rds.zscore(keys.ACTORS, lease) or 0) >= now_ms + config.presence_ttl * 1000
    await rds.zadd(keys.ACTORS, {lease: now_ms - 1})  # a TTL of reachable time went by
    done = await sup.maintenance.tick()
    assert done["reaped"] == 1
    got = await sup.get("held")
    assert got["status"] == "retrying" and got["error"] == "actor default:ghost died"
    assert got["attempt"] == 0  # not spent: the actor died, not the job
    assert await rds.hget(keys.job("held"), "deaths") == "1"


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A redis-server of this test's own, AOF on (appendfsync everysec)."""
    server = EmbeddedRedis(tmp_path / "redis", port=free_port(), appendonly=True).start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.process.send_signal(signal.SIGCONT)  # stop() must reach a paused one
    server.stop()


async def pause(server: EmbeddedRedis, seconds: float) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        server.process.send_signal(signal.SIGCONT)


async def restart(server: EmbeddedRedis, seconds: float) -> None:
    server.stop()  # SIGTERM: a clean shutdown, the AOF flushed
    await asyncio.sleep(seconds)
    server.start()


async def command_connections(url: str) -> set[int]:
    """The ids of the connections carrying commands (the stall-watched ones)."""
    check = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        clients: list[dict[str, str]] = await check.client_list()
    finally:
        await check.aclose()
    names = {"hero-gateway/supervisor-jobs", "hero-gateway/actor-jobs"}
    return {int(c["id"]) for c in clients if c["name"] in names}


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("outage", "redis_timeout"),
    [(pause, 10.0), (pause, 1.5), (restart, 10.0)],
    ids=["paused", "paused-past-redis-timeout", "restarted"],
)
async def test_an_outage_never_ends_a_live_actors_jobs(
    outage: object,
    redis_timeout: float,
    own_redis: EmbeddedRedis,
    tmp_path: Path,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    """Redis away for 3x the presence TTL under run-and-wait load: no job of a
    live actor ends (or is even retried) as 'actor died', none accepted is lost.
    Paused past HERO_REDIS_TIMEOUT, every connection in flight is given up
    (the wire's stall watch) while Redis may still run what it was sent:
    claims whose replies were lost are adopted, reports sent again."""
    ttl = 2
    config = Config(redis_url=own_redis.url, log_dir=str(tmp_path / "logs"), presence_ttl=ttl,
                    watch_interval=0.05, redis_timeout=redis_timeout)  # fmt: skip
    handler = ("--script-type", "osis", "--handler", "tests.fault_handlers:sleepy")
    for n in range(2):
        processes.append(spawn_actor(config, *handler, "--instance", f"a{n}", "--concurrency", "4"))
    sup = await connect(config)
    tried: list[str] = []
    stop = asyncio.Event()

    async def load(worker: int) -> None:
        n = 0
        while not stop.is_set():
            job_id = f"w{worker}-{n}"
            n += 1
            tried.append(job_id)
            try:
                await sup.run(job(job_id, script_type="osis", job_id=job_id), wait=60)
            except BackendUnavailable:
                await asyncio.sleep(0.05)

    try:

        async def fleet_up() -> bool:
            return len(await sup.actors("osis")) == 2

        await eventually(fleet_up, within=30)
        workers = [asyncio.create_task(load(w)) for w in range(8)]
        await asyncio.sleep(1)  # a second of load before the outage: time is the case
        before = await command_connections(own_redis.url)
        await outage(own_redis, 3 * ttl)  # type: ignore[operator]
        await asyncio.sleep(2 * ttl)  # long enough for a reaper to act, if it would
        stop.set()
        await asyncio.gather(*workers)
        check = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
        try:
            accepted = [j for j in tried if await check.exists(keys.job(j))]
            events = [f for _, f in await check.xrange(keys.EVENTS)]
        finally:
            await check.aclose()
        results = await asyncio.gather(*(sup.output(j, wait=60) for j in accepted))
        after = await command_connections(own_redis.url)
    finally:
        await sup.close()
    died = [e for e in events if "died" in e.get("error", "")]
    print(f"\n{outage.__name__}: {len(tried)} tried, {len(accepted)} accepted")  # type: ignore[attr-defined]
    assert len(accepted) > 50  # load really ran
    assert len(before) == 3  # the supervisor's and each actor's
    if outage is pause:  # waited out on the same connections, unless past the timeout
        assert before.isdisjoint(after) == (redis_timeout < 3 * ttl), (before, after)
    assert died == []
    assert [r["job_id"] for r in results if r["status"] != "finished"] == []
    assert all(r["output"] == r["job_id"] for r in results)


# -- outside actors --------------------------------------------------------------------

#: The naming proposal's presence key: hero:meta:actor:inst:{type}:{group}:{inst}
OUTSIDE_KEY = "hero:meta:actor:inst:rustosis:edge:ext-1"


@pytest.fixture
def outside_user(own_redis: EmbeddedRedis) -> str:
    """A Redis user that may only SET/GET the proposal's presence keys: an actor
    on it provably never writes our index."""
    admin = redis.Redis.from_url(own_redis.url)
    try:
        admin.execute_command(
            "ACL", "SETUSER", "outside", "reset", "on", ">outside-pw",
            "~hero:meta:actor:inst:*", "+set", "+get", "+ping",
        )  # fmt: skip
    finally:
        admin.close()
    return own_redis.url.replace("redis://", "redis://outside:outside-pw@")


@pytest.fixture
def server(own_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[Server]:
    """A gateway of its own (the shared one would lead maintenance on the
    session's Redis for the tests after this module)."""
    with support.running_server(own_redis.url, tmp_path / "serve.log") as gateway:
        yield gateway


@pytest.mark.timeout(60)
async def test_a_presence_only_outside_actor_is_listed_and_counted(
    server: Server, outside_user: str
) -> None:
    """Written from the proposal alone: a plain client SETs its presence key with
    EX 15 and refreshes it; nothing else."""
    actor = redis.Redis.from_url(outside_user, decode_responses=True)
    info = {"pid": 4242, "hostname": "edge-box", "started_at": "2026-01-01T00:00:00Z",
            "version": "0.9.0", "capabilities": ["rhai"], "extra": {"not": "ours"}}  # fmt: skip
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            actor.zadd(keys.ACTORS, {OUTSIDE_KEY: 1})  # it cannot write our index
        actor.set(OUTSIDE_KEY, json.dumps(info), ex=15)

        async def listed() -> list[dict[str, object]]:
            actor.set(OUTSIDE_KEY, json.dumps(info), ex=15)  # its refresh
            async with Rpc.connect(server.ws) as rpc:
                found = await rpc.call("actor.list", {"script_type": "rustosis"})
            return found["actors"]  # type: ignore[no-any-return]

        async def seen() -> bool:
            return bool(await listed())

        await eventually(seen, within=15)  # one presence TTL
        (got,) = await listed()
        assert (got["script_type"], got["group"], got["instance"]) == ("rustosis", "edge", "ext-1")
        assert (got["pid"], got["hostname"], got["capabilities"]) == (4242, "edge-box", ["rhai"])
        status, body = http_get(f"{server.http}/metrics")
        assert status == 200
        assert 'hero_actors{script_type="rustosis"} 1.0' in body.decode()
        assert '"redis_user": "default"' in server.log()  # the gateway says who it is
    finally:
        actor.close()
