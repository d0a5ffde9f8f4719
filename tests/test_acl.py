"""Redis ACL users, applied by ``hero-gateway acl --apply`` to a real
redis-server: the actor's user cannot reach API keys, load Functions or
list keys, while a real actor process on that user serves jobs through
every path of ``hero_cycle`` (finish, dependents, retries, dead letters);
an outside producer's user pushes jobs the Hero way and reads their
results, and cannot write any other key or type."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis, free_port
from gateway.model import Outcome
from gateway.model import library as functions
from gateway.supervisor import Supervisor, acl, keys, library, presence
from gateway.supervisor.wire import Wire
from gateway.supervisor.worker import ActorLink
from tests.conftest import ROOT
from tests.helpers import eventually, job, spawn_actor

PASSWORDS = {
    "HERO_ACL_ACTOR_PASSWORD": "actor-secret-1",
    "HERO_ACL_GATEWAY_PASSWORD": "gateway-secret-2",
    "HERO_ACL_ADMIN_PASSWORD": "admin-secret-3",
    "HERO_ACL_PRODUCER_PASSWORD": "producer-secret-4",
}


def url_as(server: EmbeddedRedis, user: str, password: str) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{server.port}/0"


def apply_as(url: str) -> subprocess.CompletedProcess[str]:
    """``hero-gateway acl --apply`` on the Redis of ``url``, with PASSWORDS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERO_")}
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "acl", "--apply", "--redis-url", url],
        env={**env, **PASSWORDS}, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A redis-server of its own, with the users applied by the CLI."""
    server = EmbeddedRedis(tmp_path / "redis", port=free_port(), appendonly=False).start()
    try:
        done = apply_as(server.url)
        assert done.returncode == 0, done.stderr
        for secret in PASSWORDS.values():  # only their hashes are shown
            assert secret not in done.stdout + done.stderr
        for user in ("hero-actor", "hero-gateway", "hero-admin", "hero-producer"):
            assert f"ACL SETUSER {user} " in done.stdout, user
        yield server
    finally:
        server.stop()


def test_only_a_user_allowed_to_run_acl_can_apply(locked: EmbeddedRedis) -> None:
    refused = apply_as(url_as(locked, "hero-gateway", PASSWORDS["HERO_ACL_GATEWAY_PASSWORD"]))
    assert refused.returncode == 1
    assert "Redis refused" in refused.stderr and "Traceback" not in refused.stderr
    again = apply_as(url_as(locked, "hero-admin", PASSWORDS["HERO_ACL_ADMIN_PASSWORD"]))
    assert again.returncode == 0, again.stderr


def test_no_actor_key_pattern_reaches_the_api_keys() -> None:
    auth = [keys.api_key("0" * 64), keys.API_KEYS]
    for pattern in acl.ACTOR_KEYS:
        assert not [k for k in auth if fnmatch.fnmatchcase(k, pattern)], pattern


def test_no_producer_key_pattern_reaches_a_key_of_ours() -> None:
    """The protocol's keys only: none of the private keys a producer could
    make another type (and so stop every actor's cycle), nor the API keys."""
    ours = [keys.api_key("0" * 64), keys.API_KEYS, keys.ORPHANS, keys.DELAYED, keys.INDEX_ALL,
            keys.index_status("created"), keys.EXPIRING, keys.QUEUES, keys.ACTORS, keys.LEADER,
            keys.TRANSITIONS, keys.held("osis", "g", "i"), keys.idle("osis"), keys.logs("j"),
            keys.work_stream("osis"), keys.ENDED, keys.presence("osis", "g", "i")]  # fmt: skip
    patterns = [p for selector, _ in acl.PRODUCER_SELECTORS for p in selector]
    for pattern in [*patterns, *acl.PRODUCER_READS[0]]:
        assert not [k for k in ours if fnmatch.fnmatchcase(k, pattern)], pattern


@pytest.mark.timeout(120)
async def test_an_outside_producer_on_its_user_pushes_jobs_and_nothing_else(
    locked: EmbeddedRedis, tmp_path: Path
) -> None:
    """A Hero producer we did not write, on the producer user: HSET a job,
    LPUSH its id, read the reply and the events, as the protocol has it; a
    real actor on the actor user serves it. Every write that could break
    our keys is refused."""
    actor_url = url_as(locked, "hero-actor", PASSWORDS["HERO_ACL_ACTOR_PASSWORD"])
    producer = redis.Redis.from_url(
        url_as(locked, "hero-producer", PASSWORDS["HERO_ACL_PRODUCER_PASSWORD"]),
        decode_responses=True,
    )
    proc = spawn_actor(
        Config(redis_url=actor_url, log_dir=str(tmp_path / "logs"), presence_ttl=2),
        "--script-type", "osis", "--handler", "tests.fault_handlers:deadly",
    )  # fmt: skip
    try:
        with producer.pipeline() as pipe:  # MULTI/EXEC, redis-py's default
            pipe.hset(keys.job("outside-1"), mapping={"script": "hello", "script_type": "osis"})
            pipe.lpush(keys.work_queue("osis"), "outside-1")
            pipe.execute()
        reply = producer.blpop([keys.reply("outside-1")], timeout=30)
        assert reply is not None
        assert json.loads(reply[1])["status"] == "finished"
        assert producer.hget(keys.job("outside-1"), "output") == "hello"
        assert "finished" in [f["event"] for _, f in producer.xrange(keys.EVENTS)]
        refused = [
            ("LPUSH", keys.job("j2"), "junk"),  # a job key made a list
            ("HSET", keys.work_queue("osis"), "a", "b"),  # a queue made a hash
            ("SET", keys.ORPHANS, "x"),
            ("LPUSH", keys.DELAYED, "x"),
            ("ZADD", keys.INDEX_ALL, "1", "x"),
            ("HSET", keys.idle("osis"), "a", "b"),
            ("DEL", keys.job("outside-1")),
            ("EXPIRE", keys.job("outside-1"), "0"),  # a delete too
            ("XADD", keys.EVENTS, "*", "job_id", "x"),
            ("GET", keys.api_key("0" * 64)),
            ("FCALL", "hero_delete", "0", *functions.head(Config()), "outside-1"),
            ("KEYS", "*"),
        ]
        for command in refused:
            with pytest.raises(redis.exceptions.NoPermissionError):
                producer.execute_command(*command)
    finally:
        producer.close()
        proc.terminate()
        proc.wait(30)


def test_the_actor_user_cannot_touch_api_keys_functions_or_the_keyspace(
    locked: EmbeddedRedis,
) -> None:
    actor = redis.Redis.from_url(url_as(locked, "hero-actor", PASSWORDS["HERO_ACL_ACTOR_PASSWORD"]))
    refused = [
        ("GET", keys.api_key("0" * 64)),
        ("SET", keys.api_key("0" * 64), '{"scope": "admin"}'),
        ("SMEMBERS", keys.API_KEYS),
        ("FUNCTION", "LOAD", "REPLACE", library.source()),
        ("FUNCTION", "DELETE", library.LIBRARY_NAME),
        ("CONFIG", "GET", "requirepass"),
        ("KEYS", "*"),
        ("ACL", "LIST"),
        ("FCALL", "hero_delete", "0", *functions.head(Config()), "any-job"),
        ("EVAL", "return redis.call('GET', KEYS[1])", "1", keys.api_key("0" * 64)),
        # a Function it may call still runs with its key permissions
        ("FCALL", "hero_cycle", "1", keys.api_key("0" * 64), *functions.head(Config())),
    ]
    try:
        assert actor.ping()
        for command in refused:
            with pytest.raises(redis.exceptions.NoPermissionError):
                actor.execute_command(*command)
    finally:
        actor.close()
    gateway = redis.Redis.from_url(
        url_as(locked, "hero-gateway", PASSWORDS["HERO_ACL_GATEWAY_PASSWORD"])
    )
    try:
        for command in [("KEYS", "*"), ("CONFIG", "GET", "requirepass"), ("FLUSHALL",)]:
            with pytest.raises(redis.exceptions.NoPermissionError):
                gateway.execute_command(*command)
    finally:
        gateway.close()


async def test_an_actor_user_waits_for_a_gateway_to_load_lost_functions(
    locked: EmbeddedRedis,
) -> None:
    """Redis came back without the Functions: the actor's user may not load them,
    so its call fails like an unreachable Redis (retried), not as a crash."""
    admin = Wire(url_as(locked, "hero-admin", PASSWORDS["HERO_ACL_ADMIN_PASSWORD"]), "t")
    actor = Wire(url_as(locked, "hero-actor", PASSWORDS["HERO_ACL_ACTOR_PASSWORD"]), "t")
    try:
        await admin.execute_command("FUNCTION", "DELETE", library.LIBRARY_NAME)
        with pytest.raises(redis.exceptions.ConnectionError):
            await library.call(actor, Config(), functions.stream_touch(keys.work_stream("t"), "c"))
        assert await library.load(admin)
    finally:
        await admin.aclose()
        await actor.aclose()


async def test_on_the_actor_user_a_deleted_jobs_report_leaves_the_next_job_running(
    locked: EmbeddedRedis, tmp_path: Path
) -> None:
    """The report of a run whose job was deleted and whose id another job took
    on the same actor is dropped (hero.lua ``finish``, which counts the held
    entries with ``LPOS``): on the actor's user too, where a command the user
    may not run ends that call's job in error."""
    gateway_url = url_as(locked, "hero-gateway", PASSWORDS["HERO_ACL_GATEWAY_PASSWORD"])
    actor_url = url_as(locked, "hero-actor", PASSWORDS["HERO_ACL_ACTOR_PASSWORD"])
    sup = await Supervisor.connect(Config(redis_url=gateway_url, log_dir=str(tmp_path)))
    link = ActorLink(Config(redis_url=actor_url), "osis", "g", "i")
    await link.open()
    try:
        await sup.create(job(script_type="osis", job_id="x", caller_id="alice"))
        await sup.start("x")
        (first,) = await link.cycle([], 2)
        await sup.delete("x")
        await sup.create(job(script_type="osis", job_id="x", caller_id="bob"))
        await sup.start("x")
        (second,) = await link.cycle([], 2)
        stopped = Outcome("x", "stopped", error="stopped", attempt=1, run=first.run)
        await link.cycle([stopped], 0)
        assert (await sup.get("x"))["status"] == "started"
        await link.cycle([Outcome("x", "finished", "bob", attempt=1, run=second.run)], 0)
        assert (await sup.output("x"))["output"] == "bob"
    finally:
        await link.close()
        await sup.close()


async def test_an_actor_user_without_a_command_the_claim_needs_is_refused_aloud(
    locked: EmbeddedRedis, tmp_path: Path
) -> None:
    """An actor user set by an older ``acl --apply`` (without RPOP, which a
    claim pops with since 2026-12-07): the cycle fails with Redis's refusal,
    where it used to pass the queue over as if it were of another type and
    claim nothing, every cycle, silently. The job stays queued."""
    admin = redis.Redis.from_url(url_as(locked, "hero-admin", PASSWORDS["HERO_ACL_ADMIN_PASSWORD"]))
    gateway_url = url_as(locked, "hero-gateway", PASSWORDS["HERO_ACL_GATEWAY_PASSWORD"])
    sup = await Supervisor.connect(Config(redis_url=gateway_url, log_dir=str(tmp_path)))
    link = ActorLink(Config(redis_url=url_as(locked, "hero-actor",
                                             PASSWORDS["HERO_ACL_ACTOR_PASSWORD"])),
                     "osis", "g", "older")  # fmt: skip
    await link.open()
    try:
        admin.execute_command("ACL", "SETUSER", "hero-actor", "-rpop")
        await sup.create(job(script_type="osis", job_id="q1"))
        await sup.start("q1")
        with pytest.raises(redis.exceptions.ResponseError, match="can't run this command"):
            await link.cycle([], 2)
        assert (await sup.get("q1"))["status"] == "dispatched"
        assert admin.lrange(keys.work_queue("osis"), 0, -1) == [b"q1"]
    finally:
        await link.close()
        await sup.close()
        admin.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stream_types", [(), ("osis",)], ids=["lists", "stream"])
async def test_a_real_actor_on_the_actor_user_serves_jobs(
    locked: EmbeddedRedis, tmp_path: Path, stream_types: tuple[str, ...]
) -> None:
    gateway_url = url_as(locked, "hero-gateway", PASSWORDS["HERO_ACL_GATEWAY_PASSWORD"])
    actor_url = url_as(locked, "hero-actor", PASSWORDS["HERO_ACL_ACTOR_PASSWORD"])
    config = Config(redis_url=gateway_url, log_dir=str(tmp_path / "logs"), presence_ttl=2,
                    retry_base=0.05, retry_max=0.2, watch_interval=0.05,
                    stream_types=stream_types, maintenance_interval=0.2)  # fmt: skip
    log_path = tmp_path / "actor.log"
    sup = await Supervisor.connect(config)
    with log_path.open("wb") as log:
        proc = spawn_actor(
            Config(redis_url=actor_url, log_dir=config.log_dir, presence_ttl=2),
            "--script-type", "osis", "--handler", "tests.fault_handlers:deadly",
            "--concurrency", "4", log=log, HERO_LOG_LEVEL="info",
            HERO_STREAM_TYPES=",".join(stream_types),
        )  # fmt: skip
    try:

        async def ready() -> bool:
            return len(await sup.actors("osis")) == 1

        await eventually(ready, within=30)
        # what the actor container's health check reads, as the actor user
        own = Wire(actor_url, "healthcheck")
        try:
            assert [a["script_type"] for a in await presence.live(own)] == ["osis"]
        finally:
            await own.aclose()
        plain = [await sup.run(job(f"out{n}", script_type="osis"), wait=20) for n in range(10)]
        assert [r["output"] for r in plain] == [f"out{n}" for n in range(10)]
        # live log lines and progress (hero_log)
        await sup.run(job("chatty", script_type="osis", job_id="chatty"), wait=20)
        assert "a line of log" in (await sup.logs("chatty"))["logs"]
        # a finish that releases a dependent (dispatched inside hero_cycle)
        await sup.create(job("first", script_type="osis", job_id="first"))
        await sup.create(job("second", script_type="osis", job_id="second",
                             prerequisites=["first"]))  # fmt: skip
        await sup.start("second")
        await sup.start("first")
        after = await sup.output("second", wait=20)
        assert (after["status"], after["output"]) == ("finished", "second")
        # a failure retried, then dead-lettered (promote and DLQ inside hero_cycle)
        failed = await sup.run(job("fail", script_type="osis", job_id="bad", retries=1), wait=20)
        assert failed["status"] == "dlq"
        assert [e["job_id"] for e in await sup.dlq_list("osis")] == ["bad"]
        # nothing the actor did was refused, but its try at loading the Functions
        admin = redis.Redis.from_url(
            url_as(locked, "hero-admin", PASSWORDS["HERO_ACL_ADMIN_PASSWORD"]),
            decode_responses=True,
        )
        try:
            denied = {(e["username"], e["reason"], e["object"]) for e in admin.acl_log()}
        finally:
            admin.close()
        assert denied == {("hero-actor", "command", "function|load")}, denied
    finally:
        await sup.close()
        proc.terminate()
        proc.wait(30)
    text = log_path.read_text()
    assert '"redis_user": "hero-actor"' in text
    assert PASSWORDS["HERO_ACL_ACTOR_PASSWORD"] not in text
    assert proc.returncode == 0, text[-2000:]
