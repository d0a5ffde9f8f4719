"""The synthetic generator, the archive layout and the small pure helpers (no Spark, no Redis)."""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gateway.errors import InvalidParams
from gateway.model import StreamId
from gateway.pipeline import erlang, synth
from gateway.pipeline.events import SCHEMA, WIRE_ORDER, EventColumns
from gateway.pipeline.store import event_files, partition_dir, read_events, write_events
from gateway.pipeline.timeparse import parse_time

pytestmark = pytest.mark.timeout(60)

PART = re.compile(r"^part-(\d+-\d+)-(\d+-\d+)(\.\d+)?\.parquet$")


def test_mmc_queue_waits_follow_erlang_c() -> None:
    """M/M/4 at a = 3: the share of jobs that wait is C(4, 3) and the mean wait C/(cμ-λ).

    Queue waits are autocorrelated, so over 30 000 jobs: P(wait) within 0.03, mean within 20 %.
    """
    spec = synth.SynthSpec(jobs=30_000, rate=3.0, service_mean=1.0, actors=4, seed=11)
    _, totals = synth.simulate(spec)
    n = len(totals.waits)
    assert n == 30_000 == totals.finished
    p_wait = sum(w > 0 for w in totals.waits) / n
    assert p_wait == pytest.approx(erlang.erlang_c(4, 3.0), abs=0.03)
    assert statistics.fmean(totals.waits) == pytest.approx(erlang.mean_wait(4, 3.0, 1.0), rel=0.2)
    assert statistics.fmean(totals.services) == pytest.approx(1.0, rel=0.03)
    # Never more than 4 jobs in service, every actor used.
    assert len(totals.busy) == 4


def test_poisson_arrivals_and_constant_service() -> None:
    spec = synth.SynthSpec(
        jobs=5_000,
        rate=2.0,
        service_mean=0.25,
        actors=1,
        distribution="const",
        seed=3,
    )
    events, totals = synth.simulate(spec)
    created = [e[0] for e in events if e[4] == "created"]
    gaps = [b - a for a, b in itertools.pairwise(created)]
    assert statistics.fmean(gaps) == pytest.approx(0.5, rel=0.05)
    # Exponential gaps: the standard deviation equals the mean.
    assert statistics.pstdev(gaps) == pytest.approx(0.5, rel=0.07)
    assert set(totals.services) == {0.25}


def test_events_follow_the_protocol() -> None:
    spec = synth.SynthSpec(
        jobs=400,
        rate=5.0,
        service_mean=0.5,
        actors=2,
        error_rate=0.3,
        max_attempts=2,
        script_types=("python", "osis"),
        group="g1",
        seed=5,
    )
    events, totals = synth.simulate(spec)
    per_job: dict[str, list[str]] = {}
    for e in events:
        per_job.setdefault(e[3], []).append(e[4])
    assert len(per_job) == totals.jobs == 800
    counts = Counter(name for names in per_job.values() for name in names)
    assert counts["created"] == 800
    assert counts["error"] == totals.errors and counts["retrying"] == totals.retries
    assert counts["dlq"] == totals.dlq > 0
    assert counts["finished"] + counts["dlq"] == 800
    assert counts["started"] == totals.attempts
    for names in per_job.values():
        assert names[:3] == ["created", "dispatched", "started"]
        assert names[-1] in ("finished", "dlq")
        if "retrying" in names:
            i = names.index("retrying")
            assert names[i - 1 : i + 3] == ["error", "retrying", "dispatched", "started"]
    entries = list(synth.with_ids(spec, events))
    ids = [StreamId.parse(entry_id) for entry_id, _ in entries]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    first = entries[0][1]
    assert set(first) == {
        "job_id",
        "event",
        "status",
        "script_type",
        "group",
        "instance",
        "actor",
        "caller_id",
        "attempt",
        "ts",
        "error",
    }
    started = next(f for _, f in entries if f["event"] == "started")
    assert started["attempt"] == "1" and started["actor"] and started["group"] == "g1"


def test_synth_spec_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="rate"):
        synth.SynthSpec(jobs=1, rate=0, service_mean=1, actors=1)
    with pytest.raises(ValueError, match="actors"):
        synth.SynthSpec(jobs=1, rate=1, service_mean=1, actors=0)


def test_write_parquet_uses_the_archive_layout(tmp_path: Path) -> None:
    start = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000) + 3_000_000  # 50 min into an hour
    spec = synth.SynthSpec(jobs=2_000, rate=1.0, service_mean=0.5, actors=1, start_ms=start)
    events, totals = synth.simulate(spec)
    files = synth.write_parquet(spec, events, tmp_path, rows_per_file=3_000)
    hours = {f.parent.relative_to(tmp_path).as_posix() for f in files}
    assert len(hours) >= 2  # 2000 s starting 10 min before the hour
    for f in files:
        match = PART.match(f.name)
        assert match, f.name
        table = pq.read_table(f)
        assert table.num_rows <= 3_000
        ids = table.column("event_id").to_pylist()
        assert StreamId.parse(match.group(1)) == min(map(StreamId.parse, ids))
        assert StreamId.parse(match.group(2)) == max(map(StreamId.parse, ids))
    assert read_events(tmp_path).num_rows == totals.events


def test_event_columns_parse_fields() -> None:
    batch = EventColumns()
    batch.append(
        "1700000000000-3",
        {"job_id": "j1", "event": "started", "attempt": "2", "ts": "1700000000123", "custom": "x"},
    )
    batch.append(
        "1700000005000-0",
        {"job_id": "j1", "event": "finished", "attempt": "", "ts": "not-a-number"},
    )
    rows = batch.table().to_pylist()
    assert rows[0]["attempt"] == 2 and rows[1]["attempt"] is None
    assert rows[0]["ts"].timestamp() == pytest.approx(1_700_000_000.123)
    # Unreadable ts: the stream id's time.
    assert rows[1]["ts"].timestamp() == pytest.approx(1_700_000_005.0)
    assert json.loads(rows[0]["extra"]) == {"custom": "x"} and rows[1]["extra"] == ""
    assert rows[1]["group"] == "" and batch.table().schema == SCHEMA


def test_flat_entries_fast_and_slow_path() -> None:
    batch = EventColumns()
    wire = [
        "job_id",
        "j1",
        "event",
        "created",
        "status",
        "created",
        "script_type",
        "python",
        "group",
        "g",
        "instance",
        "",
        "actor",
        "",
        "caller_id",
        "c",
        "attempt",
        "0",
        "ts",
        "1700000000000",
        "error",
        "",
    ]
    batch.append_flat("1700000000000-0", wire)
    # Another order, a missing field and an unknown one: the mapping path.
    batch.append_flat(
        "1700000000001-0",
        ["event", "finished", "job_id", "j1", "ts", "1700000000001", "note", "legacy"],
    )
    rows = batch.table().to_pylist()
    assert rows[0]["script_type"] == "python" and rows[0]["group"] == "g"
    assert rows[0]["attempt"] == 0 and rows[0]["extra"] == ""
    assert rows[1]["job_id"] == "j1" and rows[1]["event"] == "finished"
    assert rows[1]["attempt"] is None and rows[1]["script_type"] == ""
    assert json.loads(rows[1]["extra"]) == {"note": "legacy"}
    assert batch.hours == [1_700_000_000_000 // 3_600_000] * 2


def _wire(**values: str) -> list[str]:
    """An entry as the supervisor writes it: every common field in WIRE_ORDER, then ``values``."""
    common = dict.fromkeys(WIRE_ORDER, "")
    common.update({"job_id": "j", "event": "finished", "attempt": "1", "ts": "1700000000000"})
    common.update({k: v for k, v in values.items() if k in common})
    flat = [x for pair in common.items() for x in pair]
    return flat + [x for k, v in values.items() if k not in common for x in (k, v)]


def test_columns_of_odd_rows_match_the_per_row_rules() -> None:
    """Rows the vectorized path cannot take are read as mappings, value by value."""
    batch = EventColumns()
    batch.append_flat("1700000000000-0", _wire(output="done", sandbox="off"))
    # A known field again after the common ones: the later value wins, as in a mapping.
    batch.append_flat("1700000000000-1", [*_wire(), "ts", "1700000000500", "note", "x"])
    batch.append_flat("1700000000000-2", _wire(attempt="+3", ts="1700000000001"))
    batch.append_flat("1700000000000-3", _wire(attempt="99999999999", ts="\u0663"))
    batch.append_flat("1700000000000-4", _wire(attempt="\u0662", ts="12345678901234567"))
    batch.append_flat("1700000000000-5", _wire(attempt="", ts=""))
    # one field more: joined by Arrow when nothing in it needs a JSON escape
    batch.append_flat("1700000000000-6", _wire(output="out-1 [x]"))
    batch.append_flat("1700000000000-7", _wire(output='{"a": "\u00e9\\n"}\x7f'))
    batch.append_flat("1700000000000-8", [*_wire(), "attempt", "7"])
    rows = batch.table().to_pylist()
    assert [r["extra"] for r in rows] == [
        json.dumps({"output": "done", "sandbox": "off"}, sort_keys=True),
        json.dumps({"note": "x"}),
        "",
        "",
        "",
        "",
        '{"output": "out-1 [x]"}',
        json.dumps({"output": '{"a": "\u00e9\\n"}\x7f'}),
        "",
    ]
    assert [r["attempt"] for r in rows] == [1, 1, 3, None, 2, None, 1, 1, 7]
    ms = [int(r["ts"].timestamp() * 1000) for r in rows]
    # "٣" is a digit to str.isdigit and int; 17 digits or none: the id's time
    assert ms == [1700000000000, 1700000000500, 1700000000001, 3] + [1700000000000] * 5
    assert all(r["event"] == "finished" and r["job_id"] == "j" for r in rows)
    assert batch.table().schema == SCHEMA


def test_files_are_named_by_their_smallest_and_largest_ids(tmp_path: Path) -> None:
    batch = EventColumns()
    hour = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
    # out of order (claimed entries come after newer ones), two hours, ms of different lengths
    for entry_id, ts in [
        ("1700000000002-0", hour + 5),
        ("999999999999-7", hour + 1),
        ("1700000000002-10", hour + 3_600_000),
        ("1700000000002-9", hour + 2),
        ("1700000000001-3", hour + 3_600_001),
    ]:
        batch.append_flat(entry_id, _wire(ts=str(ts)))
    names = sorted(f.name for f in write_events(tmp_path, batch))
    assert names == [
        "part-1700000000001-3-1700000000002-10.parquet",
        "part-999999999999-7-1700000000002-9.parquet",
    ]
    # ids off the plain "ms-seq" form: a bare ms counts as seq 0
    bare = EventColumns()
    bare.append_flat("1700000000003", _wire())
    bare.append_flat("1700000000002-5", _wire())
    assert bare.id_range() == (StreamId(1700000000002, 5), StreamId(1700000000003, 0))


def test_write_events_is_atomic_and_never_overwrites(tmp_path: Path) -> None:
    batch = EventColumns()
    for i in range(5):
        batch.append(
            f"1700000000000-{i}", {"job_id": f"j{i}", "event": "created", "ts": "1700000000000"}
        )
    first = write_events(tmp_path, batch)
    again = write_events(tmp_path, batch)
    assert len(first) == len(again) == 1
    assert first[0].name == "part-1700000000000-0-1700000000000-4.parquet"
    assert again[0].name == "part-1700000000000-0-1700000000000-4.1.parquet"
    assert first[0].parent == tmp_path / partition_dir(1_700_000_000_000 // 3_600_000)
    assert first[0].parent.as_posix().endswith("date=2023-11-14/hour=22")
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]
    assert event_files(tmp_path) == sorted(first + again)
    assert read_events(tmp_path).num_rows == 10


def test_parse_time() -> None:
    now = 1_700_000_000_000
    assert parse_time("2h", now) == now - 7_200_000
    assert parse_time("90s", now) == now - 90_000
    assert parse_time("1700000000", now) == now
    assert parse_time("1700000000000", now) == now
    assert parse_time("2023-11-14T22:13:20Z", now) == now
    assert parse_time("2023-11-14T22:13:20", now) == now  # no zone: UTC
    assert parse_time("2023-11-14", now) == now - (22 * 3600 + 13 * 60 + 20) * 1000
    with pytest.raises(InvalidParams, match="not a time"):
        parse_time("yesterday", now)
    assert math.isclose(parse_time("0.5h", now), now - 1_800_000)
