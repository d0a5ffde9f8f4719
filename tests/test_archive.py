"""The events archive on the session's real redis-server: layout, acks, restarts, lag."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import redis

from gateway.pipeline import synth
from gateway.pipeline.archive import ArchiveOptions, Archiver
from gateway.pipeline.store import event_files, read_events
from gateway.supervisor import keys
from tests.helpers import until

pytestmark = pytest.mark.timeout(60)

HOUR_MS = 3_600_000
BASE_MS = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS  # the start of an hour


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    c.close()


def add_events(
    client: redis.Redis, n: int, *, start_ms: int = BASE_MS, step_ms: int = 1000, prefix: str = "j"
) -> list[str]:
    """XADD ``n`` well-formed events (ts ``start_ms + i*step_ms``); returns their ids."""
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(
            keys.EVENTS,
            {
                "job_id": f"{prefix}{i // 4}",
                "event": ("created", "dispatched", "started", "finished")[i % 4],
                "status": "x",
                "script_type": "python",
                "group": "",
                "instance": "",
                "actor": "a1" if i % 4 >= 2 else "",
                "caller_id": "c",
                "attempt": str(int(i % 4 >= 2)),
                "ts": str(start_ms + i * step_ms),
                "error": "",
            },
        )
    return [str(entry_id) for entry_id in pipe.execute()]


def archived_ids(root: Path) -> list[str]:
    return [str(x) for x in read_events(root).column("event_id").to_pylist()]


def pending(client: redis.Redis, group: str = "archive") -> int:
    return int(client.xpending(keys.EVENTS, group)["pending"])


@contextlib.contextmanager
def running(archiver: Archiver) -> Iterator[threading.Thread]:
    """``archiver.run`` in a thread, stopped and joined on the way out."""
    stop = threading.Event()
    thread = threading.Thread(target=lambda: archiver.run(stop=stop), daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(7)
    assert not thread.is_alive()


def options(out: Path, **kw: object) -> ArchiveOptions:
    base: dict[str, object] = {"out": out, "consumer": "c1", "batch": 100}
    base.update(kw)
    return ArchiveOptions(**base)  # type: ignore[arg-type]


def test_events_land_in_hourly_partitions(client: redis.Redis, tmp_path: Path) -> None:
    # 250 events one every 50 s: spans 4 hours.
    ids = add_events(client, 250, step_ms=50_000)
    stats = Archiver(client, options(tmp_path)).run(once=True)
    assert stats.events == 250 and stats.lost == 0
    assert sorted(archived_ids(tmp_path)) == sorted(ids)
    parts = {f.parent.relative_to(tmp_path).as_posix() for f in event_files(tmp_path)}
    assert parts == {f"date=2023-11-14/hour={h}" for h in ("22", "23")} | {
        f"date=2023-11-15/hour={h}" for h in ("00", "01")
    }
    for f in event_files(tmp_path):
        table = pq.read_table(f)
        first, last = table.column("event_id")[0].as_py(), table.column("event_id")[-1].as_py()
        assert f.name == f"part-{first}-{last}.parquet"
        assert table.num_rows <= 100
    assert not [p for p in tmp_path.rglob(".*")], "temporary files left behind"
    assert pending(client) == 0
    row = read_events(tmp_path).to_pylist()[2]
    assert row["event"] == "started" and row["actor"] == "a1" and row["attempt"] == 1
    assert row["ts"].timestamp() * 1000 == BASE_MS + 2 * 50_000


def test_entries_in_any_field_order_keep_every_field(client: redis.Redis, tmp_path: Path) -> None:
    client.xadd(
        keys.EVENTS,
        {
            "event": "started",
            "job_id": "legacy-1",
            "ts": str(BASE_MS),
            "actor": "old-actor",
            "worker_id": "w7",
        },
    )
    add_events(client, 4)
    Archiver(client, options(tmp_path)).run(once=True)
    rows = {r["job_id"]: r for r in read_events(tmp_path).to_pylist()}
    legacy = rows["legacy-1"]
    assert (legacy["event"], legacy["actor"], legacy["status"]) == ("started", "old-actor", "")
    assert json.loads(legacy["extra"]) == {"worker_id": "w7"}
    assert rows["j0"]["extra"] == "" and rows["j0"]["script_type"] == "python"


def test_restart_reads_its_pending_entries_first(client: redis.Redis, tmp_path: Path) -> None:
    ids = add_events(client, 100)
    client.xgroup_create(keys.EVENTS, "archive", id="0")
    # A previous run took 40 entries and died before writing them.
    client.xreadgroup("archive", "c1", {keys.EVENTS: ">"}, count=40)
    assert pending(client) == 40
    stats = Archiver(client, options(tmp_path)).run(once=True)
    assert stats.recovered == 40
    assert sorted(archived_ids(tmp_path)) == sorted(ids)  # each exactly once
    assert pending(client) == 0


class CrashBeforeAck(Archiver):
    """Dies after its first files are durable, before XACK (a kill at the worst moment)."""

    def _ack(self) -> None:
        if self._unacked:
            raise RuntimeError("simulated crash")


def test_crash_between_write_and_ack_gives_duplicates_not_loss(
    client: redis.Redis,
    tmp_path: Path,
) -> None:
    ids = add_events(client, 300)
    with pytest.raises(RuntimeError, match="simulated crash"):
        CrashBeforeAck(client, options(tmp_path)).run(once=True)
    # pending: the batch written and not acked, and the next one, read ahead
    # of the write (Redis builds it meanwhile) and never taken
    assert len(archived_ids(tmp_path)) == 100 and pending(client) == 200
    stats = Archiver(client, options(tmp_path)).run(once=True)
    assert stats.recovered == 200 and stats.events == 300
    archived = archived_ids(tmp_path)
    assert len(archived) == 400 and sorted(set(archived)) == sorted(ids)
    # The re-written range got a new name next to the first copy, not over it.
    assert any(f.name.endswith(".1.parquet") for f in event_files(tmp_path))
    assert pending(client) == 0


def test_second_run_archives_only_new_events(client: redis.Redis, tmp_path: Path) -> None:
    first = add_events(client, 120)
    Archiver(client, options(tmp_path)).run(once=True)
    second = add_events(client, 80, start_ms=BASE_MS + 500_000, prefix="k")
    stats = Archiver(client, options(tmp_path)).run(once=True)
    assert stats.events == 80 and stats.recovered == 0
    assert sorted(archived_ids(tmp_path)) == sorted(first + second)


def test_idle_entries_of_a_dead_consumer_are_claimed(client: redis.Redis, tmp_path: Path) -> None:
    ids = add_events(client, 60)
    client.xgroup_create(keys.EVENTS, "archive", id="0")
    client.xreadgroup("archive", "dead-host", {keys.EVENTS: ">"}, count=25)
    time.sleep(0.1)  # idle past claim_idle (0.05): only then are the entries claimable
    stats = Archiver(client, options(tmp_path, consumer="live", claim_idle=0.05)).run(once=True)
    assert stats.recovered == 25
    assert sorted(archived_ids(tmp_path)) == sorted(ids)
    assert pending(client) == 0


def test_trimmed_pending_entries_are_counted_lost(
    client: redis.Redis,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = add_events(client, 20)
    client.xgroup_create(keys.EVENTS, "archive", id="0")
    client.xreadgroup("archive", "c1", {keys.EVENTS: ">"}, count=20)
    client.xdel(keys.EVENTS, *ids[:5])  # MAXLEN trimming does the same to old entries
    with caplog.at_level(logging.WARNING, logger="gateway.pipeline.archive"):
        stats = Archiver(client, options(tmp_path)).run(once=True)
    assert stats.lost == 5 and stats.events == 15
    assert sorted(archived_ids(tmp_path)) == sorted(ids[5:])
    assert pending(client) == 0
    assert any(getattr(r, "lost", None) == 5 for r in caplog.records)


def test_progress_and_lag_are_logged(
    client: redis.Redis,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_events(client, 250)
    with caplog.at_level(logging.INFO, logger="gateway.pipeline.archive"):
        Archiver(client, options(tmp_path)).run(once=True)
    flushes = [r for r in caplog.records if r.getMessage().startswith("archived events:")]
    assert [r.__dict__["events"] for r in flushes] == [100, 200, 250]
    assert flushes[-1].__dict__["lag"] == 0
    assert all({"rate", "pending", "files"} <= r.__dict__.keys() for r in flushes)


def test_live_mode_flushes_on_interval_and_stops(client: redis.Redis, tmp_path: Path) -> None:
    with running(Archiver(client, options(tmp_path, flush_interval=0.2, block_ms=100))):
        # the archiver creates stream and group first
        until(lambda: client.exists(keys.EVENTS), what="archiver started")
        ids = add_events(client, 7)  # far below the batch size: only the interval flushes it
        until(
            lambda: not pending(client) and len(archived_ids(tmp_path)) >= 7,
            what="interval flush",
        )
        assert sorted(archived_ids(tmp_path)) == sorted(ids)


class StopsAfterFirstFlush(Archiver):
    """Told to stop while its first batch is written: a read is in flight then."""

    def __init__(self, client: redis.Redis, options: ArchiveOptions, stop: threading.Event) -> None:
        super().__init__(client, options)
        self.stop = stop

    def flush(self) -> None:
        self.stop.set()
        super().flush()


def test_a_read_sent_ahead_is_archived_when_the_run_stops(
    client: redis.Redis, tmp_path: Path
) -> None:
    ids = add_events(client, 250)
    stop = threading.Event()
    stats = StopsAfterFirstFlush(client, options(tmp_path), stop).run(stop=stop)
    # the first batch, then the one read ahead of its write: taken, not left pending
    assert stats.events == 200 and stats.flushes == 2
    assert sorted(archived_ids(tmp_path)) == sorted(ids[:200])
    assert pending(client) == 0


def test_connections_killed_with_a_read_in_flight_lose_nothing(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    name = "archive-under-test"
    own = redis.Redis.from_url(redis_url, decode_responses=True, client_name=name)
    killed: list[str] = []

    class KilledMidFlush(Archiver):
        def flush(self) -> None:
            if not killed and self._buffer_ids:
                assert self._link.in_flight  # the next batch, read ahead of this write
                for c in client.client_list():
                    if c.get("name") == name:
                        client.client_kill_filter(_id=c["id"])
                        killed.append(c["id"])
            super().flush()

    # one batch: the read sent ahead of its write blocks on the drained stream
    ids = add_events(client, 100)
    client.xgroup_create(keys.EVENTS, "archive", id="0")
    archiver = KilledMidFlush(own, options(tmp_path, block_ms=1000))
    with contextlib.closing(own), running(archiver):
        until(lambda: len(archived_ids(tmp_path)) == 100, what="the first batch")
        ids += add_events(client, 200, start_ms=BASE_MS + 500_000, prefix="k")
        until(
            lambda: not pending(client) and set(archived_ids(tmp_path)) == set(ids),
            what="every event archived after the kill",
        )
    assert killed and archiver.stats.events == 300


def test_max_seconds_bounds_a_run_on_an_empty_stream(client: redis.Redis, tmp_path: Path) -> None:
    started = time.monotonic()
    stats = Archiver(client, options(tmp_path, block_ms=200)).run(max_seconds=0.5)
    assert 0.4 < time.monotonic() - started < 3
    assert stats.events == 0
    groups = client.xinfo_groups(keys.EVENTS)  # MKSTREAM made the stream and the group
    assert [g["name"] for g in groups] == ["archive"]


def test_killed_archiver_resumes_without_loss(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    spec = synth.SynthSpec(jobs=5_000, rate=50.0, service_mean=0.05, actors=4, seed=2)
    events, totals = synth.simulate(spec)
    synth.xadd(spec, events, client)
    cmd = [
        sys.executable,
        "-m",
        "gateway.pipeline",
        "archive",
        "--out",
        str(tmp_path),
        "--redis-url",
        redis_url,
        "--batch",
        "500",
        "--consumer",
        "host1",
        "--log-format",
        "text",
        "--once",
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not event_files(tmp_path) and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    archived = archived_ids(tmp_path)
    assert len(set(archived)) == totals.events
    assert pending(client) == 0


def test_a_stall_while_a_batch_is_written_loses_no_batch_read_ahead(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    """Redis stalls past the archiver's socket timeout while it writes a
    batch: the acks time out, and the read sent ahead, which Redis answered
    with the next batch, is dropped with its connection. The running
    archiver reads that batch again once Redis is back: not left pending
    for a claim (none here) or a restart, and nothing archived twice."""
    own = redis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=0.5)
    stalled: list[bool] = []

    class StallsMidFlush(Archiver):
        def flush(self) -> None:
            if not stalled and self._buffer_ids:
                assert self._link.in_flight
                until(lambda: pending(client) == 200, what="the read ahead answered")
                client.execute_command("CLIENT", "PAUSE", 1500, "ALL")
                stalled.append(True)
            super().flush()

    ids = add_events(client, 300)
    client.xgroup_create(keys.EVENTS, "archive", id="0")
    archiver = StallsMidFlush(own, options(tmp_path, block_ms=200, claim_idle=0))
    with contextlib.closing(own), running(archiver):
        until(
            lambda: not pending(client) and set(archived_ids(tmp_path)) == set(ids),
            what="every event archived after the stall",
        )
    assert stalled and len(archived_ids(tmp_path)) == 300
    assert archiver.stats.recovered == 100  # the batch read ahead, taken back


def clients(client: redis.Redis) -> list[dict[str, str]]:
    return [{k: str(v) for k, v in c.items()} for c in client.client_list()]


def test_a_stream_deleted_under_a_waiting_read_is_made_again(
    client: redis.Redis, tmp_path: Path
) -> None:
    archiver = Archiver(client, options(tmp_path, flush_interval=0.1, block_ms=5000))
    with running(archiver) as thread:
        until(
            lambda: any(c["cmd"] == "xreadgroup" and "b" in c["flags"] for c in clients(client)),
            what="the archiver waiting on the stream",
        )
        client.delete(keys.EVENTS)  # Redis ends the waiting read with UNBLOCKED
        until(lambda: client.exists(keys.EVENTS), what="the stream and its group made again")
        ids = add_events(client, 7)
        until(
            lambda: not pending(client) and sorted(archived_ids(tmp_path)) == sorted(ids),
            what="events after the deletion archived",
        )
        assert thread.is_alive()


def test_a_pool_of_one_connection_archives_without_reading_ahead(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    """A read sent ahead holds a connection while the acks need another: a
    client whose pool allows one connection reads after each flush instead."""
    ids = add_events(client, 300)
    one = redis.Redis.from_url(redis_url, decode_responses=True, max_connections=1)
    try:
        stats = Archiver(one, options(tmp_path)).run(once=True)
    finally:
        one.close()
    assert stats.events == 300 and stats.flushes == 3
    assert sorted(archived_ids(tmp_path)) == sorted(ids)
    assert pending(client) == 0
