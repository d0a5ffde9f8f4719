"""What a handler gets: the job, a place for its log, and a way to report progress."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actor.joblog import JobLog
from gateway.actor.livelog import LiveLog
from gateway.model import Claimed
from gateway.model.job import as_stored


class JobFailed(Exception):
    """Raised by a handler to end the job with status error and this message.

    ``output`` is kept as the failed job's output (e.g. what it printed); as
    text, whatever a handler passed (None is no output)."""

    def __init__(self, message: str, output: str | None = "") -> None:
        super().__init__(message)
        self.output = "" if output is None else str(output)


@dataclass
class JobContext:
    job: Claimed
    joblog: JobLog
    #: Set by the runtime: sends new log lines and progress while the job runs.
    live: LiveLog | None = None

    @property
    def log_path(self) -> str:
        return self.joblog.path

    def log(self, line: str) -> None:
        """Append a line to the job's log (readable through ``job.logs``, live)."""
        # a handler's text may quote what Redis held as bytes, not UTF-8
        self.joblog.write(as_stored(line + "\n"))

    def progress(self, fraction: float, message: str = "") -> None:
        """Report how far the job is, from 0 to 1, and what it is doing.

        Subscribers get it as a ``progress`` event; reports are coalesced to
        at most a few a second (the latest wins), so calling this often is cheap."""
        if self.live is None:
            raise RuntimeError("progress is reported only while the actor runs the job")
        self.live.progress(fraction, message)

    def logs(self) -> str:
        return self.joblog.text()
