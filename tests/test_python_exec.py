"""The python executor's job folders on the host: a dead actor's are removed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from gateway.actor import python_actor
from gateway.actor.python_exec import FOLDER_PREFIX, orphaned_folders
from gateway.config import Config
from gateway.supervisor import Supervisor
from tests.helpers import eventually, job


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_only_folders_of_pids_that_run_no_more_are_orphans(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    orphan = tmp_path / f"{FOLDER_PREFIX}{dead}-abc"
    (orphan / "deep" / "er").mkdir(parents=True)
    kept = [tmp_path / f"{FOLDER_PREFIX}{alive}-xyz", tmp_path / f"{FOLDER_PREFIX}x-1",
            tmp_path / f"{FOLDER_PREFIX}0-1", tmp_path / f"other-{dead}-1"]  # fmt: skip
    for folder in kept:
        folder.mkdir()
    (tmp_path / f"{FOLDER_PREFIX}{dead}-file").write_text("not a folder")
    assert orphaned_folders(tmp_path) == [orphan]


async def test_an_actor_that_starts_removes_what_a_killed_actor_left(
    sup: Supervisor, config: Config, tmp_path: Path
) -> None:
    """An actor killed with SIGKILL mid-job cannot remove its job's folder;
    the next actor to start on the machine does."""
    env = dict(os.environ, HERO_REDIS_URL=config.redis_url or "",
               HERO_LOG_DIR=config.log_dir or "", TMPDIR=tempfile.gettempdir())  # fmt: skip
    argv = [sys.executable, "-m", "gateway.cli", "actor", "--script-type", "python"]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    try:
        created = await sup.create(job("import time; time.sleep(60)", timeout=90))
        await sup.start(created["job_id"])
        tmp = Path(tempfile.gettempdir())
        pattern = f"{FOLDER_PREFIX}{proc.pid}-*"

        async def its_folder() -> bool:
            return any(tmp.glob(pattern))

        await eventually(its_folder, within=30)
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 15)
        left = list(tmp.glob(pattern))
        assert left, "the killed actor's folder is still there"
        python_actor(config)  # the next actor, as it starts
        assert not any(folder.exists() for folder in left)
    finally:
        proc.kill()
        proc.wait()
