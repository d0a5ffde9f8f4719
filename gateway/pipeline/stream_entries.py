"""The archive's view of stream entries, read raw for speed.

The archive asks redis-py to leave ``XREADGROUP`` replies unparsed (it turns
the flat field lists into columns itself, twice as fast as building dicts),
so it reads the reply shapes of RESP2 and RESP3 here.
"""

from __future__ import annotations

from typing import Any

#: An entry's fields: flat ``[k, v, ...]`` (XREADGROUP, read raw), a mapping
#: (XAUTOCLAIM), or nothing when the stream no longer holds it.
Fields = list[str] | dict[str, str] | None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def raw_entries(reply: Any) -> list[tuple[str, Fields]]:
    """The entries of an unparsed one-stream XREADGROUP reply (RESP2 or RESP3)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        streams = list(reply.values())
        entries = streams[0] if streams else []
    else:
        entries = reply[0][1]
    out: list[tuple[str, Fields]] = []
    for entry in entries or []:
        entry_id, flat = entry[0], entry[1]
        if isinstance(entry_id, bytes):
            flat = [_text(x) for x in flat] if flat else flat
        out.append((_text(entry_id), list(flat) if flat else None))
    return out


def unparsed(response: Any, **options: Any) -> Any:
    """A response callback that leaves the reply as Redis sent it."""
    return response
