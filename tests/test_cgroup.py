"""Job cgroups on this machine's real cgroup hierarchy: limits, who is inside, removal."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.actor.cgroup import PREFIX, Cgroups, JobCgroup, detect
from tests.helpers import until


@pytest.fixture
def cgroups() -> Cgroups:
    found = detect()
    assert found is not None, "these machines let the actor make cgroups"
    return found


@pytest.fixture
def group(cgroups: Cgroups) -> Iterator[JobCgroup]:
    cg = cgroups.create("test", 64 << 20, 5)
    yield cg
    cg.remove()


def test_the_process_limit_counts_every_process_and_says_it_was_hit(group: JobCgroup) -> None:
    assert group.limit_hit() is None
    script = "for i in $(seq 10); do sleep 30 & done; wait"
    proc = subprocess.Popen(["sh", "-c", script], preexec_fn=group.add, stderr=subprocess.PIPE)
    try:
        assert b"fork" in (proc.stderr.readline() if proc.stderr else b"").lower()
        assert group.limit_hit() == "processes"
        assert 1 < len(group.pids_inside()) <= 5
    finally:
        group.remove()  # kills the shell and its sleepers
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert not group.pids.exists() and not group.memory.exists()


def test_a_process_can_be_moved_in_by_pid_and_is_killed_on_removal(group: JobCgroup) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    group.add(proc.pid)
    assert group.pids_inside() == [proc.pid]
    group.remove()
    assert proc.wait(5) == -9


def test_cgroups_left_by_a_dead_actor_are_swept(cgroups: Cgroups) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = [
        parent / f"{PREFIX}{dead.pid}-old"
        for parent in (cgroups.memory_parent, cgroups.pids_parent, cgroups.cpu_parent)
        if parent is not None
    ]
    for folder in stale:
        folder.mkdir()
    detect()
    assert not any(folder.exists() for folder in stale)


def test_the_cpu_time_of_every_process_inside_is_counted(group: JobCgroup) -> None:
    """Two busy children of a shell: the count is their sum, the shell's own is tiny."""
    assert group.cpu is not None, "these machines let the actor count CPU time per job"
    assert group.cpu_seconds() < 0.1
    script = "busy() { while :; do :; done; }; busy & busy & wait"
    proc = subprocess.Popen(["sh", "-c", script], preexec_fn=group.add)
    try:
        until(lambda: group.cpu_seconds() >= 0.5, 30, "the CPU time of the job is counted")
        assert len(group.pids_inside()) == 3
        group.kill()
        assert group.pids_inside() == [] and proc.wait(5) == -9
        assert group.cpu_seconds() >= 0.5  # what the dead used still counts
    finally:
        group.remove()
        proc.wait()


def test_cgroup_v2_cpu_time_is_read_from_cpu_stat(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    group = JobCgroup((tmp_path,), tmp_path, tmp_path, tmp_path, v2=True)
    assert group.cpu_seconds() == 2.5
