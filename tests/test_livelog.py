"""The parts of live logs on their own: ``LiveLog`` following a real file
(its reports collected in a list), and ``hero_log`` on a real redis-server
through a real ``ActorLink``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.actor.joblog import JobLog
from gateway.actor.livelog import LiveLog
from gateway.config import Config
from gateway.metrics import Metrics
from gateway.model import Event
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.worker import ActorLink
from tests.helpers import eventually, job, transitions
from tests.server_support import assert_event_shape

Reported = list[tuple[str, tuple[float, str] | None, str]]


def follow(path: Path, **caps: int) -> tuple[LiveLog, JobLog, Reported]:
    """A job's log and its live log, wired as the actor wires them."""
    reported: Reported = []

    async def report(lines: str, progress: tuple[float, str] | None, tail: str) -> bool:
        reported.append((lines, progress, tail))
        return True

    joblog = JobLog(str(path), limit=1 << 20)
    return LiveLog(joblog, report, interval=0.05, **caps), joblog, reported


def write(path: Path, data: bytes) -> None:
    """What an earlier attempt of the job left in its log."""
    with path.open("ab") as f:
        f.write(data)


async def test_complete_lines_go_live_and_the_last_report_carries_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.log"
    write(path, b"an earlier attempt\n")
    live, joblog, reported = follow(path)
    live.start()
    joblog.write(b"one\ntw")
    await eventually(lambda: asyncio.sleep(0, bool(reported)), within=5)
    assert reported == [("one", None, "")]  # "tw" waits for its newline
    joblog.write(b"o\nthree")
    live.progress(0.5, "half")
    await eventually(lambda: asyncio.sleep(0, len(reported) == 2), within=5)
    assert reported[1] == ("two", (0.5, "half"), "")
    await live.close(tail="the tail")
    assert reported[2] == ("three", None, "the tail")


async def test_a_job_that_ends_before_the_first_look_sends_only_its_tail(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.log"
    live, joblog, reported = follow(path)
    live.start()
    joblog.write(b"quick\n")
    live.progress(1.0, "done")
    await live.close(tail="quick\n")
    assert reported == [("", None, "quick\n")]


async def test_nothing_logged_nothing_reported(tmp_path: Path) -> None:
    path = tmp_path / "silent.log"
    write(path, b"an earlier attempt\n")  # not this attempt's lines
    live, _, reported = follow(path)
    live.start()
    await asyncio.sleep(0.2)  # four ticks: time passing is the case
    await live.close(tail="")
    assert reported == []


async def test_a_first_line_after_some_ticks_goes_live_at_the_next(tmp_path: Path) -> None:
    path = tmp_path / "j.log"
    write(path, b"an earlier attempt\n")
    live, joblog, reported = follow(path)
    live.start()
    await asyncio.sleep(0.12)  # two silent ticks
    joblog.write(b"late\n")
    await eventually(lambda: asyncio.sleep(0, bool(reported)), within=5)
    assert reported == [("late", None, "")]
    joblog.write(b"last")
    await live.close(tail=joblog.text())
    assert reported[1:] == [("last", None, "late\nlast")]


async def test_batches_and_the_job_are_capped(tmp_path: Path) -> None:
    path = tmp_path / "j.log"
    live, joblog, reported = follow(path, batch_max=100, job_max=200)
    live.start()
    live.progress(0.1, "first look")  # barrier: reported by the first look
    await eventually(lambda: asyncio.sleep(0, bool(reported)), within=5)
    assert reported.pop() == ("", (0.1, "first look"), "")
    joblog.write(b"".join(b"line %03d\n" % i for i in range(50)))  # 450 bytes at once
    await eventually(lambda: asyncio.sleep(0, bool(reported)), within=5)
    first = reported[0][0]
    assert first.startswith("[350 bytes skipped]\n") and first.endswith("line 049")
    assert len(first.encode()) <= 100 + len("[350 bytes skipped]\n")
    joblog.write(b"x" * 99 + b"\n" + b"y" * 99 + b"\n")
    await eventually(lambda: asyncio.sleep(0, len(reported) == 2), within=5)
    assert reported[1][0].endswith("[live log ends here: job.logs has the tail once the job ends]")
    joblog.write(b"more\n")
    live.progress(0.9, "later")  # barrier: the look that reports it has seen "more"
    await eventually(lambda: asyncio.sleep(0, len(reported) == 3), within=5)
    await live.close(tail="")
    assert reported[2:] == [("", (0.9, "later"), "")]  # the job's budget is spent


async def test_a_run_no_longer_the_jobs_reports_no_more(tmp_path: Path) -> None:
    """Once a report comes back unwritten (the job deleted, its id maybe
    another job's now, or a later attempt runs), no look, line or last
    tail of this run is sent again."""
    path = tmp_path / "j.log"
    reported: Reported = []

    async def report(lines: str, progress: tuple[float, str] | None, tail: str) -> bool:
        reported.append((lines, progress, tail))
        return False

    joblog = JobLog(str(path), limit=1 << 20)
    live = LiveLog(joblog, report, interval=0.05)
    live.start()
    joblog.write(b"one\n")
    await eventually(lambda: asyncio.sleep(0, bool(reported)), within=5)
    joblog.write(b"two\n")
    live.progress(0.5, "half")
    await asyncio.sleep(0.2)  # four ticks: time passing is the case
    await live.close(tail="one\ntwo\n")
    assert reported == [("one", None, "")]


def test_progress_must_be_a_fraction(tmp_path: Path) -> None:
    live, _, _ = follow(tmp_path / "j.log")
    for bad in (-0.1, 1.1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            live.progress(bad, "")


async def test_hero_log_trims_the_tail_and_is_quiet_once_the_job_ended(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    await sup.create(job(job_id="t1", caller_id="c1"))
    await sup.start("t1")
    link = ActorLink(config, "python", "g", "i")
    await link.open()
    try:
        assert [c.job_id for c in await link.cycle([], 1)] == ["t1"]
        await link.report_output("t1", "a" * 30 + "\n" + "b" * 30, (0.5, "half"), attempt=1, cap=40)
        assert await rds.get(keys.logs("t1")) == "b" * 30 + "\n"  # cut at a line
        await link.report_output("t1", "é" * 30, None, attempt=1, cap=42)
        kept = await rds.get(keys.logs("t1"))
        assert kept == "é" * 20 + "\n"  # no line end in it: cut at a character
        entries = [f for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == "t1"]
        assert [(f["event"], f["status"]) for f in entries[-3:]] == [
            ("log", "started"),
            ("progress", "started"),
            ("log", "started"),
        ]
        assert entries[-2]["progress"] == "0.5" and entries[-2]["message"] == "half"
        assert entries[-2]["actor"] == link.name and entries[-1]["lines"] == "é" * 30
        # what user-scope subscriptions filter on: only c1 sees c1's job's lines
        assert {f["caller_id"] for f in entries[-3:]} == {"c1"}

        await sup.stop("t1")
        before = await rds.xlen(keys.EVENTS)
        await link.report_output("t1", "late", (1.0, "done"), attempt=1, cap=100)
        assert await rds.xlen(keys.EVENTS) == before  # the terminal event stays the last
        await link.report_output("t1", "", None, attempt=1, cap=100, tail="the whole tail\n")
        assert await rds.get(keys.logs("t1")) == "the whole tail\n"
        assert await rds.ttl(keys.logs("t1")) > 0  # it expires with the job
    finally:
        await link.close()


def test_log_and_progress_entries_fit_the_contracts_event() -> None:
    common = {"job_id": "j", "status": "started", "script_type": "python", "ts": "1", "error": ""}
    log = Event.from_entry("1-0", {"event": "log", "lines": "a\nb", **common}).to_contract()
    assert (log["lines"], "progress" in log) == ("a\nb", False)
    progress = Event.from_entry(
        "1-1", {"event": "progress", "progress": "0.25", "message": "m", **common}
    ).to_contract()
    assert (progress["progress"], progress["message"], "lines" in progress) == (0.25, "m", False)
    junk = Event.from_entry("1-2", {"event": "progress", "progress": "nan", **common})
    junk_shown = junk.to_contract()
    assert (junk_shown["progress"], junk_shown["message"]) == (0.0, "")
    for event in (log, progress, junk_shown):
        assert_event_shape(event)


async def test_log_and_progress_events_are_no_transitions_in_the_metrics(
    sup: Supervisor, config: Config
) -> None:
    """A running job's log lines and progress add events, not transitions:
    the counts the Functions keep in Redis see created, dispatched, started."""
    metrics = Metrics(sup)
    await sup.create(job(job_id="t2"))
    await sup.start("t2")
    link = ActorLink(config, "python", "g", "i")
    await link.open()
    try:
        assert [c.job_id for c in await link.cycle([], 1)] == ["t2"]
        await link.report_output("t2", "a line\nanother", (0.5, "half"), attempt=1, cap=100)
        await link.report_output("t2", "more", (0.75, "most"), attempt=1, cap=100)
    finally:
        await link.close()
    assert transitions(await metrics.render()) == {
        ("created", "python"): 1, ("dispatched", "python"): 1, ("started", "python"): 1,
    }  # fmt: skip


async def test_hero_log_writes_only_for_the_run_the_job_hash_names(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """The job hash's ``actor`` and ``attempt`` are the writer's, or nothing
    is written (False): not its log tail, not its last tail, no event."""
    await sup.create(job(job_id="t3", caller_id="c1"))
    await sup.start("t3")
    link = ActorLink(config, "python", "g", "i")
    await link.open()
    try:
        assert [c.attempt for c in await link.cycle([], 1)] == [1]
        # a name anyone could have rewritten in the hash goes into the event capped
        await rds.hset(keys.job("t3"), "group", "g" * 100_000)
        assert await link.report_output("t3", "mine", None, attempt=1, cap=100)
        (_, logged), *_ = await rds.xrevrange(keys.EVENTS, count=1)
        assert logged["event"] == "log" and logged["group"] == "g" * 512
        before = await rds.xlen(keys.EVENTS)
        await rds.hset(keys.job("t3"), "attempt", "2")  # a later attempt runs (here again)
        assert not await link.report_output("t3", "stale", (0.5, "h"), attempt=1, cap=100)
        assert not await link.report_output("t3", "", None, attempt=1, cap=100, tail="all\n")
        await rds.hset(keys.job("t3"), mapping={"attempt": "1", "actor": "another"})
        assert not await link.report_output("t3", "stale", None, attempt=1, cap=100)
        # an actor that sends no attempt ("0") is held to the actor alone
        assert not await link.report_output("t3", "stale", None, attempt=0, cap=100)
        assert await rds.get(keys.logs("t3")) == "mine\n"
        assert await rds.xlen(keys.EVENTS) == before
        await rds.hset(keys.job("t3"), "actor", link.name)
        assert await link.report_output("t3", "again", None, attempt=0, cap=100)
        assert await rds.get(keys.logs("t3")) == "mine\nagain\n"
        await sup.delete("t3")
        await sup.create(job(job_id="t3", caller_id="c2"))  # the id taken by another job
        assert not await link.report_output("t3", "", None, attempt=1, cap=100, tail="all\n")
        assert not await rds.exists(keys.logs("t3"))
    finally:
        await link.close()
