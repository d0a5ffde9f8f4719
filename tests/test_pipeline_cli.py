"""The archive / pipeline commands: arguments, clear errors, synth and archive through the CLI.

None of these start Spark: input is checked before the JVM would be launched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
import redis

from gateway.config import Config, resolve
from gateway.paths import state_dir
from gateway.pipeline.cli import add_commands
from gateway.pipeline.store import read_events
from gateway.supervisor import keys

pytestmark = pytest.mark.timeout(60)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hero-gateway")
    add_commands(p.add_subparsers(dest="command", required=True))
    return p


def test_commands_register_with_funcs() -> None:
    p = parser()
    archive = p.parse_args(
        ["archive", "--out", "x", "--once", "--max-seconds", "2", "--redis-url", "redis://h:1/0"]
    )
    cfg = resolve(archive, {})
    assert callable(archive.func) and cfg.archive_once and cfg.archive_max_seconds == 2.0
    assert cfg.redis_url == "redis://h:1/0" and cfg.archive_batch == 10_000
    assert cfg.archive_out == "x"
    run = p.parse_args(["pipeline", "run", "--master", "spark://h:7077", "--slo-wait", "5"])
    cfg = resolve(run, {})
    assert callable(run.func) and cfg.pipeline_master == "spark://h:7077"
    assert cfg.pipeline_slo_wait == 5.0 and cfg.pipeline_bucket == 3600 and cfg.redis_url is None
    syn = p.parse_args(
        ["pipeline", "synth", "--jobs", "10", "--distribution", "const", "--script-types", "a,b"]
    )
    cfg = resolve(syn, {})
    assert callable(syn.func) and cfg.synth_script_types == ("a", "b")
    assert cfg.synth_distribution == "const" and cfg.script_types == Config().script_types


def test_unset_folders_are_in_the_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --out, synth writes under the state folder, where ``pipeline run`` reads."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    rc, out, _ = run_cli(["pipeline", "synth", "--jobs", "5"], capsys)
    assert rc == 0 and f"under {state_dir() / 'events'}" in out
    assert read_events(state_dir() / "events").num_rows == 20


def test_synth_to_files_needs_no_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stale dev record stops commands that use Redis, not synth writing files."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("HERO_REDIS_URL", raising=False)
    gone = subprocess.Popen(["true"])
    gone.wait()
    state_dir().mkdir(parents=True)
    record = {"redis_url": "redis://127.0.0.1:1/0", "pid": gone.pid}
    (state_dir() / "dev.json").write_text(json.dumps(record))
    rc, _, _ = run_cli(["pipeline", "synth", "--jobs", "5", "--out", str(tmp_path / "ev")], capsys)
    assert rc == 0
    with pytest.raises(SystemExit, match="is gone"):
        run_cli(["pipeline", "synth", "--jobs", "5", "--to-redis"], capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["archive", "--batch", "0"],
        ["pipeline", "run", "--slo-wait", "-1"],
        ["pipeline", "run", "--slo-quantile", "1.5"],
        ["pipeline", "synth", "--rate", "0"],
        ["pipeline", "synth", "--distribution", "weibull"],
        ["pipeline"],
    ],
)
def test_bad_flags_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """What ``hero-gateway <argv>`` runs after its own set-up (logging is left alone here)."""
    args = parser().parse_args(argv)
    rc = args.func(args)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return rc, captured.out, captured.err


def test_pipeline_run_reports_missing_and_empty_folders(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = run_cli(["pipeline", "run", "--events", str(tmp_path / "nope")], capsys)
    assert rc == 2 and "events folder not found" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = run_cli(["pipeline", "run", "--events", str(tmp_path / "empty")], capsys)
    assert rc == 2 and "no archived events" in err
    (tmp_path / "file").write_text("x")
    rc, _, err = run_cli(["pipeline", "run", "--events", str(tmp_path / "file")], capsys)
    assert rc == 2 and "is not a folder" in err


def test_pipeline_run_rejects_bad_times_and_outputs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, _ = run_cli(["pipeline", "synth", "--out", str(tmp_path / "ev"), "--jobs", "5"], capsys)
    assert rc == 0
    rc, _, err = run_cli(
        ["pipeline", "run", "--events", str(tmp_path / "ev"), "--since", "last tuesday"], capsys
    )
    assert rc == 2 and "not a time" in err
    (tmp_path / "taken").write_text("x")
    rc, _, err = run_cli(
        ["pipeline", "run", "--events", str(tmp_path / "ev"), "--out", str(tmp_path / "taken")],
        capsys,
    )
    assert rc == 2 and "is not a folder" in err


def test_unreachable_redis_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "redis://:secret@127.0.0.1:1/0"
    rc, _, err = run_cli(["archive", "--out", str(tmp_path), "--once", "--redis-url", url], capsys)
    assert rc == 1 and "Redis unreachable at redis://:***@127.0.0.1:1/0" in err
    assert "secret" not in err


def test_synth_writes_the_archive_layout(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = run_cli(
        [
            "pipeline",
            "synth",
            "--out",
            str(tmp_path),
            "--jobs",
            "200",
            "--rate",
            "4",
            "--actors",
            "2",
            "--seed",
            "1",
            "--start",
            "2024-03-01T10:00:00Z",
        ],
        capsys,
    )
    assert rc == 0 and "800 events for 200 jobs" in out
    assert read_events(tmp_path).num_rows == 800
    assert (tmp_path / "date=2024-03-01" / "hour=10").is_dir()


def test_synth_to_redis_then_archive(
    redis_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, _ = run_cli(
        [
            "pipeline",
            "synth",
            "--to-redis",
            "--redis-url",
            redis_url,
            "--jobs",
            "50",
            "--rate",
            "10",
            "--script-types",
            "python,osis",
        ],
        capsys,
    )
    assert rc == 0
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    assert client.xlen(keys.EVENTS) == 400
    rc, _, err = run_cli(
        [
            "archive",
            "--out",
            str(tmp_path),
            "--once",
            "--redis-url",
            redis_url,
            "--batch",
            "150",
            "--log-format",
            "text",
        ],
        capsys,
    )
    assert rc == 0 and "archived 400 events" in err
    assert read_events(tmp_path).num_rows == 400
    assert client.xpending(keys.EVENTS, "archive")["pending"] == 0
    client.close()
