"""The Spark job on real local Spark (local[2]) with synthetic data of known distributions.

Tolerances, stated once:

* run-time percentiles vs the closed-form exponential quantile ``-ln(1-p)·E[S]``: four
  standard errors of the sample quantile, ``4·E[S]·sqrt(p / ((1-p)·n))``, plus 2 ms
  (timestamps are whole milliseconds);
* pipeline percentiles vs the exact order statistic of the simulated values: rank within
  ``n / accuracy + 1`` (``percentile_approx``'s guarantee) and value within 2 ms;
* the recommended actor count: exactly the Erlang C answer computed independently here.
"""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import redis

from gateway.pipeline import analytics, report, synth
from gateway.pipeline.archive import ArchiveOptions, Archiver
from gateway.pipeline.cli import add_commands
from gateway.pipeline.events import EventColumns
from gateway.pipeline.model import PipelineParams
from gateway.pipeline.store import write_events
from gateway.supervisor import keys

pytestmark = pytest.mark.timeout(180)


def cli(argv: list[str]) -> int:
    """Run a command the way ``hero-gateway`` does, minus its logging set-up."""
    parser = argparse.ArgumentParser(prog="hero-gateway")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


START_MS = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
MMC = synth.SynthSpec(jobs=20_000, rate=3.0, service_mean=1.0, actors=4, seed=7, start_ms=START_MS)
SLO_WAIT = 0.5


@pytest.fixture(scope="module")
def mmc(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], synth.SynthTotals, Path]:
    root = tmp_path_factory.mktemp("mmc")
    events, totals = synth.simulate(MMC)
    synth.write_parquet(MMC, events, root / "events")
    params = PipelineParams(
        events=str(root / "events"),
        out=root / "out",
        slo_wait=SLO_WAIT,
        bucket_seconds=1800,
        as_of_ms=START_MS + 86_400_000,
    )
    built = report.build(analytics.run(spark, params))
    report.write(built, params.out)
    return built, totals, params.out


# -- an Erlang C written independently of gateway.pipeline.erlang ----------------------


def independent_erlang_c(c: int, a: float) -> float:
    exact = Fraction(a)
    top = exact**c / math.factorial(c) * c / (c - exact)
    return float(top / (sum(exact**k / math.factorial(k) for k in range(c)) + top))


def independent_actors(lam: float, service: float, slo: float, tail: float = 0.05) -> int:
    a = lam * service
    c = math.floor(a) + 1
    while independent_erlang_c(c, a) * math.exp(-(c / service - lam) * slo) > tail:
        c += 1
    return c


# -- the M/M/4 data set ----------------------------------------------------------------


def test_run_time_percentiles_match_exponential_quantiles(mmc: Any) -> None:
    built, _, _ = mmc
    run = built["script_types"][0]["run"]
    n = run["count"]
    assert n == MMC.jobs
    for p in (0.5, 0.95, 0.99):
        expected = -math.log(1 - p) * MMC.service_mean
        tolerance = 4 * MMC.service_mean * math.sqrt(p / ((1 - p) * n)) + 0.002
        assert abs(run[f"p{round(p * 100)}"] - expected) <= tolerance, (p, run, expected)
    assert run["mean"] == pytest.approx(MMC.service_mean, abs=4 / math.sqrt(n))


def test_percentiles_match_the_exact_sample(mmc: Any) -> None:
    built, totals, _ = mmc
    entry = built["script_types"][0]
    accuracy = built["params"]["percentile_accuracy"]
    for name, sample in (("wait", totals.waits), ("run", totals.services)):
        values = sorted(sample)
        n = len(values)
        slack = n // accuracy + 1
        for p in (0.5, 0.95, 0.99):
            k = math.ceil(p * n) - 1
            low, high = values[max(0, k - slack)] - 0.002, values[min(n - 1, k + slack)] + 0.002
            assert low <= entry[name][f"p{round(p * 100)}"] <= high, (name, p)
        assert entry[name]["mean"] == pytest.approx(sum(values) / n, abs=0.001)


def test_recommended_actors_match_independent_erlang_c(mmc: Any) -> None:
    built, _, _ = mmc
    entry = built["script_types"][0]
    rec = entry["recommendation"]
    measured_lam, measured_service = rec["arrival_rate"], rec["mean_service"]
    assert measured_lam == pytest.approx(MMC.rate, rel=0.03)
    assert measured_service == pytest.approx(MMC.service_mean, rel=0.03)
    assert rec["actors"] == independent_actors(measured_lam, measured_service, SLO_WAIT)
    # The closed-form answer for the true λ = 3/s, E[S] = 1 s: 6 actors for p95 wait ≤ 0.5 s.
    assert independent_actors(MMC.rate, MMC.service_mean, SLO_WAIT) == 6 == rec["actors"]
    assert rec["offered_load"] == pytest.approx(measured_lam * measured_service, rel=1e-5)
    assert rec["utilisation"] == pytest.approx(rec["offered_load"] / 6, rel=1e-5)
    assert rec["quantile_wait"] <= SLO_WAIT
    assert entry["peak"]["recommendation"]["actors"] >= rec["actors"]


def test_counts_utilisation_and_jobs(mmc: Any) -> None:
    built, totals, _ = mmc
    entry = built["script_types"][0]
    assert built["events"] == {
        "read": totals.events,
        "unique": totals.events,
        "invalid": 0,
        "duplicates": 0,
    }
    assert built["jobs"] == MMC.jobs
    assert (entry["arrivals"], entry["completions"], entry["started"]) == (MMC.jobs,) * 3
    assert entry["errors"] == entry["retries"] == entry["dlq"] == entry["timeouts"] == 0
    assert entry["actors_seen"] == MMC.actors
    assert entry["busy_seconds"] == pytest.approx(sum(totals.services), rel=1e-4)
    # Utilisation of an M/M/c queue is a / c = 0.75.
    assert entry["utilisation"] == pytest.approx(MMC.offered_load / MMC.actors, abs=0.03)
    by_actor = {a["actor"]: a for a in built["actors"]}
    for actor, busy in totals.busy.items():
        assert by_actor[actor]["busy_seconds"] == pytest.approx(busy, rel=1e-4)
    assert built["stuck"]["count"] == 0


def test_rollup_levels_add_up(mmc: Any) -> None:
    built, _, _ = mmc
    buckets = built["buckets"]
    assert len(buckets) >= 4  # 20 000 jobs at 3/s ≈ 1.9 h in 30 min buckets
    for column in ("arrivals", "completions", "started"):
        assert sum(b[column] for b in buckets) == built["totals"][column]
    assert sum(b["run"]["count"] for b in buckets) == built["totals"]["run"]["count"]
    assert built["groups"][0]["group"] == ""
    assert built["groups"][0]["arrivals"] == built["script_types"][0]["arrivals"]


def test_tables_and_report_on_disk(mmc: Any, spark: Any) -> None:
    built, _, out = mmc
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["script_types"] == built["script_types"]
    assert built["tables"] == {
        name: name for name in ("jobs", "attempts", "stats", "actors", "stuck")
    }
    job_rows = spark.read.parquet(str(out / "jobs"))
    assert job_rows.count() == MMC.jobs
    outcomes = {r["outcome"]: r["count"] for r in job_rows.groupBy("outcome").count().collect()}
    assert outcomes == {"finished": MMC.jobs}
    assert {"created_at", "dispatched_at", "started_at", "finished_at", "attempts", "actor"} <= set(
        job_rows.columns
    )
    levels = {r["level"] for r in spark.read.parquet(str(out / "stats")).collect()}
    assert levels == {"bucket", "group", "script_type", "all"}


# -- attempt pairing on hand-written histories -----------------------------------------


def test_attempt_pairing_edge_cases(spark: Any, tmp_path: Path) -> None:
    rows = [
        # j1: error, retry, success.
        ("j1", "created", 0),
        ("j1", "dispatched", 0),
        ("j1", "started", 1000),
        ("j1", "error", 2000),
        ("j1", "retrying", 2000),
        ("j1", "dispatched", 2500),
        ("j1", "started", 4000),
        ("j1", "finished", 7000),
        # j2: a legacy actor writes only started / finished.
        ("j2", "started", 0),
        ("j2", "finished", 500),
        # j3: still running.
        ("j3", "dispatched", 0),
        ("j3", "started", 100),
        # j4: everything in one millisecond: the stream id orders it.
        ("j4", "dispatched", 9000),
        ("j4", "started", 9000),
        ("j4", "finished", 9000),
        # j5: started twice without an end in between (the first end is lost).
        ("j5", "dispatched", 0),
        ("j5", "started", 10),
        ("j5", "started", 3000),
        ("j5", "timeout", 4000),
        # j6: stream mode: its actor went silent, another one ran it again.
        ("j6", "dispatched", 0),
        ("j6", "started", 100),
        ("j6", "redelivered", 2000),
        ("j6", "finished", 2500),
    ]
    batch = EventColumns()
    for seq, (job, event, t) in enumerate(rows):
        fields = {
            "job_id": job,
            "event": event,
            "ts": str(START_MS + t),
            "script_type": "py",
            "actor": "a" if event != "dispatched" else "",
        }
        batch.append(f"{START_MS + 10_000}-{seq}", fields)
    batch.append(
        f"{START_MS + 10_000}-1", {"job_id": "j1", "event": "dispatched", "ts": str(START_MS)}
    )  # a duplicate id
    write_events(tmp_path, batch)
    ev = analytics.prepare(analytics.read_events(spark, str(tmp_path)))
    got = sorted(
        (
            (r["job_id"], r["wait_s"], r["run_s"], r["end_event"], r["open"])
            for r in analytics.attempts(ev).collect()
        ),
        key=lambda row: (row[0], row[1] is None, row[1] or 0.0),
    )
    assert got == [
        ("j1", 1.0, 1.0, "error", False),
        ("j1", 1.5, 3.0, "finished", False),
        ("j2", None, 0.5, "finished", False),
        ("j3", 0.1, None, None, True),
        ("j4", 0.0, 0.0, "finished", False),
        ("j5", 0.01, None, None, False),
        ("j5", None, 1.0, "timeout", False),
        ("j6", 0.1, None, None, False),
        ("j6", None, 0.5, "finished", False),
    ]
    jobs = {r["job_id"]: r for r in analytics.jobs(ev).collect()}
    assert (jobs["j1"]["outcome"], jobs["j1"]["attempts"], jobs["j1"]["retries"]) == (
        "finished",
        2,
        1,
    )
    assert jobs["j3"]["outcome"] == "running" and jobs["j5"]["outcome"] == "timeout"
    assert (jobs["j6"]["outcome"], jobs["j6"]["attempts"]) == ("finished", 2)
    assert jobs["j2"]["created_t"] is None and jobs["j2"]["finished_t"] == START_MS + 500


def test_log_and_progress_reports_are_archived_but_not_counted(spark: Any, tmp_path: Path) -> None:
    """A running job's ``log`` and ``progress`` events are no transitions: the
    archive keeps them (``lines`` and the rest in ``extra``), the analytics
    neither count them nor take one for a job's last event."""
    rows = [
        ("k1", "dispatched", 0, {}),
        ("k1", "started", 100, {}),
        ("k1", "log", 500, {"lines": "line 0\nline 1"}),
        ("k1", "progress", 600, {"progress": "0.5", "message": "half"}),
        ("k1", "finished", 1100, {}),
        ("k2", "dispatched", 0, {}),
        ("k2", "started", 100, {}),
        ("k2", "log", 900, {"lines": "still going"}),
        ("k2", "progress", 950, {"progress": "0.9", "message": ""}),
    ]
    batch = EventColumns()
    for seq, (job, event, t, extra) in enumerate(rows):
        fields = {"job_id": job, "event": event, "status": "started", "ts": str(START_MS + t)}
        batch.append(f"{START_MS + t}-{seq}", {**fields, "script_type": "py", **extra})
    write_events(tmp_path, batch)
    raw = analytics.read_events(spark, str(tmp_path))
    logged = raw.where(raw.event == "log").orderBy("event_id").collect()
    assert [json.loads(r["extra"])["lines"] for r in logged] == ["line 0\nline 1", "still going"]
    ev = analytics.prepare(raw)
    attempts = {r["job_id"]: r for r in analytics.attempts(ev).collect()}
    assert (attempts["k1"]["run_s"], attempts["k1"]["end_event"]) == (1.0, "finished")
    assert attempts["k2"]["open"]
    jobs = {r["job_id"]: r for r in analytics.jobs(ev).collect()}
    assert (jobs["k1"]["outcome"], jobs["k1"]["events"]) == ("finished", 3)
    assert (jobs["k2"]["outcome"], jobs["k2"]["events"]) == ("running", 2)


# -- the archive to the report, through the CLI ------------------------------------------


class CrashBeforeAck(Archiver):
    def _ack(self) -> None:
        if self._unacked:
            raise RuntimeError("simulated crash")


def test_archive_to_report_end_to_end(
    spark: Any,
    redis_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = synth.SynthSpec(
        jobs=150,
        rate=2.0,
        service_mean=0.5,
        actors=2,
        error_rate=0.2,
        max_attempts=2,
        script_types=("python", "osis"),
        group="g1",
        seed=9,
        start_ms=START_MS,
    )
    events, totals = synth.simulate(spec)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    synth.xadd(spec, events, client)
    as_of = START_MS + 2 * 3_600_000
    for job, t in (("stuck-1", START_MS + 100_000), ("recent-1", as_of - 10_000)):
        for event in ("created", "dispatched", "started"):
            client.xadd(
                keys.EVENTS,
                {
                    "job_id": job,
                    "event": event,
                    "status": event,
                    "script_type": "python",
                    "group": "g1",
                    "actor": "python-actor-9" if event == "started" else "",
                    "ts": str(t),
                    "attempt": "0",
                },
            )
    archive = tmp_path / "events"
    opts = ArchiveOptions(out=archive, consumer="c1", batch=500)
    with pytest.raises(RuntimeError):
        CrashBeforeAck(client, opts).run(once=True)
    # pending after the crash: the batch written and the one read ahead of it
    assert Archiver(client, opts).run(once=True).recovered == 1000

    out = tmp_path / "out"
    rc = cli(
        [
            "pipeline",
            "run",
            "--events",
            str(archive),
            "--out",
            str(out),
            "--redis-url",
            redis_url,
            "--as-of",
            str(as_of),
            "--slo-wait",
            "1",
            "--bucket",
            "600",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "report:" in captured.out and "published to Redis" in captured.out
    built = json.loads((out / "report.json").read_text())
    assert built["events"]["duplicates"] == 500
    assert built["events"]["unique"] == totals.events + 6
    totals_entry = built["totals"]
    assert totals_entry["arrivals"] == totals.jobs + 2
    assert totals_entry["errors"] == totals.errors
    assert totals_entry["retries"] == totals.retries
    assert totals_entry["dlq"] == totals.dlq
    assert totals_entry["completions"] == totals.finished
    assert [e["script_type"] for e in built["script_types"]] == ["osis", "python"]
    assert {(g["script_type"], g["group"]) for g in built["groups"]} == {
        ("osis", "g1"),
        ("python", "g1"),
    }
    assert built["stuck"]["count"] == 1
    assert built["stuck"]["jobs"][0]["job_id"] == "stuck-1"
    assert built["stuck"]["jobs"][0]["running_seconds"] == pytest.approx(
        (as_of - START_MS - 100_000) / 1000
    )
    published = client.get(keys.STATS_REPORT)
    client.close()
    assert published is not None and json.loads(published) == report.published(built)


def test_since_limits_the_window(spark: Any, tmp_path: Path) -> None:
    spec = synth.SynthSpec(
        jobs=600, rate=1.0, service_mean=0.2, actors=1, seed=4, start_ms=START_MS
    )
    events, _ = synth.simulate(spec)
    synth.write_parquet(spec, events, tmp_path / "events")
    since = START_MS + 300_000
    expected = sum(
        1 for e in events if e[4] == "created" and START_MS + round(e[0] * 1000) >= since
    )
    params = PipelineParams(events=str(tmp_path / "events"), out=tmp_path / "out", since_ms=since)
    built = report.build(analytics.run(spark, params))
    assert built["totals"]["arrivals"] == expected
    assert built["window"]["start"] == report.iso(since)
    assert built["params"]["since"] == report.iso(since)
