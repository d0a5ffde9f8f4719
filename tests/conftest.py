"""Shared fixtures: one real redis-server per test session on a free loopback port.

Tests never touch the machine's shared Redis. Each test starts from an empty
database (FLUSHALL), so tests stay independent while sharing one server.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from gateway.actor import Actor, python_actor
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.supervisor import Supervisor

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), appendonly=False).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
async def rds(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client for tests to look at what the code under test wrote."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable


# The tests' own state folder: a `make run` going on beside the suite records
# its Redis in the user's, and no test may find (or write) it there.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="hero-test-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], True)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture
def config(redis_url: str, tmp_path: Path) -> Config:
    return Config(redis_url=redis_url, log_dir=str(tmp_path / "logs"), watch_interval=0.05)


@pytest.fixture
async def sup(config: Config) -> AsyncIterator[Supervisor]:
    supervisor = await Supervisor.connect(config)
    yield supervisor
    await supervisor.close()


@pytest.fixture
async def actors(config: Config) -> AsyncIterator[Callable[..., Actor]]:
    """Start in-process actors (real Redis, real subprocesses); all stopped at teardown."""
    started: list[tuple[Actor, asyncio.Task[None]]] = []

    def start(actor: Actor | None = None, **kwargs: Any) -> Actor:
        actor = actor or python_actor(config, **kwargs)
        started.append((actor, asyncio.create_task(actor.serve())))
        return actor

    yield start
    for actor, _ in started:
        actor.stop()
    await asyncio.wait_for(asyncio.gather(*(task for _, task in started)), 30)
