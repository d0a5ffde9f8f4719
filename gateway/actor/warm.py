"""Sandboxes started before their job arrives.

Starting a sandbox costs time that does not depend on the job: forking and
exec'ing bwrap, and moving it into the job's cgroup (on cgroup v1 the first
move after a quiet spell waits for an RCU grace period, 5-25 ms on these
machines). So the python executor keeps bwrap processes ready, each already
in a cgroup of its own and blocked reading the rest of its options from a
pipe (``bwrap --args FD``, see Sandbox.argv). A job takes one, sends its
folder down that pipe and its environment down a second one (read after,
into a file only the job's uid reads: Sandbox.env_file), and a replacement
starts in the background. Nothing runs in a ready sandbox before a job is sent to it, and
one whose actor dies reads end-of-file and stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.actor.cgroup import JobCgroup

log = logging.getLogger("gateway.actor")


@dataclass
class Ready:
    """A bwrap process waiting for its job's options on ``args_fd``, and then
    for the job's environment on ``env_fd``."""

    proc: asyncio.subprocess.Process
    cgroup: JobCgroup | None
    args_fd: int
    env_fd: int

    def launch(self, args: bytes, env: bytes, cpu_seconds: int | None) -> None:
        """Set a per-process CPU limit (``cpu_seconds``; None where the job's
        cgroup limits it), then let it go with ``args`` and ``env`` (see
        Sandbox.job_args and Sandbox.env_file). bwrap reads the options to
        their end first, then the environment to its end: a long write to
        either cannot block for good."""
        try:
            if cpu_seconds is not None:
                resource.prlimit(self.proc.pid, resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
            _send(self.args_fd, args)
            os.close(self.args_fd)  # end-of-file: bwrap goes on, to the environment
            self.args_fd = -1
            fit(self.env_fd, len(env))
            _send(self.env_fd, env)
        finally:
            self._close_all()

    def _close_all(self) -> None:
        for fd in (self.args_fd, self.env_fd):
            if fd >= 0:
                os.close(fd)
        self.args_fd = self.env_fd = -1

    async def discard(self) -> None:
        """Kill it unused. The process goes first, while it still waits for its
        options: with its pipe closed first, bwrap goes on with the options it
        has and forks, and a child forked as the parent is killed can miss
        ``--die-with-parent`` and live on holding our stdout and stderr pipes,
        which asyncio's ``wait()`` waits for. The cgroup, where there is one,
        takes whatever was forked all the same, before the wait."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self._close_all()
        if self.cgroup is not None:
            await asyncio.to_thread(self.cgroup.remove)
        await self.proc.wait()


def fit(fd: int, size: int) -> None:
    """Grow the pipe ``fd`` to hold ``size`` bytes, where Linux lets it. bwrap
    reads the environment only once its namespaces and mounts are made (5-25
    ms), and ``_send`` writes from the event loop: an environment past the
    pipe's 64 KiB would hold every other job of the actor until then."""
    with contextlib.suppress(OSError):
        if size > fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)


def _send(fd: int, data: bytes) -> None:
    """All of ``data`` down the pipe ``fd``; a reader that has exited already
    (EPIPE) is left to its wait, whose exit code says why."""
    with contextlib.suppress(BrokenPipeError):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


class WarmPool:
    """Up to ``size`` ready sandboxes; ``take`` starts one on the spot when none is."""

    def __init__(self, start: Callable[[], Awaitable[Ready]], size: int) -> None:
        self._start = start
        self._size = size
        self._ready: list[Ready] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False

    async def take(self) -> Ready:
        ready = self._ready.pop() if self._ready else await self._start()
        self._refill()
        return ready

    def _refill(self) -> None:
        while not self._closed and len(self._ready) + len(self._starting) < self._size:
            task = asyncio.create_task(self._add())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _add(self) -> None:
        try:
            ready = await self._start()
        except Exception:  # the next take starts one itself, and reports why it fails
            log.warning("could not start a sandbox ahead of its job", exc_info=True)
            return
        if self._closed:
            await ready.discard()
        else:
            self._ready.append(ready)

    async def close(self) -> None:
        """Discard every ready sandbox, and those still starting once they are."""
        self._closed = True
        await asyncio.gather(*self._starting)
        ready, self._ready = self._ready, []
        await asyncio.gather(*(r.discard() for r in ready))
