"""Where a job's log file lives in the actor's log folder, and when it goes.

**Names.** A run's log is ``<log folder>/<job id>~<run>.log``, ``run`` being
the run's token (hero.lua ``take``): one file per run, which the job hash's
``log_path`` names. Not one per job id: an id is taken again once its job is
deleted or expired (by anyone, ids are the callers'), and the file of the
earlier job, still on the disk until the sweep, became the later job's log:
its lines sat in the later job's file and its bytes counted against the later
run's limit (a deleted job that had filled its log left the next owner's
``job.logs`` with only the cut notice). A run without a token (one taken
before runs had them, or a token that is not digits: an adopted run's is read
from the job hash, anyone's to write) logs to ``<job id>.log``. A producer
that rewrites a running job's ``run`` (the Hero protocol lets it rewrite any
job) can make that job's adopted run write into another run's file of the
same id, inside the folder, as before runs had files of their own.

Job ids come from clients and from producers we did not write: an outside
LPUSH is adopted whatever its id (hero.lua ``adopt``), so an id like
``../../x`` would have the actor write its job's output outside its folder.
An id that is not an identifier (``IDENT_PATTERN``: letters, digits,
``_ . -``, not starting with a dot, no ``/``), or that starts with ``id-``, is
written out instead: ``id-<hex of the id's bytes>``, or ``id-sha256-<its
SHA-256>`` when that would pass the file system's 255-byte limit.

**Retention.** An ended job's hash, reply and Redis log live ``HERO_JOB_TTL``
seconds (hero.lua ``retain``); its file goes too. At start and every
``SWEEP_EVERY`` seconds, ``sweep`` removes the job log files in the folder
that nobody wrote for longer than that TTL and whose job Redis no longer has
(``supervisor/retention.py`` asks). A job's last write comes before its end,
and its hash lives a TTL after the end, so only expired jobs' files go; the
check against Redis keeps the log of a job still running after a TTL of
silence. Only a file named ``id-sha256-…`` cannot name its job: it goes on
its age alone. A TTL of 0 keeps everything, as it does in Redis.

**Whose folder.** The sweep removes files only in a folder that carries
``MARKER``, which it writes only into an empty folder (a new one). A folder
that held anything when the actors first used it (an operator's
``HERO_LOG_DIR`` shared with another program, whose ``syslog.log`` looks like
a job log; or one an earlier version filled) is never swept until an operator
creates the marker: the actor's log says so. Only regular files are touched,
never links or sub-folders.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from gateway.model.job import IDENT_PATTERN, as_hex, as_stored, from_hex

#: Seconds between two sweeps of the log folder by one actor process.
SWEEP_EVERY = 3600.0

#: Names per Redis round trip when asking which jobs are still there.
BATCH = 500

#: The file that makes a folder the actors' to sweep.
MARKER = ".hero-job-logs"

_IDENT = re.compile(IDENT_PATTERN)
_ENCODED = "id-"  # + hex of the id's bytes
_HASHED = "id-sha256-"  # + SHA-256 of the id's bytes, for a long id
_SHA256 = re.compile("[0-9a-f]{64}")
_RUN = re.compile("[0-9]{1,20}")  # a run's token: the µs of the call that took it
_MARK = "~"  # between the id's part of a name and the run's (in neither of them)
#: Bytes of an id written out in hex: "id-" + 220 + "~" + 20 + ".log" stays under 255.
_HEX_MAX = 110
#: Longest id a hex name held before names had runs (120 bytes): still swept.
_HEX_MAX_READ = 120

log = logging.getLogger("gateway.actor.logfiles")


def file_name(job_id: str, run: str = "") -> str:
    """The log file's name for the run ``run`` of ``job_id``: safe in any
    folder, one per run (per job id for a run without a token)."""
    end = _MARK + run + ".log" if _RUN.fullmatch(run) else ".log"
    if _plain(job_id):
        return job_id + end
    if len(as_stored(job_id)) <= _HEX_MAX:
        return _ENCODED + as_hex(job_id) + end
    return _HASHED + hashlib.sha256(as_stored(job_id)).hexdigest() + end


def _plain(job_id: str) -> bool:
    """Whether ``job_id`` is its own name in the folder."""
    return bool(_IDENT.fullmatch(job_id)) and not job_id.startswith(_ENCODED)


def job_of(name: str) -> tuple[bool, str | None]:
    """Whether ``name`` is one ``file_name`` makes (or made before names had
    runs), and the job id it names (None for a hashed name)."""
    stem, dot_log, rest = name.rpartition(".log")
    if not dot_log or rest:
        return False, None
    named, mark, run = stem.rpartition(_MARK)
    if mark:
        if not _RUN.fullmatch(run):
            return False, None
        stem = named
    if stem.startswith(_HASHED):
        return bool(_SHA256.fullmatch(stem[len(_HASHED) :])), None
    if stem.startswith(_ENCODED):
        try:
            job_id = from_hex(stem[len(_ENCODED) :])
        except ValueError:
            return False, None
        canonical = stem == _ENCODED + as_hex(job_id)
        return canonical and not _plain(job_id) and len(as_stored(job_id)) <= _HEX_MAX_READ, job_id
    return _plain(stem), stem


@dataclass(frozen=True)
class Stale:
    """A log file old enough to go; ``job_id`` is None for a hashed name."""

    path: str
    job_id: str | None


def stale(folder: str, ttl: int, now: float) -> list[Stale] | None:
    """The job log files in ``folder`` nobody wrote for ``ttl`` seconds; None
    when the folder is not the actors' (see ``MARKER``)."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    if not any(e.name == MARKER for e in entries):
        if entries:
            log.warning("log folder not swept: it held files before the actors used it; "
                        "create the marker in it if it holds only job logs",
                        extra={"log_dir": folder, "marker": MARKER})  # fmt: skip
            return None
        with open(os.path.join(folder, MARKER), "a"):
            pass
    found = []
    for entry in entries:
        ours, job_id = job_of(entry.name)
        try:
            if not (ours and entry.is_file(follow_symlinks=False)):
                continue
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:  # another actor's sweep took it
            continue
        if now - mtime > ttl:
            found.append(Stale(entry.path, job_id))
    return found


#: Which of these job ids Redis still has (``retention.JobLookup.present``).
Present = Callable[[list[str]], Awaitable[Collection[str]]]


def _unlink(paths: list[str]) -> tuple[int, OSError | None]:
    """How many of ``paths`` went, and the first error of those that did not."""
    removed, error = 0, None
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:  # another actor's sweep took it
            continue
        except OSError as exc:  # not ours to remove (another uid's, say): the rest go on
            error = error or exc
            continue
        removed += 1
    return removed, error


async def sweep(folder: str, ttl: int, present: Present) -> int:
    """Remove the expired jobs' log files in ``folder``; how many went. The
    folder is read in a thread: it may hold a week of jobs."""
    if ttl <= 0:
        return 0
    found = await asyncio.to_thread(stale, folder, ttl, time.time()) or []
    removed, error = 0, None
    for i in range(0, len(found), BATCH):
        chunk = found[i : i + BATCH]
        kept = await present([f.job_id for f in chunk if f.job_id is not None])
        gone = [f.path for f in chunk if f.job_id not in kept]
        n, failed = await asyncio.to_thread(_unlink, gone)
        removed, error = removed + n, error or failed
    if removed:
        log.info("expired job logs removed", extra={"count": removed, "log_dir": folder})
    if error is not None:
        log.warning("some expired job logs could not be removed",
                    extra={"log_dir": folder, "error": str(error)})  # fmt: skip
    return removed
