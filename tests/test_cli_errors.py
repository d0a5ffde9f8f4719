"""Bad input on the real CLI: one clear line naming what to change, a non-zero
exit, never a Python traceback.

Every command runs as the operator runs it (``python -m gateway.cli`` in a
subprocess), with its own HOME and state folder under tmp and an explicit
Redis URL: the machine's own Redis (6379) is never reached.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: A Redis URL nothing listens on: a command must refuse its input before connecting.
NOWHERE = "redis://127.0.0.1:1/0"


def hero(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``hero-gateway ARGS`` with HOME and the state folder under ``tmp_path``."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HERO_")}
    environ.update(HOME=str(home), XDG_STATE_HOME=str(home / "state"), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refused(done: subprocess.CompletedProcess[str], *said: str) -> None:
    """The command failed with a message saying each of ``said``, and no traceback."""
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for text in said:
        assert text in done.stderr, done.stderr


ACTOR = ("actor", "--script-type", "python", "--redis-url", NOWHERE)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("keys", "list", "--redis-url", "notaurl"), "--redis-url: not a Redis URL: notaurl"),
        (("serve", "--redis-url", "http://127.0.0.1:7432/"), "not a Redis URL: http://"),
        (("acl", "--apply", "--redis-url", "notaurl"), "--redis-url: not a Redis URL"),
        (("actor", "--script-type", "python", "--redis-url", "x"), "--redis-url: not a Redis"),
        (("archive", "--once", "--redis-url", "notaurl"), "--redis-url: not a Redis URL: notaurl"),
        (("keys", "list", "--redis-url", "redis://u:hunter2@h:99999/0"), "redis://u:***@h:99999"),
        (("serve", "--redis-url", NOWHERE, "--log-level", "loud"), "--log-level: not a log level"),
        (("serve", "--redis-url", NOWHERE, "--log-format", "xml"), "--log-format: not a log fo"),
        (("serve", "--redis-url", NOWHERE, "--port", "99999"), "--port: must be from 1 to 65535"),
        (("dev", "--redis-port", "70000"), "--redis-port: must be from 1 to 65535"),
        (("serve", "--redis-url", NOWHERE, "--max-message-bytes", "-1"), "--max-message-bytes"),
        ((*ACTOR, "--concurrency", "0"), "--concurrency: must be at least 1"),
        ((*ACTOR, "--concurrency", "-3"), "--concurrency: must be at least 1"),
        ((*ACTOR, "--job-memory-mb", "-5"), "--job-memory-mb: must be at least 1"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_a_bad_flag_is_a_usage_error(tmp_path: Path, argv: tuple[str, ...], said: str) -> None:
    done = hero(tmp_path, *argv)
    refused(done, said)
    assert done.returncode == 2 and "hunter2" not in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("HERO_LOG_LEVEL", "loud", "HERO_LOG_LEVEL: not a log level: 'loud'"),
        ("HERO_REDIS_URL", "http://u:hunter2@h/", "HERO_REDIS_URL: not a Redis URL: http://u:***@"),
    ],
)
def test_a_bad_variable_is_one_line(tmp_path: Path, variable: str, value: str, said: str) -> None:
    done = hero(tmp_path, "keys", "list", env={variable: value})
    refused(done, said)
    assert done.stderr.count("\n") == 1 and "hunter2" not in done.stderr


def test_synth_names_jobs_when_they_reach_before_1970(tmp_path: Path) -> None:
    done = hero(
        tmp_path, "pipeline", "synth", "--out", str(tmp_path / "ev"), "--jobs", "1" + "0" * 14
    )
    refused(done, "--jobs 100000000000000 at --rate 1.0", "lower --jobs")
