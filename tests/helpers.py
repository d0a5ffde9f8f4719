"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from gateway.config import Config
from gateway.errors import JobNotFound
from gateway.supervisor import Supervisor, keys
from tests.conftest import ROOT, hold_the_lead


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A /metrics text as {(name, sorted labels): value}."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def transitions(text: bytes) -> dict[tuple[str, str], float]:
    """``hero_job_transitions_total`` of a /metrics text, by (status, script type)."""
    return {
        (dict(labels)["status"], dict(labels)["script_type"]): n
        for (name, labels), n in samples(text).items()
        if name == "hero_job_transitions_total"
    }


def job(script: str = "print('ok')", **fields: Any) -> dict[str, Any]:
    """A JobSpec for tests."""
    return {"script": script, "script_type": fields.pop("script_type", "python"), **fields}


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    """Wait until ``check`` passes (for effects another process produces)."""
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def until(check: Callable[[], object], within: float = 10.0, what: str = "condition") -> None:
    """``eventually`` for tests without an event loop: poll ``check`` until it is
    true, failing after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not met in {within} s")
        time.sleep(0.05)


async def events_of(rds: aioredis.Redis, job_id: str) -> list[dict[str, str]]:
    """The job's entries of the events stream, oldest first."""
    return [f for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == job_id]


async def blocked_in(rds: aioredis.Redis, command: str, name: str | None = None) -> bool:
    """For ``eventually``: a client of the server (the one named ``name``, when
    given) is blocked in ``command`` (CLIENT LIST: its last command, and it waits)."""
    clients: list[dict[str, Any]] = await rds.client_list()
    return any(
        c["cmd"] == command and "b" in c["flags"] and name in (None, c["name"]) for c in clients
    )


async def started(sup: Supervisor, job_id: str) -> bool:
    """For ``eventually``: the job exists and an actor has started it."""
    with contextlib.suppress(JobNotFound):
        status: str = (await sup.status(job_id))["status"]
        return status == "started"
    return False


def spawn_actor(
    config: Config,
    *extra: str,
    log: IO[bytes] | int | None = None,
    pass_fds: tuple[int, ...] = (),
    **env: str,
) -> subprocess.Popen[bytes]:
    """``hero-gateway actor`` in a subprocess, on the config's Redis (and user),
    presence TTL and Redis timeout;
    ``env``: more variables (``HERO_LOG_LEVEL`` is warning unless given);
    ``log``: where its stderr goes (``subprocess.PIPE`` to read it);
    ``pass_fds``: open files it starts with, as a shell may leave it."""
    variables = dict(
        os.environ,
        HERO_REDIS_URL=config.redis_url or "",
        HERO_LOG_DIR=config.log_dir or "",
        HERO_PRESENCE_TTL=str(config.presence_ttl),
        HERO_REDIS_TIMEOUT=str(config.redis_timeout),
        HERO_LOG_LEVEL="warning",
    )
    variables.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "actor", *extra],
        env=variables,
        cwd=ROOT,
        stderr=log,
        pass_fds=pass_fds,
    )


def host_pids(marker: str) -> list[int]:
    """Pids of the processes whose command line contains ``marker``, as the
    host sees them: how a test finds a job's processes from outside its
    sandbox (a pid the job prints is one of its own PID namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile
                continue
    return found


async def marked_running(marker: str) -> bool:
    """For ``eventually``: a process with ``marker`` in its command line exists."""
    return bool(host_pids(marker))


async def marked_gone(marker: str) -> bool:
    """For ``eventually``: no process with ``marker`` in its command line is left."""
    return not host_pids(marker)


def sleeper(marker: str, seconds: int = 60) -> str:
    """Python that starts a child with ``marker`` in its command line, then sleeps."""
    return (
        "import subprocess, sys, time\n"
        f"child = 'import time; time.sleep({seconds})'\n"
        f"subprocess.Popen([sys.executable, '-c', child, {marker!r}])\n"
        f"time.sleep({seconds})\n"
    )


async def until_offering(rds: aioredis.Redis, script_type: str = "osis") -> None:
    """Until an idle actor of ``script_type`` offers slots, so the next start
    is handed to it rather than queued."""

    async def offering() -> bool:
        return bool(await rds.hlen(keys.idle(script_type)))

    await eventually(offering)


async def by_hand(sup: Supervisor, rds: aioredis.Redis) -> None:
    """Maintenance only when the test ticks: ``sup``'s loop stopped, and the
    lead held for it, so no other gateway on this Redis (the session's shared
    server) ticks meanwhile; a tick of that one already under way ends first."""
    await sup.maintenance.stop()
    await hold_the_lead(sup, rds)
    await asyncio.sleep(0.2)
