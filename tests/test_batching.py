"""Calls issued together reach Redis together (one pipeline), and still each
get their own answer: against a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from gateway.errors import BackendUnavailable, InvalidJob, InvalidState, JobNotFound
from gateway.supervisor import Supervisor
from gateway.supervisor.batching import MAX_PIPELINE, Coalescer
from tests.helpers import job


def count_pipelines(client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Spy on the real client: one entry per pipeline it opens."""
    opened: list[int] = []
    real = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(client, "pipeline", pipeline)
    return opened


async def fcalls(rds: aioredis.Redis) -> int:
    stats: dict[str, Any] = await rds.info("commandstats")
    return int(stats.get("cmdstat_fcall", {}).get("calls", 0))


async def test_concurrent_creates_are_one_function_call(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    before = await fcalls(rds)
    answers = await asyncio.gather(*(sup.create(job(job_id=f"co-{i}")) for i in range(20)))
    assert answers == [{"job_id": f"co-{i}", "status": "created"} for i in range(20)]
    assert await fcalls(rds) == before + 1  # one hero_submit_many


async def test_concurrent_starts_go_out_in_one_pipeline(
    sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sup.submit_many([job(job_id=f"cs-{i}") for i in range(20)], start=False)
    opened = count_pipelines(sup.redis, monkeypatch)
    started = await asyncio.gather(*(sup.start(f"cs-{i}") for i in range(20)))
    assert [s["status"] for s in started] == ["dispatched"] * 20
    assert len(opened) == 1


async def test_runs_and_creates_issued_together_each_get_their_own_answer(
    sup: Supervisor, actors: Any
) -> None:
    actors()
    outcomes = await asyncio.gather(
        sup.run(job("print(1)"), wait=20),
        sup.create(job(job_id="mix-created")),
        sup.run(job("print(2)"), wait=20),
        sup.create(job(job_id="mix-bad", prerequisites=["mix-nowhere"])),
        return_exceptions=True,
    )
    assert outcomes[0]["output"] == "1\n"  # type: ignore[index]
    assert outcomes[1] == {"job_id": "mix-created", "status": "created"}
    assert outcomes[2]["output"] == "2\n"  # type: ignore[index]
    assert isinstance(outcomes[3], InvalidJob)


async def test_a_failing_call_fails_only_itself(sup: Supervisor) -> None:
    await sup.create(job(job_id="fo-started"))
    await sup.start("fo-started")
    outcomes = await asyncio.gather(
        sup.create(job(job_id="fo-a")),
        sup.create(job(job_id="fo-bad", prerequisites=["fo-nowhere"])),
        sup.start("fo-missing"),
        sup.start("fo-started"),
        sup.create(job(job_id="fo-b")),
        return_exceptions=True,
    )
    assert outcomes[0] == {"job_id": "fo-a", "status": "created"}
    assert isinstance(outcomes[1], InvalidJob)
    assert isinstance(outcomes[2], JobNotFound)
    assert isinstance(outcomes[3], InvalidState)
    assert outcomes[4] == {"job_id": "fo-b", "status": "created"}
    with pytest.raises(JobNotFound):
        await sup.status("fo-bad")


async def test_a_redis_that_lost_the_library_gets_it_back_for_a_whole_batch(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    await rds.function_flush()
    answers = await asyncio.gather(*(sup.create(job(job_id=f"fl-{i}")) for i in range(5)))
    assert [a["status"] for a in answers] == ["created"] * 5


async def test_a_lone_command_and_a_pipelined_one_answer_alike(rds: aioredis.Redis) -> None:
    coalescer = Coalescer(rds)
    await rds.rpush("co-list", "x")
    assert await coalescer.execute("SET", "co-key", "v") is True
    with pytest.raises(ResponseError):
        await coalescer.execute("HGET", "co-list", "f")  # wrong type: its own error
    replies = await asyncio.gather(
        coalescer.execute("GET", "co-key"),
        coalescer.execute("HGET", "co-list", "f"),
        coalescer.execute("LLEN", "co-list"),
        return_exceptions=True,
    )
    assert replies[0] == "v"
    assert isinstance(replies[1], ResponseError)
    assert replies[2] == 1


async def test_a_flood_is_sent_in_slices_and_every_call_is_answered(rds: aioredis.Redis) -> None:
    coalescer = Coalescer(rds)
    n = MAX_PIPELINE * 2 + 3
    replies = await asyncio.gather(*(coalescer.execute("INCR", "co-counter") for _ in range(n)))
    assert sorted(replies) == list(range(1, n + 1))


async def test_a_lost_connection_fails_every_call_of_the_pipeline(
    sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RedisConnectionError("gone")

    monkeypatch.setattr(sup.redis, "pipeline", broken)
    monkeypatch.setattr(sup.redis, "execute_command", broken)
    outcomes = await asyncio.gather(
        *(sup.create(job(job_id=f"lc-{i}")) for i in range(3)),
        *(sup.start(f"lc-{i}") for i in range(3)),
        return_exceptions=True,
    )
    assert len(outcomes) == 6
    assert all(isinstance(o, BackendUnavailable) for o in outcomes)


async def test_a_batch_over_the_call_size_is_split_and_every_job_answered(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    n = Supervisor.SUBMIT_BATCH * 2 + 5
    before = await fcalls(rds)
    answers = await asyncio.gather(
        *(sup.create(job(job_id=f"big-{i}")) for i in range(n)),
        *(sup.run(job(job_id=f"big-run-{i}"), wait=0.01) for i in range(3)),
        return_exceptions=True,
    )
    assert answers[:n] == [{"job_id": f"big-{i}", "status": "created"} for i in range(n)]
    assert await fcalls(rds) == before + 4  # 3 calls of creates, 1 of runs (started)
    assert await sup.status("big-run-0") == {"job_id": "big-run-0", "status": "dispatched"}
