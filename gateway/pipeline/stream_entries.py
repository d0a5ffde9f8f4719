"""The archive's view of stream entries, read raw for speed.

The archive asks redis-py to leave ``XREADGROUP`` replies unparsed and takes
the entries' ids and flat field lists as columns straight from the reply (no
per-entry dicts or copies), so it reads the reply shapes of RESP2 and RESP3
here.
"""

from __future__ import annotations

from typing import Any


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def raw_entries(reply: Any) -> tuple[list[str], list[list[str] | None]]:
    """The ids and flat field lists (None: trimmed) of an unparsed one-stream
    XREADGROUP reply (RESP2 or RESP3)."""
    if not reply:
        return [], []
    if isinstance(reply, dict):
        streams = list(reply.values())
        entries = streams[0] if streams else []
    else:
        entries = reply[0][1]
    if not entries:
        return [], []
    ids = [entry[0] for entry in entries]
    flats = [entry[1] or None for entry in entries]
    if isinstance(ids[0], bytes):  # a client without decode_responses
        return [_text(i) for i in ids], [[_text(x) for x in f] if f else None for f in flats]
    return ids, flats


def unparsed(response: Any, **options: Any) -> Any:
    """A response callback that leaves the reply as Redis sent it."""
    return response
