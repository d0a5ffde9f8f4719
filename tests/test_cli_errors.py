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
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.embedded_redis import EmbeddedRedis, free_port
from tests.conftest import ROOT
from tests.test_acl import PASSWORDS, apply_as

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
        ((*ACTOR, "--job-uid", "0"), "--job-uid: must be at least 1"),  # jobs as root
        (("archive", "--consumer", "c\udcff", "--redis-url", NOWHERE), "--consumer: not UTF-8"),
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


@pytest.mark.parametrize(
    "argv",
    [
        ("--rate", "1e-320"),  # jobs / rate is infinite
        ("--rate", "1e-300", "--start", "2026-01-01T00:00:00Z"),  # arrivals past any date
        ("--service-mean", "1e300", "--start", "2026-01-01T00:00:00Z"),  # ends past any date
    ],
    ids=" ".join,
)
def test_synth_refuses_a_run_that_would_end_past_any_date(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    done = hero(tmp_path, "pipeline", "synth", "--out", str(tmp_path / "ev"), "--jobs", "3", *argv)
    refused(done, "raise --rate")
    assert not list((tmp_path / "ev").glob("**/*.parquet"))


# -- what Redis answers: refused (and what to change) or unreachable, one line -----------


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A redis-server of this module's own, with the ACL users applied."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), port=free_port(), appendonly=False)
    server.start()
    try:
        assert apply_as(server.url).returncode == 0
        yield server
    finally:
        server.stop()


def as_user(server: EmbeddedRedis, user: str, password: str, db: int = 0) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{server.port}/{db}"


ADMIN = ("hero-admin", PASSWORDS["HERO_ACL_ADMIN_PASSWORD"])
WRONG = ("hero-admin", "not-the-password")
ACTOR_USER = ("hero-actor", PASSWORDS["HERO_ACL_ACTOR_PASSWORD"])

#: A command, the user and database it connects as, and what it must say.
REFUSALS: dict[str, tuple[tuple[str, ...], tuple[str, str], int, str]] = {
    "keys-password": (
        ("keys", "list"),
        WRONG,
        0,
        "refused user 'hero-admin' at redis://hero-admin:***@",
    ),
    "serve-password": (("serve",), WRONG, 0, "Redis refused user 'hero-admin'"),
    "archive-password": (
        ("archive", "--once"),
        WRONG,
        0,
        "fix the user or password of --redis-url",
    ),
    "keys-db": (("keys", "list"), ADMIN, 99, "Redis refused database 99 at"),
    "serve-db": (("serve",), ADMIN, 99, "Redis refused database 99 at"),
    "keys-noperm": (
        ("keys", "list"),
        ACTOR_USER,
        0,
        "no permissions to run the 'smembers' command",
    ),
}


@pytest.mark.parametrize(("argv", "user", "db", "said"), REFUSALS.values(), ids=list(REFUSALS))
def test_a_refusal_says_what_to_change(
    locked: EmbeddedRedis,
    tmp_path: Path,
    argv: tuple[str, ...],
    user: tuple[str, str],
    db: int,
    said: str,
) -> None:
    command = " ".join(a for a in argv if not a.startswith("-"))
    if command == "archive":  # the pipeline's commands say "error:", in red on a terminal
        argv = (*argv, "--out", str(tmp_path / "events"))
    done = hero(tmp_path, *argv, "--redis-url", as_user(locked, *user, db=db))
    refused(done, "error: " if command == "archive" else f"hero-gateway {command}: ", said)
    assert done.returncode == 1 and "unreachable" not in done.stderr
    assert user[1] not in done.stderr


def test_a_refusal_names_the_user_and_hides_the_password_of_the_query(
    locked: EmbeddedRedis, tmp_path: Path
) -> None:
    """redis-py reads the user and password from the query string too."""
    user, password = WRONG
    url = f"redis://127.0.0.1:{locked.port}/0?username={user}&password={password}"
    done = hero(tmp_path, "keys", "list", "--redis-url", url)
    refused(done, f"Redis refused user {user!r} at redis://127.0.0.1:{locked.port}/0?username=")
    assert done.returncode == 1 and password not in done.stderr and "password=***" in done.stderr


def test_an_actor_with_a_wrong_password_exits_saying_so(
    locked: EmbeddedRedis, tmp_path: Path
) -> None:
    """Not "redis unavailable; retrying" every 5 s for ever: no wait fixes a password."""
    url = as_user(locked, *WRONG)
    done = hero(tmp_path, "actor", "--script-type", "python", "--sandbox", "off",
                "--log-dir", str(tmp_path / "logs"), "--redis-url", url, timeout=30)  # fmt: skip
    refused(done, "hero-gateway actor: Redis refused user 'hero-admin'")
    assert done.returncode == 1 and "retrying" not in done.stderr


def test_an_unreachable_redis_is_still_said_so(tmp_path: Path) -> None:
    done = hero(tmp_path, "keys", "list", "--redis-url", "redis://:hunter2@127.0.0.1:1/0")
    refused(done, "hero-gateway keys list: Redis unreachable at redis://:***@127.0.0.1:1/0")
    assert "hunter2" not in done.stderr


def test_revoking_no_such_key_names_the_command(redis_url: str, tmp_path: Path) -> None:
    done = hero(tmp_path, "keys", "revoke", "--name", "nosuch", "--redis-url", redis_url)
    assert done.returncode == 1
    assert done.stderr == "hero-gateway keys revoke: no API key named 'nosuch'\n"


# -- the environment: folders, a reader that went away ------------------------------------


def test_a_log_dir_that_cannot_be_made_names_the_setting(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = hero(tmp_path, "actor", "--script-type", "python", "--sandbox", "off",
                "--log-dir", str(tmp_path / "file" / "logs"), "--redis-url", NOWHERE)  # fmt: skip
    refused(done, "hero-gateway actor: cannot make the folder for job logs (--log-dir")
    assert done.returncode == 1


@pytest.mark.parametrize("argv", [("config",), ("keys", "list", "--json")])
def test_a_closed_pipe_ends_quietly(redis_url: str, tmp_path: Path, argv: tuple[str, ...]) -> None:
    """``hero-gateway config | head -1``: the reader is gone before the output is written."""
    read, write = os.pipe()
    os.close(read)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERO_")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", *argv, "--redis-url", redis_url],
            env=dict(env, HOME=str(home), XDG_STATE_HOME=str(home / "state")),
            cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode != 0
