"""The second terminal: after ``hero-gateway dev``, every documented command finds
its Redis with no flags and no HERO_REDIS_URL; dev runs only on a Redis it started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from gateway.embedded_redis import free_port
from gateway.supervisor import keys
from tests.dev_stack import (
    HERO,
    DevStack,
    children_of,
    running_dev,
    start_dev,
    stop_dev,
    user_env,
)
from tests.server_support import http_get

SDK_ACTOR = """
from gateway.actor import Actor, JobContext
from gateway.config import resolve

actor = Actor(resolve(), instance="sdk")

@actor.handler("osis")
async def run(ctx: JobContext) -> str:
    return ctx.job.script.upper()

actor.run()
"""

HANDLER_MODULE = """
def run(ctx):
    return "handled " + ctx.job.script
"""


def hero(stack: DevStack, cwd: Path, *args: str, timeout: float = 180) -> tuple[str, str]:
    """Run ``hero-gateway ARGS`` as the user in another terminal; (stdout, stderr)."""
    done = subprocess.run(
        [HERO, *args], env=stack.env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def said_dev_redis(stack: DevStack, stderr: str) -> bool:
    return f"using the Redis of `hero-gateway dev`, {stack.redis_url}" in stderr


def run_job(stack: DevStack, script_type: str, script: str) -> str:
    job = {"script_type": script_type, "script": script}
    result = stack.rpc("job.run", {"job": job, "wait": 20})
    assert result["status"] == "finished", result
    return str(result["output"])


def wait_for_line(path: Path, text: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.1)


@pytest.mark.timeout(400)
def test_second_terminal_finds_dev_redis(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    cwd.mkdir()
    with running_dev(home) as stack:
        record = json.loads((stack.state / "dev.json").read_text())
        assert record == {"redis_url": stack.redis_url, "pid": stack.proc.pid}
        assert (stack.state / f"redis-{stack.redis_port}" / "appendonlydir").is_dir()

        # an SDK actor and a --handler module from the current folder, no flags
        (cwd / "sdk_actor.py").write_text(SDK_ACTOR)
        (cwd / "mymodule.py").write_text(HANDLER_MODULE)
        actors = []
        info = {k: v for k, v in stack.env.items() if k != "HERO_LOG_LEVEL"}  # the default
        for name, argv in (
            ("sdk", [str(Path(HERO).parent / "python"), "sdk_actor.py"]),
            ("handler", [HERO, "actor", "--script-type", "sal", "--handler", "mymodule:run"]),
        ):
            err = tmp_path / f"{name}.stderr"
            proc = subprocess.Popen(argv, env=info, cwd=cwd, stderr=err.open("wb"))
            actors.append((proc, err))
        try:
            for _, err in actors:
                wait_for_line(err, "actor ready")  # the SDK actor says it started
            assert run_job(stack, "osis", "hello") == "HELLO"
            assert run_job(stack, "sal", "x") == "handled x"
        finally:
            for proc, _ in actors:
                proc.terminate()
                proc.wait(30)
        for proc, err in actors:
            assert proc.returncode == 0 and said_dev_redis(stack, err.read_text())

        _, said = hero(stack, cwd, "archive", "--once")
        assert said_dev_redis(stack, said)
        assert list((stack.state / "events").rglob("*.parquet"))

        _, said = hero(stack, cwd, "pipeline", "run", "--quiet", "--shuffle-partitions", "2")
        assert said_dev_redis(stack, said)
        assert (stack.state / "pipeline-out" / "report.json").is_file()
        assert stack.rpc("stats.report", {})["events"]["unique"] > 0  # published to dev's Redis

        out, said = hero(stack, cwd, "keys", "create", "--name", "t", "--scope", "admin")
        assert said_dev_redis(stack, said) and out.strip()
        client = redis.Redis.from_url(stack.redis_url)
        try:
            assert client.scard(keys.API_KEYS) == 1  # in dev's Redis
        finally:
            client.close()
        written = {p.name for p in cwd.iterdir()} - {"__pycache__"}
        assert written == {"mymodule.py", "sdk_actor.py"}  # nothing beside the user's own files

        # a second dev on the taken ports fails, naming the part and the fix
        for args, names in (
            (
                ["--redis-port", str(stack.redis_port), "--port", str(free_port())],
                ("redis-server", "--redis-port"),
            ),
            (["--redis-port", str(free_port())], ("gateway", "--port", "HERO_PORT")),
        ):
            second = subprocess.run(
                [HERO, "dev", *args], env=stack.env, cwd=cwd, capture_output=True, text=True,
                timeout=60,
            )  # fmt: skip
            assert second.returncode == 1, second.stderr
            assert all(name in second.stderr for name in names), second.stderr
            assert "Address already in use" in second.stderr
        assert json.loads((stack.state / "dev.json").read_text())["pid"] == stack.proc.pid
        assert http_get(f"http://127.0.0.1:{stack.port}/healthz")[0] == 200  # first one untouched

        code, out = stop_dev(stack)
    assert code == 0 and "stopped." in out
    assert f". {Path(HERO).parent}/activate" in out  # the banner shows the second terminal
    quiet = [line for line in stack.stderr.read_text().splitlines() if '"level"' in line]
    assert quiet == []  # Ctrl-C: no Redis connection warnings, nothing above the log level
    assert not (stack.state / "dev.json").exists()


def test_a_stale_record_is_said_not_replaced_by_6379(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    state = tmp_path / "state" / "hero-gateway"
    state.mkdir(parents=True)
    url = f"redis://127.0.0.1:{free_port()}/0"
    (state / "dev.json").write_text(json.dumps({"redis_url": url, "pid": gone.pid}))
    done = subprocess.run(
        [HERO, "keys", "list"], env=user_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    message = " ".join(done.stderr.split())
    assert f"the dev Redis recorded in {state / 'dev.json'} ({url}) is gone" in message
    assert "HERO_REDIS_URL" in message and "6379" in message


def test_dev_fails_when_a_child_fails(tmp_path: Path) -> None:
    """The actor cannot start (its log folder is a file): dev exits 1 naming it."""
    (tmp_path / "not-a-folder").write_text("")
    stack = start_dev(tmp_path, "--no-gateway", "--log-dir", str(tmp_path / "not-a-folder"))
    try:
        stack.proc.wait(60)
    finally:
        if stack.proc.poll() is None:
            stop_dev(stack)
    assert stack.proc.returncode == 1
    said = stack.stderr.read_text()
    assert "dev: the actor: exited with code 1: " in said and "not-a-folder" in said


def test_a_killed_dev_takes_its_children_along(tmp_path: Path) -> None:
    """SIGKILL leaves dev no chance to stop them: the kernel does (parent-death signal)."""
    stack = start_dev(tmp_path)
    try:
        stack.wait_ready()
        children = children_of(stack.proc.pid)
        assert len(children) == 3  # redis-server, gateway, actor
    finally:
        stack.proc.kill()
        stack.proc.wait()
    deadline = time.monotonic() + 30
    while alive := [pid for pid in children if Path(f"/proc/{pid}").exists()]:
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"outlived a killed dev: {alive}")
        time.sleep(0.1)
