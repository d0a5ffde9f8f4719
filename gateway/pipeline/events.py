"""The archived event: its Parquet schema and how a stream entry becomes a row.

A stream entry (see DESIGN.md, events stream) has string fields only. The
archive keeps every field, typed: ``attempt`` as an int (null when absent),
``ts`` as a UTC millisecond timestamp (the stream id's time when ``ts`` is
missing or unreadable), and any field it does not know in ``extra`` (JSON), so
nothing the supervisor writes is lost. ``event_id`` is the stream id: the
unit of de-duplication downstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from gateway.model import STATUSES, StreamId
from gateway.model.event import COMMON_FIELDS

#: Every event name the supervisor writes (event == the job's new status).
EVENT_NAMES = STATUSES
#: Events that end one attempt (the actor is free again).
ATTEMPT_END_EVENTS = ("finished", "error", "timeout", "stopped")

#: Stream fields stored as strings, in column order.
STRING_FIELDS = tuple(name for name in COMMON_FIELDS if name not in ("attempt", "ts"))
KNOWN_FIELDS = frozenset((*STRING_FIELDS, "attempt", "ts"))

SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        *(pa.field(name, pa.string()) for name in STRING_FIELDS),
        pa.field("attempt", pa.int32()),
        pa.field("ts", pa.timestamp("ms", tz="UTC")),
        pa.field("extra", pa.string()),
    ]
)

MS_PER_HOUR = 3_600_000


def _int_or_none(text: str | None) -> int | None:
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


#: The order the supervisor writes an entry's fields in (gateway/supervisor/lua, ``emit``).
WIRE_ORDER = COMMON_FIELDS
_WIRE_KEYS = list(WIRE_ORDER)
_STRING_AT = [WIRE_ORDER.index(name) for name in STRING_FIELDS]
_ATTEMPT_AT = WIRE_ORDER.index("attempt")
_TS_AT = WIRE_ORDER.index("ts")

#: One collected row: event id, the values in WIRE_ORDER, ``extra`` JSON or "".
_Row = tuple[str, list[str], str]


def _from_mapping(fields: Mapping[str, str]) -> tuple[list[str], str]:
    values = [fields.get(name, "") for name in WIRE_ORDER]
    if KNOWN_FIELDS.issuperset(fields):
        return values, ""
    unknown = {k: v for k, v in fields.items() if k not in KNOWN_FIELDS}
    return values, json.dumps(unknown, sort_keys=True)


class EventColumns:
    """Stream entries collected for one write, turned into columns in one pass.

    ``append`` / ``append_flat`` only keep the entry's values (the archive's hot
    loop); ``columns``, ``hours`` and ``order`` are built on first use, a column
    at a time, which is several times faster than per-row work on a dozen lists.
    """

    def __init__(self) -> None:
        self._rows: list[_Row] = []
        self._built: tuple[dict[str, list[Any]], list[int], list[StreamId]] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def append(self, event_id: str, fields: Mapping[str, str]) -> None:
        """Add one stream entry given as a mapping (``event_id`` must be a stream id)."""
        values, extra = _from_mapping(fields)
        self._rows.append((event_id, values, extra))
        self._built = None

    def append_flat(self, event_id: str, flat: list[str]) -> None:
        """Add one entry as Redis returns it: ``[field, value, field, value, ...]``.

        The supervisor always writes the same fields in ``WIRE_ORDER``: those
        entries are taken by one slice, anything else goes through a mapping.
        """
        if flat[0::2] == _WIRE_KEYS:
            self._rows.append((event_id, flat[1::2], ""))
        else:
            values, extra = _from_mapping(dict(zip(flat[0::2], flat[1::2], strict=True)))
            self._rows.append((event_id, values, extra))
        self._built = None

    def extend(self, entries: Iterable[tuple[str, Mapping[str, str]]]) -> None:
        for event_id, fields in entries:
            self.append(event_id, fields)

    def _build(self) -> tuple[dict[str, list[Any]], list[int], list[StreamId]]:
        if self._built is None:
            rows = self._rows
            ids = [row[0] for row in rows]
            order = [StreamId.parse(i) for i in ids]
            by_field = (
                list(zip(*(row[1] for row in rows), strict=True))
                if rows
                else [() for _ in WIRE_ORDER]
            )
            columns: dict[str, list[Any]] = {"event_id": ids}
            for name, at in zip(STRING_FIELDS, _STRING_AT, strict=True):
                columns[name] = list(by_field[at])
            columns["attempt"] = [_int_or_none(v) for v in by_field[_ATTEMPT_AT]]
            ts = [_ms_or_none(v) for v in by_field[_TS_AT]]
            columns["ts"] = [o.ms if t is None else t for t, o in zip(ts, order, strict=True)]
            columns["extra"] = [row[2] for row in rows]
            hours = [t // MS_PER_HOUR for t in columns["ts"]]
            self._built = (columns, hours, order)
        return self._built

    @property
    def columns(self) -> dict[str, list[Any]]:
        return self._build()[0]

    @property
    def hours(self) -> list[int]:
        """Hours since the epoch of each row's ``ts``: the partition it goes to."""
        return self._build()[1]

    @property
    def order(self) -> list[StreamId]:
        """Each row's event id, for ordering and file names."""
        return self._build()[2]

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.columns, schema=SCHEMA)


def _ms_or_none(text: str | None) -> int | None:
    """Epoch milliseconds from a decimal string of any length (ts is ms since the epoch)."""
    if not text or not text.isdigit() or len(text) > 16:
        return None
    return int(text)
