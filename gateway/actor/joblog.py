"""A job's log: one file on disk, capped, with its tail kept in memory.

Everything a job logs goes through ``JobLog.write``: the python executor's
stdout and stderr pumps and ``JobContext.log``. The file stops growing at
``limit`` bytes (with a last line saying so), so a job cannot fill the disk,
and the actor never reads the file back: ``text()`` is the tail it kept.
"""

from __future__ import annotations

from pathlib import Path


class JobLog:
    def __init__(self, path: Path, limit: int, tail: int = 65536) -> None:
        self.path = path
        self.limit = limit
        self.tail_size = tail
        self._tail = bytearray()
        self._file = path.open("ab")
        self._written = self._file.tell()  # an earlier attempt's lines count too
        self._cut = False

    def write(self, chunk: bytes) -> None:
        """Append to the file (flushed, so readers see it at once) and the tail."""
        if self._cut or not chunk:
            return
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
        """The last ``tail`` bytes written by this attempt."""
        return self._tail.decode("utf-8", "replace")

    def close(self) -> None:
        self._file.close()
