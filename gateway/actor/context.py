"""What a handler gets: the job, and a place for its log."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gateway.supervisor.worker import Claimed


class JobFailed(Exception):
    """Raised by a handler to end the job with status error and this message."""


@dataclass
class JobContext:
    job: Claimed
    log_path: Path
    log_tail: int = 65536
    log_text: str = ""
    _lines: list[str] = field(default_factory=list)

    def log(self, line: str) -> None:
        """Append a line to the job's log (readable through ``job.logs``)."""
        self._lines.append(line)
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def logs(self) -> str:
        return self.log_text or "\n".join(self._lines)[-self.log_tail :]
