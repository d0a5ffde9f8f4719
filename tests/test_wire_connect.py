"""How a Wire connects: redis-py builds the connection from the URL (TLS,
AUTH, SELECT, CLIENT SETNAME), so a URL means what it means to any redis-py
client; and the supervisor and the actor hold Wires only, no redis-py pool.
Against real redis-servers."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.actor import Actor
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis, free_port
from gateway.supervisor import Supervisor
from gateway.supervisor.wire import Wire
from tests.helpers import job


async def test_user_and_password_in_the_url_and_db_in_the_query(
    redis_server: EmbeddedRedis, rds: aioredis.Redis
) -> None:
    await rds.execute_command("ACL", "SETUSER", "wc-user", "on", ">pw-1", "~*", "&*", "+@all")
    wire = Wire(f"redis://wc-user:pw-1@127.0.0.1:{redis_server.port}?db=4", "test-wc-query")
    other = aioredis.Redis(port=redis_server.port, db=4, decode_responses=True)
    try:
        await wire.execute_command("SET", "wc-db", "four")
        assert await other.get("wc-db") == "four"
        assert await wire.execute_command("ACL", "WHOAMI") == "wc-user"
    finally:
        await rds.execute_command("ACL", "DELUSER", "wc-user")
        await wire.aclose()
        await other.aclose()


async def test_a_refused_password_is_a_connection_error_without_the_password(
    redis_server: EmbeddedRedis,
) -> None:
    wire = Wire(f"redis://:not-the-password@127.0.0.1:{redis_server.port}/0", "test-wc-refused")
    try:
        with pytest.raises(RedisConnectionError, match="refused") as caught:
            await wire.execute_command("PING")
        assert "not-the-password" not in str(caught.value)
    finally:
        await wire.aclose()


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A redis-server with TLS only, on a self-signed certificate for 127.0.0.1."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert),
         "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield port, cert
    finally:
        server.terminate()
        server.wait(10)


async def test_rediss_verifies_the_server_certificate(tls_redis: tuple[int, Path]) -> None:
    port, cert = tls_redis
    trusted = Wire(f"rediss://127.0.0.1:{port}/2?ssl_ca_certs={cert}", "test-wc-tls")
    untrusted = Wire(f"rediss://127.0.0.1:{port}/2", "test-wc-tls-untrusted")
    try:
        for _ in range(100):  # the server is starting
            try:
                assert await trusted.execute_command("PING") == "PONG"
                break
            except RedisConnectionError:
                await asyncio.sleep(0.05)
        assert "db=2" in await trusted.execute_command("CLIENT", "INFO")
        with pytest.raises(RedisConnectionError):  # a self-signed certificate nobody trusts
            await untrusted.execute_command("PING")
    finally:
        await trusted.aclose()
        await untrusted.aclose()


#: This module's supervisor and actors use a database of their own, so that the
#: connections they hold are told apart from the session's other clients (the
#: shared gateway's, for one) in CLIENT LIST.
OWN_DB = "9"


@pytest.fixture
def config(redis_server: EmbeddedRedis, tmp_path: Path) -> Config:
    url = f"{redis_server.url.rsplit('/', 1)[0]}/{OWN_DB}"
    flush = redis.Redis.from_url(url)
    flush.flushdb()
    flush.close()
    return Config(redis_url=url, log_dir=str(tmp_path / "logs"), watch_interval=0.05)


async def _names(rds: aioredis.Redis) -> list[str]:
    clients: list[dict[str, Any]] = await rds.client_list()
    return sorted(c["name"] for c in clients if c["db"] == OWN_DB)


@pytest.mark.timeout(60)
async def test_the_supervisor_and_an_actor_hold_wires_only(
    sup: Supervisor, actors: Callable[..., Actor], rds: aioredis.Redis
) -> None:
    """Every connection is named: the supervisor's one wire and its events
    reader; the actor's one wire, its wake-up subscriber and its control
    reader; the maintenance and everything else share those. A redis-py
    pool would show up as more connections, or as unnamed ones."""
    actors()
    ran = await asyncio.gather(*(sup.run(job(f"print({n})"), wait=20) for n in range(20)))
    assert {r["status"] for r in ran} == {"finished"}
    await asyncio.gather(*(sup.get(r["job_id"]) for r in ran), sup.list_jobs())
    await sup.queue_stats()
    await sup.actors()
    names = await _names(rds)
    assert names == sorted(
        f"hero-gateway/{n}"
        for n in ("supervisor-jobs", "events", "actor-jobs", "actor-waker", "actor-control")
    )
