"""Shared fixtures: one real redis-server per test session on a free loopback port.

Tests never touch the machine's shared Redis. Each test starts from an empty
database (FLUSHALL), so tests stay independent while sharing one server.

No process a test started may outlive the session: job folders (and so the
command lines of job processes) live under the session's temporary folder,
and at the end the suite fails if any process still refers to that folder.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from gateway.actor import Actor, python_actor
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.auth import KeyStore
from gateway.supervisor.wire import Wire

ROOT = Path(__file__).resolve().parent.parent

#: The real-gateway harness and Node: their fixtures reach every test module from here.
pytest_plugins = ["tests.server_support", "tests.node_support"]


@pytest.fixture(scope="session", autouse=True)
def session_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """TMPDIR of the session (actors make job folders there, in-process or not)."""
    folder = tmp_path_factory.mktemp("tmp")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tempfile.tempdir = str(folder)
    yield folder
    tempfile.tempdir = None
    if before is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = before


def leftovers(marker: bytes) -> dict[int, str]:
    """Processes other than this one whose command line, environment or
    working folder names ``marker`` (the session's temporary folder)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            seen = cmdline + (entry / "environ").read_bytes()
            seen += os.readlink(entry / "cwd").encode()
        except OSError:  # gone, or a zombie
            continue
        if marker in seen:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a job, actor or server started by a test is still alive."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or getattr(factory, "_basetemp", None) is None:
        return
    marker = str(factory.getbasetemp()).encode() + b"/"
    deadline = time.monotonic() + 5  # a killed actor's jobs die a moment later
    while (alive := leftovers(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive:
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        lines = "\n".join(f"  {pid}: {cmd}" for pid, cmd in alive.items())
        sys.stderr.write(f"\nprocesses started by tests outlived the session:\n{lines}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
async def store(redis_url: str) -> AsyncIterator[KeyStore]:
    """The API key store, on a connection of its own."""
    client = Wire(redis_url, "test-keys")
    yield KeyStore(client, redis_url)
    await client.aclose()


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


def fast_settings(config: Config) -> Config:
    """Retries, timeouts, presence and maintenance in fractions of a second. The
    storms kill actors at random, so one job may see several die: a generous death
    budget (the poison rule has its own tests, in test_liveness.py)."""
    return replace(config, retry_base=0.05, retry_max=0.2, timeout_grace=0.2, presence_ttl=1,
                   max_actor_deaths=10, maintenance_interval=0.2)  # fmt: skip


@pytest.fixture
def fast(config: Config) -> Config:
    """The test config with retries, timeouts and presence in fractions of a second."""
    return fast_settings(config)


@pytest.fixture
async def fsup(fast: Config, rds: aioredis.Redis) -> AsyncIterator[Supervisor]:
    """A supervisor on ``fast`` (a module may override ``fast``: stream mode, say),
    leading maintenance (``hold_the_lead``)."""
    sup = await Supervisor.connect(fast)
    await hold_the_lead(sup, rds)
    yield sup
    await sup.close()


async def hold_the_lead(sup: Supervisor, rds: aioredis.Redis) -> None:
    """The maintenance lead given to ``sup``. The session's shared server
    (``tests.server_support``) runs maintenance on the same Redis with the
    default settings (a tick a second, a 30 s timeout grace, a 3 s lease): when
    its tick came first after the test's flush, it led, and a test of fast
    timeouts waited on it (seen once, under load: a 10 s wait for a 1 s
    timeout). ``hero_lead`` renews a lead whose value is the caller's, so
    ``sup`` keeps it from its next tick, at its own lease, and the other never
    takes it while ``sup`` ticks; a supervisor whose loop is stopped
    (``helpers.by_hand``) keeps it for this minute."""
    await rds.set(keys.LEADER, sup.maintenance.holder, px=60_000)


@pytest.fixture(name="python_actor")
async def one_python_actor(actors: Callable[..., Actor]) -> Actor:
    """One real python actor (subprocess per job), stopped at teardown."""
    return actors()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Subprocesses a test starts (actors, CLIs): killed and reaped at teardown."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every pipeline test (its JVM starts once)."""
    from gateway.pipeline.spark import SparkOptions, session, shutdown

    s = session(SparkOptions(master="local[2]", shuffle_partitions=4))
    yield s
    shutdown(s)  # the JVM too: the session-end check fails on what outlives it
