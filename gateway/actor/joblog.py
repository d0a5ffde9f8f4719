"""A run's log: one file on disk (``logfiles`` names it), capped, its tail kept in memory.

Everything a job logs goes through ``JobLog.write``: the python executor's
stdout and stderr pumps and ``JobContext.log``. The file stops growing at
``limit`` bytes (with a last line saying so), so a job cannot fill the disk,
and the actor never reads the file back: ``text()`` is the tail it kept.

The file is opened (created) by the first write, not for every job: most
in-process handlers log nothing, and creating a file was most of their
actor's CPU per job. Every reader takes an absent file for an empty one
(``LiveLog`` reads its size as 0; the job's tail is this execution's writes,
none). The python executor opens the log before its job starts (``open``),
so a script job whose log cannot be written never runs, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO


class LogUnwritable(Exception):
    """The job's log file cannot be opened: the job ends with an error saying so."""


class JobLog:
    def __init__(self, path: str, limit: int, tail: int = 65536) -> None:
        self.path = path
        self.limit = limit
        self.tail_size = tail
        self._tail = bytearray()
        self._file: BinaryIO | None = None
        self._written = 0
        self._cut = False
        self._closed = False
        #: Called once, just before the file is opened (the live log starts looking).
        self.on_open: Callable[[], None] | None = None

    def open(self) -> None:
        """Open (create) the file now if no write did yet; its bytes from an
        earlier execution of the run (adopted again) count against ``limit`` too."""
        if self._file is not None:
            return
        if self._closed:  # as a write to a closed file did: no file made after the job
            raise ValueError("the job's log is closed")
        if self.on_open is not None:
            self.on_open()
        try:
            self._file = open(self.path, "ab")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise LogUnwritable(f"{self.path}: {exc.strerror}") from exc
        self._written = self._file.tell()

    def write(self, chunk: bytes) -> None:
        """Append to the file (flushed, so readers see it at once) and the tail."""
        if self._cut or not chunk:
            return
        if self._file is None:
            self.open()
            assert self._file is not None
        part = chunk[: max(0, self.limit - self._written)]
        if len(part) < len(chunk):
            part += f"\n[log cut at {self.limit} bytes]\n".encode()
            self._cut = True
        self._file.write(part)
        self._file.flush()
        self._written += len(part)
        self._tail += part
        del self._tail[: -self.tail_size]

    def text(self) -> str:
        """The last ``tail`` bytes written by this execution."""
        return self._tail.decode("utf-8", "replace") if self._tail else ""

    def close(self) -> None:
        self._closed = True
        # the hook is the live log's, whose report may hold this JobLog: dropped,
        # the job's objects go by reference counting, not a collection per job
        self.on_open = None
        if self._file is not None:
            self._file.close()
