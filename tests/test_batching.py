"""Submits issued together become one Function call, and still each get
their own answer: against a real redis-server. (That the commands of one
loop turn leave in one write is ``test_wire``'s.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.errors import BackendUnavailable, InvalidJob, InvalidState, JobNotFound
from gateway.model import library as functions
from gateway.supervisor import Supervisor, submission
from gateway.supervisor.batching import Merger
from tests.helpers import job


def count_calls(sup: Supervisor, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Spy on the supervisor's wire: the commands of each pipeline it sends."""
    sent: list[list[Any]] = []
    real = sup.wire.pipeline

    async def pipeline(commands: Any, *, errors_in_place: bool = False) -> list[Any]:
        sent.append(list(commands))
        return await real(commands, errors_in_place=errors_in_place)

    monkeypatch.setattr(sup.wire, "pipeline", pipeline)
    return sent


async def test_concurrent_creates_are_one_function_call(
    sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = count_calls(sup, monkeypatch)
    answers = await asyncio.gather(*(sup.create(job(job_id=f"co-{i}")) for i in range(20)))
    assert answers == [{"job_id": f"co-{i}", "status": "created"} for i in range(20)]
    (commands,) = sent  # one pipeline ...
    (command,) = commands  # ... of one hero_submit_many
    assert command[:2] == ("FCALL", "hero_submit_many")
    assert [a for a in command if str(a).startswith("co-")] == [f"co-{i}" for i in range(20)]


async def test_concurrent_starts_each_get_their_answer(sup: Supervisor) -> None:
    await sup.submit_many([job(job_id=f"cs-{i}") for i in range(20)], start=False)
    started = await asyncio.gather(*(sup.start(f"cs-{i}") for i in range(20)))
    assert [s["status"] for s in started] == ["dispatched"] * 20


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


async def test_a_redis_gone_away_fails_every_call_of_the_batch(tmp_path: Path) -> None:
    """Its own redis-server, stopped under a connected supervisor: each call of
    the batch gets BackendUnavailable (-32007), none hangs or escapes."""
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    sup = await Supervisor.connect(Config(redis_url=server.url), maintenance=False, watch=False)
    try:
        await sup.create(job(job_id="lc-before"))  # the wire is connected
        server.stop()
        outcomes = await asyncio.gather(
            *(sup.create(job(job_id=f"lc-{i}")) for i in range(3)),
            *(sup.start(f"lc-{i}") for i in range(3)),
            return_exceptions=True,
        )
        assert len(outcomes) == 6
        assert all(isinstance(o, BackendUnavailable) for o in outcomes), outcomes
    finally:
        server.stop()
        await sup.close()


async def test_a_batch_over_the_call_size_is_split_and_every_job_answered(
    sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = submission.SUBMIT_BATCH * 2 + 5
    # a live subscription keeps the events reader awake, as steady traffic
    # does (a run that wakes a sleeping reader first waits for that)
    subscription = await sup.subscribe(job_ids=["nobody"])
    sent = count_calls(sup, monkeypatch)
    answers = await asyncio.gather(
        *(sup.create(job(job_id=f"big-{i}")) for i in range(n)),
        *(sup.run(job(job_id=f"big-run-{i}"), wait=0.01) for i in range(3)),
        return_exceptions=True,
    )
    assert answers[:n] == [{"job_id": f"big-{i}", "status": "created"} for i in range(n)]
    (commands,) = sent  # one pipeline: the runs' call, then 3 calls of creates
    flag = 3 + len(functions.head(sup.config))  # FCALL name numkeys *head start-flag
    assert [(c[flag], (len(c) - flag - 1) // functions.SUBMIT_WIDTH) for c in commands] == [
        ("1", 3),
        ("0", submission.SUBMIT_BATCH),
        ("0", submission.SUBMIT_BATCH),
        ("0", 5),
    ]
    assert await sup.status("big-run-0") == {"job_id": "big-run-0", "status": "dispatched"}
    sup.unsubscribe(subscription.id)


async def test_a_turns_submits_take_one_loop_look_up_and_a_future_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a submit costs: the loop is looked up by a turn's first submit
    only (each look-up is a ``getpid`` system call), and each submit is the
    future to await, not a coroutine around it. Every item still gets its
    own answer, from one flush per turn."""
    flushed: list[list[int]] = []

    async def flush(items: list[int]) -> list[Any]:
        flushed.append(items)
        return [ValueError(i) if i == 3 else i * 10 for i in items]

    merger: Merger[int] = Merger(flush)
    looked_up = 0
    real = asyncio.get_running_loop

    def counted() -> asyncio.AbstractEventLoop:
        nonlocal looked_up
        looked_up += 1
        return real()

    monkeypatch.setattr(asyncio, "get_running_loop", counted)
    first = [merger.submit(i) for i in range(5)]
    assert all(isinstance(f, asyncio.Future) for f in first)
    assert looked_up == 1
    answers = await asyncio.gather(*first, return_exceptions=True)
    assert answers[:3] == [0, 10, 20] and answers[4] == 40
    assert isinstance(answers[3], ValueError)
    before = looked_up
    second = [merger.submit(i) for i in (7, 8)]  # the next turn: one more look-up
    assert looked_up == before + 1
    assert await asyncio.gather(*second) == [70, 80]
    assert flushed == [[0, 1, 2, 3, 4], [7, 8]]


async def test_a_caller_that_gave_up_leaves_the_others_their_answers() -> None:
    async def flush(items: list[int]) -> list[int]:
        return items

    merger: Merger[int] = Merger(flush)
    gone = asyncio.ensure_future(merger.submit(1))
    kept = merger.submit(2)
    gone.cancel()
    assert await kept == 2
    with pytest.raises(asyncio.CancelledError):
        await gone
