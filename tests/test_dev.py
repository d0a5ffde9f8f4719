"""``hero-gateway dev``: flags reach the children; the stack starts and stops cleanly."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gateway.config import resolve
from gateway.dev import child_environment
from gateway.embedded_redis import free_port
from tests.conftest import ROOT


def test_dev_flags_become_child_environment() -> None:
    routes = (("python", ("actor_queue",)), ("a", ("work_queue", "actor_queue")))
    args = argparse.Namespace(
        port=9000, compat_legacy=True, script_types=("a", "b", "python"), legacy_queues=routes
    )
    env = child_environment(args, "redis://127.0.0.1:1/0")
    assert env["HERO_PORT"] == "9000" and env["HERO_SCRIPT_TYPES"] == "a,b,python"
    assert env["HERO_REDIS_URL"] == "redis://127.0.0.1:1/0"
    child = resolve(None, env)
    assert child.port == 9000 and child.compat_legacy is True and child.legacy_queues == routes


def test_dev_runs_the_whole_stack_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    port, redis_port = free_port(), free_port()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path), HERO_LOG_LEVEL="warning")
    env.pop("HERO_REDIS_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "dev", "--port", str(port),
         "--redis-port", str(redis_port)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        body = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/rpc",
                    data=b'{"jsonrpc":"2.0","id":1,"method":"job.run","params":'
                    b'{"job":{"script_type":"python","script":"print(6*7)"},"wait":20}}',
                    headers={"content-type": "application/json"},
                )
                body = urllib.request.urlopen(request, timeout=30).read()
                break
            except OSError:
                time.sleep(0.3)
        assert b'"output":"42\\n"' in body.replace(b" ", b"")
        assert (tmp_path / "hero-gateway" / f"redis-{redis_port}" / "appendonlydir").exists()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert f"http://127.0.0.1:{port}/" in out and "stopped." in out
    finally:
        proc.kill()
        proc.wait()
