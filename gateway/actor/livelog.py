"""A running job's log lines and progress, live, at a bounded cost.

Every executor (and ``JobContext.log``) writes a job's log to its file on
the actor's disk. ``LiveLog`` looks at what the file gained since its last
look, at most ``1 / interval`` times a second, and sends the new complete
lines and the latest progress in one supervisor call (``report_output``):
the supervisor appends them to the log tail ``job.logs`` reads and emits
them as ``log`` and ``progress`` events to subscribers. So a job that
neither logs nor reports progress costs Redis nothing while it runs; one
that does costs at most one call per tick, each carrying at most
``batch_max`` bytes of lines and, over the job's life, at most ``job_max``
bytes. Lines beyond those caps are still in the file, whose tail the last
report stores (``close``). A job that ends before the first look (most
jobs) sends nothing live: its last report only stores the tail, as before
live logs existed, so short jobs cost no more than they did.

Watching the file rather than each writer keeps the executors unaware of
this: they only have to write their log unbuffered. The looks begin when the
job first writes to its log (``JobLog.on_open``) or reports progress, on the
same ticks from the job's start: a job that does neither, most in-process
handlers, costs no timer and no look at the file at all.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Awaitable, Callable

from gateway.actor.joblog import JobLog

log = logging.getLogger("gateway.actor.livelog")

#: ``(lines, progress, tail)``: one report to the supervisor (see
#: ``ActorLink.report_output``); False: the job is no longer this run's.
Report = Callable[[str, tuple[float, str] | None, str], Awaitable[bool]]

#: Seconds between two looks at one job's log: at most four reports a second.
INTERVAL = 0.25
#: Most bytes of lines in one report; older new lines are skipped, with a note.
BATCH_MAX = 8 * 1024
#: Most bytes of lines one job sends live; the file keeps the rest.
JOB_MAX = 256 * 1024
#: Most characters of a progress message.
MESSAGE_MAX = 500


def _size(path: str) -> int:
    """The file's size; an absent file (a job that logged nothing yet) is empty,
    and so is one that cannot be looked at (its folder gone): the open that
    follows says why, as the job's error, without the actor's paths."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class LiveLog:
    """Follows one run's log file from where this execution began (the run
    run before, adopted after its report was lost, wrote what is before) and
    reports to the supervisor."""

    def __init__(
        self,
        joblog: JobLog,
        report: Report,
        *,
        interval: float = INTERVAL,
        batch_max: int = BATCH_MAX,
        job_max: int = JOB_MAX,
    ) -> None:
        self._path = joblog.path
        joblog.on_open = self._wake  # before the first bytes land: where this execution begins
        self._report = report
        self._interval = interval
        self._batch_max = batch_max
        self._budget = job_max
        self._offset = 0  # set by _wake
        self._partial = b""  # the start of a line not ended yet
        self._progress: tuple[float, str] | None = None  # the latest, not yet reported
        self._started = 0.0  # the loop's time when the job started
        self._timer: asyncio.TimerHandle | None = None  # the next look
        self._sending: asyncio.Task[None] | None = None  # a report under way
        self._woken = False  # the job wrote to its log or reported progress
        self._looked = False  # a look ran
        self._closed = False
        self._disowned = False  # a report found the job no longer this run's

    def progress(self, fraction: float, message: str) -> None:
        """Note the job's progress; only the latest of a tick is reported."""
        if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
            raise ValueError("progress must be a number from 0 to 1")
        self._progress = (float(fraction), str(message)[:MESSAGE_MAX])
        self._wake()

    def start(self) -> None:
        """The job starts: the ticks of its looks count from now."""
        self._started = asyncio.get_running_loop().time()

    def _wake(self) -> None:
        """The job's first write (before it lands) or progress: note the file's
        size, where this execution's lines begin, and look at the next tick."""
        if self._woken or self._closed:
            return
        self._woken = True
        self._offset = _size(self._path)
        loop = asyncio.get_running_loop()
        ticks = max(1, math.ceil((loop.time() - self._started) / self._interval))
        self._timer = loop.call_at(self._started + ticks * self._interval, self._look)

    async def close(self, tail: str) -> None:
        """Stop looking; after the report under way, report the last lines (an
        unfinished last line too), the last progress and the log's ``tail``."""
        self._closed = True
        if not self._woken:  # logged nothing, no progress: only the tail, if any
            if tail:
                await self._send("", tail)
            return
        if self._timer is not None:
            self._timer.cancel()
        if self._sending is not None:
            await asyncio.shield(self._sending)  # reports stay in order
        past_first_look = asyncio.get_running_loop().time() >= self._started + self._interval
        if self._looked or past_first_look:
            await self._send(self._take(final=True), tail)
        else:  # ended before the first look: the tail says it all
            self._progress = None
            await self._send("", tail)

    def _look(self) -> None:
        self._looked = True
        lines = self._take(final=False)
        if lines or self._progress:
            self._sending = asyncio.create_task(self._send(lines, ""))
            self._sending.add_done_callback(self._next)
        else:
            self._next()

    def _next(self, _: object = None) -> None:
        if not self._closed:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._look)

    async def _send(self, lines: str, tail: str) -> None:
        progress, self._progress = self._progress, None
        if self._disowned or not (lines or progress or tail):
            return
        try:
            if not await self._report(lines, progress, tail):
                # deleted (its id maybe another job's now) or a later attempt
                # runs: no later report is the job's either, so none is sent
                self._disowned = self._closed = True
        except Exception:  # a live log must never fail its job
            log.warning("live log report failed", exc_info=True)

    def _take(self, *, final: bool) -> str:
        """The lines the file gained since the last look, capped; with
        ``final``, an unfinished last line too."""
        size = _size(self._path)
        if size < self._offset:  # replaced or truncated: follow the new file
            self._offset, self._partial = 0, b""
        new = size - self._offset
        if self._budget <= 0 or (new == 0 and not (final and self._partial)):
            self._offset = size
            return ""
        # what is pending (the unfinished line, then the new bytes) is cut to its last batch_max
        skipped = max(0, len(self._partial) + new - self._batch_max)
        from_file = max(0, skipped - len(self._partial))
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset + from_file)
                read = f.read(size - self._offset - from_file)
        except OSError:  # gone meanwhile: the next look starts over
            return ""
        self._offset += from_file + len(read)
        data = self._partial[skipped:] + read
        self._partial = b""
        if not final:
            end = data.rfind(b"\n") + 1
            if end == 0 and len(data) < self._batch_max:
                self._partial, data = data, b""
            elif end:
                self._partial, data = data[end:], data[:end]
        text = data.decode("utf-8", "replace").removesuffix("\n")
        if skipped:  # the first line is a fragment when a newline follows it
            _, newline, rest = text.partition("\n")
            text = f"[{skipped} bytes skipped]\n" + (rest if newline else text)
        if not text:
            return ""
        encoded = text.encode()
        if len(encoded) >= self._budget:
            text = encoded[: self._budget].decode("utf-8", "ignore")
            text += "\n[live log ends here: job.logs has the tail once the job ends]"
        self._budget -= len(encoded)
        return text
