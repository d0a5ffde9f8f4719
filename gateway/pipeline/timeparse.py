"""Times on the command line: ISO 8601, epoch seconds/ms, or an age like ``6h``."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from gateway.config import TIME_HELP
from gateway.errors import InvalidParams

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds for ``text``; InvalidParams with an explanation otherwise."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    value = text.strip()
    age = _AGE.match(value)
    if age:
        return now - round(float(age.group(1)) * _UNIT_SECONDS[age.group(2)] * 1000)
    if value.isdigit():
        number = int(value)
        return number if len(value) >= 12 else number * 1000
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidParams(f"not a time: {text!r} (use {TIME_HELP})") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return round(when.timestamp() * 1000)
