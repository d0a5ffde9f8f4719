"""events: the events reader against a real redis-server, in both of its modes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext
from gateway.config import Config
from gateway.model import Event
from gateway.supervisor import Supervisor, keys
from gateway.supervisor import events as events_module
from gateway.supervisor.events import LINGER, EventReader
from gateway.supervisor.subscriptions import Subscription, Subscriptions
from gateway.supervisor.wire import Wire
from tests.helpers import eventually, job


class Feed:
    """What an EventReader hands out, and a switch for its mode."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.ended: list[Event] = []
        self.eager = False


@pytest.fixture
async def feed(redis_url: str) -> AsyncIterator[tuple[Feed, Callable[..., EventReader]]]:
    feed = Feed()
    readers: list[EventReader] = []

    def start(count: int = 1000) -> EventReader:
        reader = EventReader(
            Wire(redis_url, "test-events"),
            eager=lambda: feed.eager,
            on_ended=feed.ended.extend,
            count=count,
        )
        reader.add_listener(feed.events.extend)
        readers.append(reader)
        return reader

    yield feed, start
    for reader in readers:
        await reader.stop()


async def add(rds: aioredis.Redis, job_id: str, status: str) -> str:
    """An event as hero.lua writes it: terminal ones also go to ENDED, same id,
    in the same step (a reader never sees one without the other)."""
    if status not in {"finished", "error"}:
        entry: str = await rds.xadd(
            keys.EVENTS, {"job_id": job_id, "event": status, "status": status}
        )
        return entry
    both = (
        "local id = redis.call('XADD', KEYS[1], '*', 'job_id', ARGV[1], 'event', ARGV[2], "
        "'status', ARGV[2]) redis.call('XADD', KEYS[2], id, 'job_id', ARGV[1], 'status', ARGV[2]) "
        "return id"
    )
    return str(await rds.eval(both, 2, keys.EVENTS, keys.ENDED, job_id, status))


async def test_lazy_reader_hands_every_event_once_in_order_and_each_end_at_least_once(
    feed: Any, rds: aioredis.Redis
) -> None:
    events, start = feed
    await start().start()
    ids = []
    for n in range(3):
        for status in ("created", "started", "finished"):
            ids.append(await add(rds, f"j{n}", status))
        await asyncio.sleep(0.01)  # time between jobs: the reader sees them over several reads
    await eventually(lambda: _at_least(events.events, len(ids)), within=5)
    assert [str(e.id) for e in events.events] == ids
    # an end comes through ENDED, or with the batch when that was read first
    ended = [e.job_id for e in events.ended]
    assert ended == sorted(set(ended))
    assert {e.job_id for e in events.events if e.status == "finished"} == {"j0", "j1", "j2"}
    events.eager = True  # a subscriber came: every event at once, still each once
    ids.append(await add(rds, "j3", "created"))
    ids.append(await add(rds, "j3", "finished"))
    await eventually(lambda: _at_least(events.events, len(ids)), within=5)
    events.eager = False
    ids.append(await add(rds, "j4", "finished"))
    ids.append(await add(rds, "j5", "finished"))  # barrier: a repeat of j4 would come first
    await eventually(lambda: _at_least(events.events, len(ids)), within=5)
    assert [str(e.id) for e in events.events] == ids


async def test_while_lingering_an_end_is_handed_on_before_the_batch(
    feed: Any, rds: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_module, "LINGER", 30.0)  # the batch waits; the end may not
    events, start = feed
    await start().start()
    await add(rds, "l1", "created")  # wakes the idle reader, which then lingers
    await eventually(lambda: _at_least(events.events, 1), within=5)
    await add(rds, "l1", "finished")
    await eventually(lambda: _at_least(events.ended, 1), within=5)
    assert [e.job_id for e in events.ended] == ["l1"]
    assert len(events.events) == 1  # the listeners get it with the next batch


async def _at_least(items: list[Any], n: int) -> bool:
    return len(items) >= n


async def test_a_backlog_larger_than_a_read_is_drained(feed: Any, rds: aioredis.Redis) -> None:
    events, start = feed
    reader = start(count=10)
    await reader.start()
    ids = [await add(rds, f"b{n}", "created") for n in range(35)]
    await eventually(lambda: _at_least(events.events, 35), within=5)
    assert [str(e.id) for e in events.events] == ids


async def test_lua_copies_terminal_events_to_ended_under_their_ids(
    sup: Supervisor, actors: Any, rds: aioredis.Redis
) -> None:
    """With the job's caller: a user's wait ends from the copy alone, like an admin's."""
    actors()
    done = await sup.run(job("print(6 * 7)", caller_id="alice"), wait=20)
    (entry,) = await rds.xrange(keys.ENDED)
    events = {e_id: f for e_id, f in await rds.xrange(keys.EVENTS)}
    assert events[entry[0]]["status"] == "finished"
    assert entry[1] == {
        "job_id": done["job_id"],
        "status": "finished",
        "caller_id": "alice",
        "error": "",
        "output": "42\n",
    }


async def test_waiting_callers_wake_the_reader_about_once_per_job(
    sup: Supervisor, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without subscribers a run-and-wait costs the reader about one read, not
    one per event (each job makes four: created, dispatched, started, finished)."""
    actor = Actor(config, concurrency=1)

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    serving = asyncio.create_task(actor.serve())
    try:
        await sup.run(job("warm-up", script_type="osis"), wait=20)
        wire = sup._reader._wire
        reads = 0
        real = wire.execute_command

        async def counted(*args: Any) -> Any:
            nonlocal reads
            reads += args[0] == "XREAD"
            return await real(*args)

        monkeypatch.setattr(wire, "execute_command", counted)
        jobs = 50
        loop = asyncio.get_running_loop()
        began = loop.time()
        for n in range(jobs):
            await sup.run(job(f"n{n}", script_type="osis"), wait=20)
        periods = (loop.time() - began) / LINGER  # each: one timed-out wait, one events read
        assert reads <= jobs + 2 * periods + 5, (reads, periods)
    finally:
        actor.stop()
        await serving


@pytest.fixture
async def drowsy(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Supervisor, list[str]]]:
    """A supervisor whose reader falls asleep soon after its last waiter, with
    no sweep to hide a missed event (waits resolve from events alone), an
    in-process ``osis`` actor, and the commands its events reader sends."""
    monkeypatch.setattr(events_module, "KEEP_AWAKE", 0.05)
    sup = await Supervisor.connect(replace(config, watch_interval=60.0))
    actor = Actor(config, concurrency=1)

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    serving = asyncio.create_task(actor.serve())
    sent: list[str] = []
    wire = sup._reader._wire
    real = wire.execute_command

    async def recorded(*args: Any) -> Any:
        sent.append(str(args[0]))
        return await real(*args)

    monkeypatch.setattr(wire, "execute_command", recorded)
    try:
        yield sup, sent
    finally:
        actor.stop()
        await serving
        await sup.close()


async def _all_finished(sup: Supervisor, job_ids: list[str]) -> bool:
    statuses = [(await sup.status(j))["status"] for j in job_ids]
    return statuses == ["finished"] * len(job_ids)


#: The events of a job handed to an idle actor, in order.
STEPS = ("created", "dispatched", "started", "finished")


async def _asleep(sup: Supervisor) -> None:
    """Run one job, then wait until the reader sleeps: KEEP_AWAKE (0.05 s in
    ``drowsy``) passed and the blocked read it was in then ended. A fixed
    0.3 s was sometimes too short, and a test of the wake-up then met an
    awake reader (no XREVRANGE to count)."""
    await sup.run(job("before", script_type="osis"), wait=10)

    async def sleeping() -> bool:
        return sup._reader._asleep  # no public view of the reader's state

    await eventually(sleeping, within=10)


async def _run_while_asleep(sup: Supervisor) -> str:
    """A job submitted and finished while the reader sleeps: its id."""
    (slept,) = await sup.submit_many([job("while asleep", script_type="osis")])
    await eventually(lambda: _all_finished(sup, [slept["job_id"]]), within=10)
    return str(slept["job_id"])


async def _one_more_job_seen_by(
    sup: Supervisor, sub: Subscription
) -> tuple[str, list[tuple[str, str]]]:
    """Create and start a job, then read ``sub`` up to that job's end."""
    created = await sup.create(job("after", script_type="osis"))
    await sup.start(created["job_id"])
    seen: list[tuple[str, str]] = []
    async with asyncio.timeout(10):
        async for event in sub:
            seen.append((event.job_id, event.status))
            if event.job_id == created["job_id"] and event.status == "finished":
                break
    sup.unsubscribe(sub.id)
    return created["job_id"], seen


async def test_with_nobody_waiting_or_subscribed_the_reader_reads_nothing(drowsy: Any) -> None:
    sup, sent = drowsy
    await sup.run(job("warm-up", script_type="osis"), wait=10)
    await asyncio.sleep(0.3)  # KEEP_AWAKE is over, and a blocked read came back
    sent.clear()
    submitted = await sup.submit_many([job(f"s{n}", script_type="osis") for n in range(40)])
    ids = [answer["job_id"] for answer in submitted]
    await eventually(lambda: _all_finished(sup, ids), within=20)
    assert sent == []  # 160 events went by, and no read for them
    # a waiter wakes it at once (no sweep here: only the events can end the wait)
    done = await sup.run(job("after the sleep", script_type="osis"), wait=10)
    assert done["output"] == "after the sleep"
    assert sent[0] == "XREVRANGE"  # the newest id first, then reads from there
    assert "XREAD" in sent


async def test_a_subscription_after_a_sleep_sees_what_comes_after_it_and_nothing_before(
    drowsy: Any,
) -> None:
    sup, _ = drowsy
    await _asleep(sup)
    await _run_while_asleep(sup)
    sub = await sup.subscribe(script_type="osis")
    after, seen = await _one_more_job_seen_by(sup, sub)
    assert seen == [(after, step) for step in STEPS]


def _count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every entry the readers decode from now: (where from, job id), where
    from is "events" or "ended" (an ENDED copy has no ``event`` field)."""
    decodes: list[tuple[str, str]] = []
    real = Event.from_entry

    def counted(entry_id: str, raw: Mapping[str, str], *, strict: bool = False) -> Event:
        decodes.append(("events" if "event" in raw else "ended", raw.get("job_id", "")))
        return real(entry_id, raw, strict=strict)

    monkeypatch.setattr(Event, "from_entry", counted)
    return decodes


MINE = "mine"


def _mine(job_id: str) -> bool:
    return job_id == MINE


async def _fed(reader: EventReader, rds: aioredis.Redis, done: Callable[[], bool]) -> None:
    """Start ``reader``, write three events of "other" and four of "mine"
    (the last with its fields in another order than hero.lua's), and stop
    it once ``done``."""
    await reader.start()
    try:
        for job_id in ("other", MINE):
            for status in ("created", "started", "finished"):
                await add(rds, job_id, status)
        await rds.xadd(keys.EVENTS, {"status": "created", "event": "created", "job_id": MINE})
        await eventually(lambda: asyncio.sleep(0, done()), within=5)
    finally:
        await reader.stop()


async def test_a_listener_that_selects_jobs_gets_and_costs_their_entries_only(
    redis_url: str, rds: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waits' way: only the entries of the jobs they wait for are decoded
    and handed over."""
    decodes = _count_decodes(monkeypatch)
    mine: list[Event] = []
    reader = EventReader(Wire(redis_url, "test-events"), eager=lambda: True)
    reader.add_listener(mine.extend, select=_mine)
    await _fed(reader, rds, lambda: len(mine) >= 4)
    assert [e.status for e in mine] == ["created", "started", "finished", "created"]
    assert decodes == [("events", MINE)] * 4  # no entry of "other" decoded


async def test_ended_entries_are_selected_the_same_way(
    redis_url: str, rds: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While it lingers (30 s here) the reader reads ENDED alone, so both
    ends come from there: "mine"'s is handed over, "other"'s not decoded."""
    monkeypatch.setattr(events_module, "LINGER", 30.0)
    decodes = _count_decodes(monkeypatch)
    ended: list[Event] = []
    reader = EventReader(
        Wire(redis_url, "test-events"),
        eager=lambda: False,
        on_ended=ended.extend,
        ended_select=_mine,
    )
    await _fed(reader, rds, lambda: bool(ended))
    assert [(e.job_id, e.status) for e in ended] == [(MINE, "finished")]
    assert ("ended", "other") not in decodes


async def test_a_batch_wanted_whole_is_decoded_once_for_every_listener(
    redis_url: str, rds: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    decodes = _count_decodes(monkeypatch)
    mine: list[Event] = []
    every: list[Event] = []
    reader = EventReader(Wire(redis_url, "test-events"), eager=lambda: True)
    reader.add_listener(mine.extend, select=_mine)
    reader.add_listener(every.extend)
    await _fed(reader, rds, lambda: len(every) >= 7)
    assert [e.job_id for e in every] == ["other"] * 3 + [MINE] * 4
    assert [e.job_id for e in mine] == [MINE] * 4
    assert [where for where, _ in decodes] == ["events"] * 7  # once each, not again for mine


async def test_a_live_event_during_awake_waits_for_the_replay(
    redis_url: str, rds: aioredis.Redis
) -> None:
    """A ``since`` subscription parks live events from the moment it is
    added: one the reader hands over while ``awake`` runs goes out after
    the replay, not before it."""
    replayed = [await add(rds, "r", status) for status in ("created", "started")]
    live = await add(rds, "r", "finished")

    async def awake() -> None:  # the reader hands over a batch before awake returns
        subs.on_events([Event.from_entry(live, {"job_id": "r", "status": "finished"})])

    client = Wire(redis_url, "test-replay")
    subs = Subscriptions(client, awake=awake)
    try:
        sub = await subs.subscribe(job_ids=["r"], since="0-0")
        seen: list[str] = []
        async with asyncio.timeout(5):
            async for event in sub:
                seen.append(str(event.id))
                if len(seen) == 3:
                    break
    finally:
        await client.aclose()
    assert seen == [*replayed, live]


async def _no_awake() -> None:
    return None


async def test_a_replay_decodes_only_the_callers_own_events(
    redis_url: str, rds: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's ``since: 0`` reads every caller's events: 64 of them at once
    over 20,000 events held a gateway's CPU for seconds. Only its own are
    decoded now."""
    async with rds.pipeline(transaction=False) as pipe:
        for i in range(3000):
            pipe.xadd(keys.EVENTS, {"job_id": f"b{i}", "event": "created",
                                    "status": "created", "caller_id": "bob"})  # fmt: skip
        await pipe.execute()
    mine = await rds.xadd(keys.EVENTS, {"job_id": "a1", "event": "created",
                                        "status": "created", "caller_id": "alice"})  # fmt: skip
    decoded: list[str] = []
    real = Event.from_entry.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Event], /, entry_id: str, raw: Mapping[str, str], **kw: Any) -> Event:
        decoded.append(entry_id)
        return real(cls, entry_id, raw, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(Event, "from_entry", classmethod(counting))
    client = Wire(redis_url, "test-replay")
    try:
        sub = await Subscriptions(client, awake=_no_awake).subscribe(caller_id="alice", since="0-0")
        async with asyncio.timeout(5):
            event = await anext(aiter(sub))
    finally:
        await client.aclose()
    assert (event.job_id, decoded) == ("a1", [mine])


async def test_a_replay_after_the_greatest_id_keeps_the_subscription(redis_url: str) -> None:
    """Redis refuses an exclusive range after the greatest id: that closed the
    subscription (and the caller's socket, 1013), for a ``since`` the contract
    allows. There is just nothing to replay (nor any later event)."""
    client = Wire(redis_url, "test-replay")
    subs = Subscriptions(client, awake=_no_awake)
    try:
        sub = await subs.subscribe(job_ids=["x"], since=f"{2**64 - 1}-{2**64 - 1}")
        assert sub._replay is not None
        await asyncio.wait_for(sub._replay, 5)
        assert not sub.closed and sub._held is None  # replayed, handed over to live events
    finally:
        await client.aclose()


async def test_a_replay_waiting_for_its_subscriber_holds_no_other_back(
    redis_url: str, rds: aioredis.Redis
) -> None:
    """Replays read a page each in turn; one whose subscriber does not read
    waits on its own, holding no turn (admins' replays once shared two turns,
    held while their subscribers did not read)."""
    for i in range(3):
        for caller in ("alice", "bob"):
            await rds.xadd(keys.EVENTS, {"job_id": f"{caller}{i}", "status": "created",
                                         "caller_id": caller})  # fmt: skip
    client = Wire(redis_url, "test-replay")
    subs = Subscriptions(client, awake=_no_awake, maxsize=1)
    try:
        for _ in range(4):  # an admin's (every event), never read: each waits with its first
            await subs.subscribe(since="0-0")
        other = await subs.subscribe(job_ids=["bob0", "bob1", "bob2"], since="0-0")
        async with asyncio.timeout(5):
            assert [(await anext(aiter(other))).job_id for _ in range(3)] == [
                "bob0", "bob1", "bob2",
            ]  # fmt: skip
    finally:
        await client.aclose()


async def test_a_wait_for_output_after_a_sleep_is_answered_by_the_events(drowsy: Any) -> None:
    """``drowsy`` has no sweep: without ``awake`` this wait would time out."""
    sup, sent = drowsy
    await _asleep(sup)
    created = await sup.create(job("waited for", script_type="osis"))
    sent.clear()
    waiter = asyncio.create_task(sup.output(created["job_id"], wait=10))
    await eventually(lambda: asyncio.sleep(0, "XREAD" in sent), within=5)  # reading again
    await sup.start(created["job_id"])
    assert (await waiter)["output"] == "waited for"


async def test_many_runs_at_once_wake_a_sleeping_reader_with_one_read(drowsy: Any) -> None:
    sup, sent = drowsy
    await _asleep(sup)
    sent.clear()
    runs = [sup.run(job(f"c{n}", script_type="osis"), wait=10) for n in range(20)]
    done = await asyncio.gather(*runs)
    assert [d["output"] for d in done] == [f"c{n}" for n in range(20)]
    assert sent.count("XREVRANGE") == 1


async def test_a_resumed_subscription_after_a_sleep_misses_nothing_and_repeats_nothing(
    drowsy: Any, rds: aioredis.Redis
) -> None:
    sup, _ = drowsy
    await _asleep(sup)
    ((since, _),) = await rds.xrevrange(keys.EVENTS, count=1)
    ended_asleep = await _run_while_asleep(sup)
    sub = await sup.subscribe(script_type="osis", since=since)
    after, seen = await _one_more_job_seen_by(sup, sub)
    assert seen == [(ended_asleep, step) for step in STEPS] + [(after, step) for step in STEPS]
