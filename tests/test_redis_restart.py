"""Redis restarts (AOF on) while a supervisor and an actor process run:
callers get BackendUnavailable at once while it is down, everyone reconnects,
and no accepted job is lost."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis, free_port
from gateway.errors import BackendUnavailable
from gateway.supervisor import Supervisor
from tests.conftest import ROOT
from tests.helpers import eventually, job


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "data", port=free_port(), appendonly=True).start()
    yield server
    server.stop()


@pytest.mark.timeout(120)
async def test_nothing_accepted_is_lost_across_a_redis_restart(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    config = Config(
        redis_url=private_redis.url, log_dir=str(tmp_path / "logs"), watch_interval=0.05
    )
    env = dict(os.environ, HERO_REDIS_URL=private_redis.url, HERO_LOG_LEVEL="warning")
    actor = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "actor", "--script-type", "osis",
         "--concurrency", "8", "--handler", "tests.fault_handlers:sleepy"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    sup = await Supervisor.connect(config)
    accepted: list[str] = []
    refused = 0
    try:

        async def submit(n: int) -> None:
            nonlocal refused
            try:
                created = await sup.create(job(f"j{n}", script_type="osis", job_id=f"j{n}"))
                await sup.start(created["job_id"])
                accepted.append(created["job_id"])
            except BackendUnavailable:
                refused += 1

        async def actor_up() -> bool:
            return len(await sup.actors()) == 1

        await eventually(actor_up, within=30)
        for n in range(100):
            await submit(n)
        private_redis.stop()  # graceful: AOF flushed
        down_at = time.monotonic()
        for n in range(100, 110):
            await submit(n)
        assert refused == 10
        assert time.monotonic() - down_at < 10  # refused promptly, not hung
        private_redis.start()
        for n in range(110, 200):
            await submit(n)
        results = await asyncio.gather(*(sup.output(j, wait=60) for j in accepted))
    finally:
        await sup.close()
        actor.terminate()
        actor.wait(15)
    assert len(accepted) == 190
    assert {r["status"] for r in results} == {"finished"}
    assert [r["output"] for r in results] == accepted
