"""What a handler gets: the job, and a place for its log."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.actor.joblog import JobLog
from gateway.supervisor.worker import Claimed


class JobFailed(Exception):
    """Raised by a handler to end the job with status error and this message."""


@dataclass
class JobContext:
    job: Claimed
    joblog: JobLog

    @property
    def log_path(self) -> str:
        return str(self.joblog.path)

    def log(self, line: str) -> None:
        """Append a line to the job's log (readable through ``job.logs``)."""
        self.joblog.write((line + "\n").encode())

    def logs(self) -> str:
        return self.joblog.text()
