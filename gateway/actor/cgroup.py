"""One cgroup per job, so its limits hold for the whole job, not per process.

The actor makes each job's cgroup under its own (``/proc/self/cgroup``):
cgroup v2 where its own cgroup may enable the ``memory`` and ``pids``
controllers for children, else cgroup v1's ``memory`` and ``pids``
hierarchies, plus ``cpuacct`` where it is writable too. The job's first
process enters it before it execs (so nothing it forks escapes), and after
the job every process left in it is killed and the folder removed. ``detect``
returns None where neither is writable; the executor then falls back to
per-process rlimits.

The kernel enforces memory and processes. CPU time it only counts (v2's
``cpu.stat``, which every v2 cgroup has, or v1's ``cpuacct.usage``): the
executor watches that count and kills the job past its limit. Without it
(v1 without a writable ``cpuacct``) CPU time stays a per-process rlimit.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "hero-job-"


def _own(hierarchy: str) -> str | None:
    """Our cgroup path in a hierarchy ("" for v2's unified one), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if hierarchy in names.split(","):
            return path
    return None


def _writable(parent: Path) -> bool:
    probe = parent / f"{PREFIX}{os.getpid()}-probe"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def _sweep(parent: Path) -> None:
    """Remove job cgroups that actors killed with SIGKILL left behind (theirs
    are named after their pid); a cgroup still in use refuses rmdir."""
    for child in parent.glob(f"{PREFIX}*"):
        m = re.match(rf"{PREFIX}(\d+)-", child.name)
        if m and not Path(f"/proc/{m[1]}").exists():
            with contextlib.suppress(OSError):
                child.rmdir()


@dataclass(frozen=True)
class Cgroups:
    """Where job cgroups go: ``version`` "v2" (one folder) or "v1" (memory,
    pids, and cpuacct if ``cpu_parent``: None where CPU time is not counted)."""

    version: str
    memory_parent: Path
    pids_parent: Path
    cpu_parent: Path | None = None

    def describe(self) -> str:
        if self.version == "v2":
            return f"cgroup v2 under {self.memory_parent}"
        parents = [self.memory_parent, self.pids_parent]
        parents += [self.cpu_parent] if self.cpu_parent else []
        return f"cgroup v1 under {', '.join(map(str, parents))}"

    def create(self, name: str, memory_max: int, procs: int) -> JobCgroup:
        """A new job cgroup limited to ``memory_max`` bytes (no swap) and ``procs`` tasks."""
        full = f"{PREFIX}{os.getpid()}-{name}"
        if self.version == "v2":
            folder = self.memory_parent / full
            folder.mkdir()
            cg = JobCgroup((folder,), folder, folder, folder, v2=True)
            _set(folder, "memory.max", memory_max)
            _set(folder, "memory.swap.max", 0, optional=True)
        else:
            memory, pids = self.memory_parent / full, self.pids_parent / full
            cpu = self.cpu_parent / full if self.cpu_parent else None
            cg = JobCgroup((memory, pids, *([cpu] if cpu else [])), memory, pids, cpu, v2=False)
            for folder in cg.folders:
                folder.mkdir()
            _set(cg.memory, "memory.limit_in_bytes", memory_max)
            _set(cg.memory, "memory.memsw.limit_in_bytes", memory_max, optional=True)
        _set(cg.pids, "pids.max", procs)
        return cg


def _set(folder: Path, name: str, value: int, *, optional: bool = False) -> None:
    try:
        (folder / name).write_text(str(value))
    except FileNotFoundError:
        if not optional:
            raise


@dataclass(frozen=True)
class JobCgroup:
    folders: tuple[Path, ...]
    memory: Path
    pids: Path
    #: Where its CPU time is counted; None where it is not (see the module's docstring).
    cpu: Path | None
    v2: bool

    def add(self, pid: int = 0) -> None:
        """Move a process in (0: the caller). Only os calls, no locks: it also
        serves as a ``preexec_fn``, in the child between fork and exec."""
        for folder in self.folders:
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)

    def pids_inside(self) -> list[int]:
        try:
            text = (self.pids / "cgroup.procs").read_text()
        except FileNotFoundError:  # removed already
            return []
        return [int(pid) for pid in text.split()]

    def cpu_seconds(self) -> float:
        """CPU time (user and system) all its processes used so far, those gone included."""
        if self.cpu is None:
            return 0.0
        if self.v2:
            return _count(self.cpu / "cpu.stat", "usage_usec") / 1e6
        return int((self.cpu / "cpuacct.usage").read_text()) / 1e9

    def limit_hit(self) -> str | None:
        """Which limit the kernel enforced on this job, if any."""
        if _count(self.memory / ("memory.events" if self.v2 else "memory.oom_control"), "oom_kill"):
            return "memory"
        if _count(self.pids / "pids.events", "max"):
            return "processes"
        return None

    def kill(self) -> None:
        """SIGKILL every process inside, again until none is left (what they fork meanwhile)."""
        deadline = time.monotonic() + 5
        while pids := self.pids_inside():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes {pids} outlived their job cgroup")
            time.sleep(0.005)

    def remove(self) -> None:
        """Kill whatever is still inside, then remove the folders (again: nothing)."""
        self.kill()
        deadline = time.monotonic() + 5
        for folder in self.folders:
            while folder.exists():  # the last exits may still be in flight
                try:
                    folder.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.005)


def _count(path: Path, key: str) -> int:
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def detect() -> Cgroups | None:
    """The cgroups this process can make job cgroups in, or None."""
    if (ROOT / "cgroup.controllers").exists():  # the unified hierarchy only
        own = ROOT / (_own("") or "/").lstrip("/")
        control = own / "cgroup.subtree_control"
        with contextlib.suppress(OSError):
            if not {"memory", "pids"} <= set(control.read_text().split()):
                control.write_text("+memory +pids")  # EBUSY while processes sit in `own`
            if _writable(own):
                _sweep(own)
                return Cgroups("v2", own, own, own)
        return None
    mem_path, pids_path = _own("memory"), _own("pids")
    if mem_path is None or pids_path is None:
        return None
    memory = ROOT / "memory" / mem_path.lstrip("/")
    pids = ROOT / "pids" / pids_path.lstrip("/")
    if not (_writable(memory) and _writable(pids)):
        return None
    cpu_path = _own("cpuacct")
    cpu = None if cpu_path is None else ROOT / "cpuacct" / cpu_path.lstrip("/")
    if cpu is not None and not _writable(cpu):
        cpu = None
    for parent in (memory, pids, cpu):
        if parent is not None:
            _sweep(parent)
    return Cgroups("v1", memory, pids, cpu)
