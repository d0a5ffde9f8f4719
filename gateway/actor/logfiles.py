"""Where a job's log file lives in the actor's log folder, and when it goes.

**Names.** A job's log is ``<log folder>/<job id>.log``. Job ids come from
clients and from producers we did not write: an outside LPUSH is adopted
whatever its id (hero.lua ``adopt``), so an id like ``../../x`` would have the
actor write its job's output outside its folder. An id that is not an
identifier (``IDENT_PATTERN``: letters, digits, ``_ . -``, not starting
with a dot, no ``/``) names no file: that job's log is
``id-<sha256 of the id>.log``, the same file for every attempt. The job
hash's ``log_path`` names it either way.

**Retention.** An ended job's hash, reply and Redis log live ``HERO_JOB_TTL``
seconds (hero.lua ``retain``); its file goes too. At start and every
``SWEEP_EVERY`` seconds, ``sweep`` removes the ``*.log`` files in the folder
that nobody wrote for longer than that TTL and whose job Redis no longer
has. A job's last write comes before its end, and its hash lives a TTL after
the end, so only expired jobs' files qualify; the check against Redis keeps
the log of a job still running after a TTL of silence. A TTL of 0 keeps
everything, as it does in Redis. Only regular files named as above are
touched: nothing in sub-folders, no symbolic links.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass

from gateway.model.job import IDENT_PATTERN

#: Seconds between two sweeps of the log folder by one actor process.
SWEEP_EVERY = 3600.0

#: Names per Redis round trip when asking which jobs are still there.
BATCH = 500

_IDENT = re.compile(IDENT_PATTERN)
_LOG_FILE = re.compile(f"({IDENT_PATTERN})\\.log")
_HASHED = re.compile("id-[0-9a-f]{64}")

log = logging.getLogger("gateway.actor.logfiles")


def file_name(job_id: str) -> str:
    """The log file's name for ``job_id``: safe in any folder, one per job."""
    if _IDENT.fullmatch(job_id) and not _HASHED.fullmatch(job_id):
        return job_id + ".log"
    return "id-" + hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest() + ".log"


@dataclass(frozen=True)
class Stale:
    """A log file old enough to go; ``job_id`` is None for a hashed name."""

    path: str
    job_id: str | None


def stale(folder: str, ttl: int, now: float) -> Iterator[Stale]:
    """The job log files in ``folder`` nobody wrote for ``ttl`` seconds."""
    try:
        entries = os.scandir(folder)
    except FileNotFoundError:
        return
    with entries:
        for entry in entries:
            m = _LOG_FILE.fullmatch(entry.name)
            if not m or not entry.is_file(follow_symlinks=False):
                continue
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except FileNotFoundError:  # another actor's sweep took it
                continue
            if now - mtime > ttl:
                stem = m[1]
                yield Stale(entry.path, None if _HASHED.fullmatch(stem) else stem)


#: Which of these job ids Redis still has a hash for (``retention.JobLookup.present``).
Present = Callable[[list[str]], Awaitable[Collection[str]]]


def _unlink(paths: list[str]) -> int:
    removed = 0
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:  # another actor's sweep took it
            continue
        removed += 1
    return removed


async def sweep(folder: str, ttl: int, present: Present, now: float | None = None) -> int:
    """Remove the expired jobs' log files in ``folder``; how many went. The
    folder is read in a thread: it may hold a week of jobs."""
    if ttl <= 0:
        return 0
    at = time.time() if now is None else now
    found = await asyncio.to_thread(lambda: list(stale(folder, ttl, at)))
    removed = 0
    for i in range(0, len(found), BATCH):
        chunk = found[i : i + BATCH]
        kept = await present([f.job_id for f in chunk if f.job_id is not None])
        removed += await asyncio.to_thread(_unlink, [f.path for f in chunk if f.job_id not in kept])
    if removed:
        log.info("expired job logs removed", extra={"count": removed, "log_dir": folder})
    return removed
