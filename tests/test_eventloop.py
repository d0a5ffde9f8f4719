"""eventloop: the chosen loop is the one the coroutine runs on."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from gateway import eventloop
from gateway.config import resolve


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_uvloop_and_auto_run_on_uvloop() -> None:
    assert eventloop.run(loop_module(), "uvloop") == "uvloop"
    assert eventloop.run(loop_module(), "auto") == "uvloop"  # installed with the package


def test_asyncio_runs_on_the_default_loop() -> None:
    assert eventloop.run(loop_module(), "asyncio") == "asyncio"


def test_setting_rejects_unknown_loops() -> None:
    assert resolve(environ={"HERO_EVENT_LOOP": "UVLoop"}).event_loop == "uvloop"
    with pytest.raises(SystemExit, match="HERO_EVENT_LOOP: not an event loop"):
        resolve(environ={"HERO_EVENT_LOOP": "trio"})


def test_cli_flag_error_is_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "serve", "--event-loop", "trio"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "--event-loop" in proc.stderr and "Traceback" not in proc.stderr
