"""Where hero-gateway keeps local state (dev Redis data, actor job logs, pipeline output).

``hero-gateway dev`` also records here the URL of the Redis it runs
(``dev.json``), so that a second terminal's ``keys``, ``archive``, ``actor``,
``pipeline run`` and SDK actors find it without flags (gateway/config/ reads
it). The record names dev's pid: a record whose dev is gone is stale, and is
reported as such rather than silently replaced by the default 6379.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hero-gateway"


def dev_record_path() -> Path:
    return state_dir() / "dev.json"


@dataclass(frozen=True)
class DevRecord:
    """The Redis a running (or vanished) ``hero-gateway dev`` serves."""

    redis_url: str
    pid: int
    path: Path

    @property
    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process: alive
            return True
        return True


def write_dev_record(redis_url: str) -> Path:
    """Record ``redis_url`` as this process's dev Redis (atomically: readers never see half)."""
    path = dev_record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"redis_url": redis_url, "pid": os.getpid()}) + "\n")
    tmp.replace(path)
    return path


def read_dev_record() -> DevRecord | None:
    """The recorded dev Redis, or None when there is no (readable) record."""
    path = dev_record_path()
    try:
        data = json.loads(path.read_text())
        return DevRecord(str(data["redis_url"]), int(data["pid"]), path)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_dev_record() -> None:
    """Remove the record if this process wrote it (a later dev's record is left alone)."""
    record = read_dev_record()
    if record is not None and record.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            record.path.unlink()
