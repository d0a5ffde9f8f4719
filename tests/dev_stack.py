"""``hero-gateway dev`` run as a user runs it, for the tests that play the second terminal.

The stack gets a private HOME and state folder and free ports (never 6379 or
8080), and no HERO_REDIS_URL: the commands under test must find its Redis the
way a user's do. It is stopped with SIGINT sent to its process group, which is
what a terminal's Ctrl-C does, and its children are then checked gone by pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.embedded_redis import free_port
from tests.server_support import http_post

BIN = Path(sys.executable).parent
HERO = str(BIN / "hero-gateway")


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment: their own HOME and state folder, no HERO_* of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERO_")}
    env.update(HOME=str(home), XDG_STATE_HOME=str(home / "state"), HERO_LOG_LEVEL="warning")
    env.update(extra)
    return env


@dataclass
class DevStack:
    proc: subprocess.Popen[bytes]
    port: int
    redis_port: int
    env: dict[str, str]
    stderr: Path

    @property
    def state(self) -> Path:
        return Path(self.env["XDG_STATE_HOME"]) / "hero-gateway"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def rpc(self, method: str, params: Mapping[str, Any], timeout: float = 30) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        status, raw, _ = http_post(f"http://127.0.0.1:{self.port}/rpc", body, timeout=timeout)
        reply = json.loads(raw)
        assert status == 200 and "result" in reply, reply
        return reply["result"]

    def wait_ready(self, within: float = 60) -> None:
        """Until a python job runs end to end (gateway, Redis and actor all up)."""
        deadline = time.monotonic() + within
        while True:
            assert self.proc.poll() is None, self.stderr.read_text()
            try:
                job = {"script_type": "python", "script": "print(6 * 7)"}
                if self.rpc("job.run", {"job": job, "wait": 20})["output"] == "42\n":
                    return
            except (OSError, ValueError, AssertionError):
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.3)


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def start_dev(home: Path, *args: str, cwd: Path | None = None) -> DevStack:
    port, redis_port = free_port(), free_port()
    env = user_env(home, HERO_PORT=str(port))
    err = home / "dev.stderr"
    proc = subprocess.Popen(
        [HERO, "dev", "--redis-port", str(redis_port), *args],
        env=env, cwd=cwd or home, stdout=subprocess.PIPE, stderr=err.open("wb"),
        start_new_session=True,
    )  # fmt: skip
    return DevStack(proc, port, redis_port, env, err)


def stop_dev(stack: DevStack) -> tuple[int, str]:
    """Ctrl-C as a terminal sends it (to the foreground group); returns (code, stdout)."""
    children = children_of(stack.proc.pid)
    try:
        os.killpg(stack.proc.pid, signal.SIGINT)
        out, _ = stack.proc.communicate(timeout=30)
    finally:
        if stack.proc.poll() is None:
            stack.proc.kill()
            stack.proc.wait()
        for pid in children:  # dev must have stopped them: any left is killed and reported
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            raise AssertionError(f"dev left its child {pid} running")
    return stack.proc.returncode, out.decode()


@contextmanager
def running_dev(home: Path, *args: str) -> Iterator[DevStack]:
    stack = start_dev(home, *args)
    try:
        stack.wait_ready()
        yield stack
    finally:
        if stack.proc.poll() is None:
            stop_dev(stack)
