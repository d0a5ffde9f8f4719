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
from collections.abc import Callable, Mapping
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

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


def _ms_or_none(text: str | None) -> int | None:
    """Epoch milliseconds from a decimal string of any length (ts is ms since the epoch)."""
    if not text or not text.isdigit() or len(text) > 16:
        return None
    return int(text)


#: The order the supervisor writes an entry's fields in (gateway/supervisor/lua, ``emit``).
WIRE_ORDER = COMMON_FIELDS
_WIRE_KEYS = list(WIRE_ORDER)
_WIRE_LEN = 2 * len(WIRE_ORDER)
#: The keys of a well-formed entry joined by NUL: a key holding NUL cannot
#: match, since exactly len(WIRE_ORDER) keys are joined (see ``_normalize``).
_WIRE_HEAD = "\x00".join(WIRE_ORDER)
_STRING_AT = [WIRE_ORDER.index(name) for name in STRING_FIELDS]
_ATTEMPT_AT = WIRE_ORDER.index("attempt")
_TS_AT = WIRE_ORDER.index("ts")
#: ``json.dumps(x, sort_keys=True)`` without building an encoder per call.
_EXTRA_JSON = json.JSONEncoder(sort_keys=True)
_FLAT = pa.list_(pa.string())
#: Values the vectorized casts take as is; anything else goes through the
#: Python parsers above (``int`` and ``str.isdigit`` accept more than ASCII).
_ATTEMPT_PLAIN = "^[0-9]{1,9}$"
_TS_PLAIN = "^[0-9]{1,16}$"
_ID_PLAIN = "^[0-9]{1,19}-[0-9]{1,19}$"
#: Text ``json.dumps`` (ensure_ascii) writes as is: printable ASCII but ``"`` and ``\``.
_JSON_PLAIN = "^[ !#-\\[\\]-~]*$"
_KNOWN = pa.array(sorted(KNOWN_FIELDS), pa.string())


def _from_mapping(fields: Mapping[str, str]) -> tuple[list[str], str]:
    values = [fields.get(name, "") for name in WIRE_ORDER]
    if KNOWN_FIELDS.issuperset(fields):
        return values, ""
    unknown = {k: v for k, v in fields.items() if k not in KNOWN_FIELDS}
    return values, _EXTRA_JSON.encode(unknown)


def _wire(values: list[str]) -> list[str]:
    """``[field, value, ...]`` in WIRE_ORDER."""
    return [x for pair in zip(_WIRE_KEYS, values, strict=True) for x in pair]


def _parsed(
    column: pa.Array, plain: str, target: pa.DataType, slow: Callable[[str], int | None]
) -> pa.Array:
    """``column`` cast to ``target`` where it matches ``plain``, the rest parsed
    by ``slow`` (null where it gives None)."""
    ok = pc.match_substring_regex(column, plain)
    cast = pc.cast(pc.if_else(ok, column, "0"), target)
    if pc.all(ok).as_py():
        return cast
    odd = pc.invert(ok)
    slow_values = [slow(v) for v in column.filter(odd).to_pylist()]
    return pc.replace_with_mask(cast, odd, pa.array(slow_values, target))


class _Built(NamedTuple):
    table: pa.Table
    hours: list[int]
    #: Each row's stream id as (ms, seq) columns, or None when one is not of
    #: the plain "ms-seq" form (then ``StreamId.parse`` decides).
    ids: tuple[pa.Array, pa.Array] | None


class EventColumns:
    """Stream entries collected for one write, turned into columns in one pass.

    ``append`` / ``extend_flat`` only keep the entries as Redis returned them
    (the archive's hot loop); the Arrow table is built on first use by
    vectorized kernels over all rows at once. Only rows off the supervisor's
    shape (fields in another order or missing, or a value the casts do not
    take) go through Python one by one, with the same result.
    """

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._flats: list[list[str]] = []
        self._built: _Built | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def append(self, event_id: str, fields: Mapping[str, str]) -> None:
        """Add one stream entry given as a mapping (``event_id`` must be a stream id)."""
        self.append_flat(event_id, [x for pair in fields.items() for x in pair])

    def append_flat(self, event_id: str, flat: list[str]) -> None:
        """Add one entry as Redis returns it: ``[field, value, field, value, ...]``."""
        self._ids.append(event_id)
        self._flats.append(flat)
        self._built = None

    def extend_flat(self, ids: list[str], flats: list[list[str]]) -> None:
        """Add entries as an XREADGROUP reply holds them (ids and flat field lists)."""
        self._ids += ids
        self._flats += flats
        self._built = None

    def _normalize(self) -> tuple[pa.ListArray, pa.Array]:
        """The entries as one list array, every row starting with the WIRE_ORDER
        fields, and each row's ``extra``.

        A row is taken as is when its first keys are WIRE_ORDER and no later
        key is a known one (a later duplicate would win in a mapping); its
        ``extra`` is the JSON of the fields after them, put together by Arrow
        for the usual one field (a terminal event's ``output``, ``sandbox``)
        when neither its name nor its value needs escaping. Any other row is
        read as a mapping and rewritten in WIRE_ORDER.
        """
        flats = self._flats
        rows = pa.array(flats, _FLAT)
        lengths = pc.list_value_length(rows)
        head = pc.binary_join(pc.list_slice(rows, 0, _WIRE_LEN, 2), "\x00")
        plain = pc.and_(pc.greater_equal(lengths, _WIRE_LEN), pc.equal(head, _WIRE_HEAD))
        extra = [""] * len(flats)
        odd: list[int] = []
        pair = pc.list_slice(rows, _WIRE_LEN, _WIRE_LEN + 2, return_fixed_size_list=True)
        key, value = pc.list_element(pair, 0), pc.list_element(pair, 1)
        quick = pc.fill_null(
            pc.and_(
                pc.and_(plain, pc.equal(lengths, _WIRE_LEN + 2)),
                pc.and_(
                    pc.invert(pc.is_in(key, _KNOWN)),
                    pc.and_(
                        pc.match_substring_regex(key, _JSON_PLAIN),
                        pc.match_substring_regex(value, _JSON_PLAIN),
                    ),
                ),
            ),
            False,
        )
        longer = pc.and_(pc.and_(plain, pc.greater(lengths, _WIRE_LEN)), pc.invert(quick))
        for i in pc.indices_nonzero(longer).to_pylist():
            tail = flats[i][_WIRE_LEN:]
            keys = tail[0::2]
            if KNOWN_FIELDS.isdisjoint(keys):
                extra[i] = _EXTRA_JSON.encode(dict(zip(keys, tail[1::2], strict=True)))
            else:
                odd.append(i)
        odd += pc.indices_nonzero(pc.invert(plain)).to_pylist()
        if odd:
            flats = list(flats)
            for i in odd:
                values, extra[i] = _from_mapping(
                    dict(zip(flats[i][0::2], flats[i][1::2], strict=True))
                )
                flats[i] = _wire(values)
            rows = pa.array(flats, _FLAT)
        joined = pc.binary_join_element_wise('{"', key, '": "', value, '"}', "")
        return rows, pc.if_else(quick, joined, pa.array(extra, pa.string()))

    def _ids_split(self, ids: pa.Array) -> tuple[pa.Array, pa.Array] | None:
        if not pc.all(pc.match_substring_regex(ids, _ID_PLAIN)).as_py():
            return None
        parts = pc.split_pattern(ids, "-")
        return (
            pc.cast(pc.list_element(parts, 0), pa.uint64()),
            pc.cast(pc.list_element(parts, 1), pa.uint64()),
        )

    def _build(self) -> _Built:
        if self._built is None:
            rows, extra = self._normalize()
            ids = pa.array(self._ids, pa.string())
            split = self._ids_split(ids)
            values = [pc.list_element(rows, 2 * at + 1) for at in range(len(WIRE_ORDER))]
            attempt = _parsed(values[_ATTEMPT_AT], _ATTEMPT_PLAIN, pa.int32(), _int_or_none)
            ts = _parsed(values[_TS_AT], _TS_PLAIN, pa.int64(), _ms_or_none)
            if ts.null_count:
                # Unreadable ts: the stream id's time.
                missing = pc.is_null(ts)
                at = pc.indices_nonzero(missing).to_pylist()
                ms = [StreamId.parse(self._ids[i]).ms for i in at]
                ts = pc.replace_with_mask(ts, missing, pa.array(ms, pa.int64()))
            table = pa.Table.from_arrays(
                [
                    ids,
                    *(values[at] for at in _STRING_AT),
                    attempt,
                    pc.cast(ts, SCHEMA.field("ts").type),
                    extra,
                ],
                schema=SCHEMA,
            )
            hours = pc.divide(ts, MS_PER_HOUR).to_pylist()
            self._built = _Built(table, hours, split)
        return self._built

    def table(self) -> pa.Table:
        return self._build().table

    @property
    def hours(self) -> list[int]:
        """Hours since the epoch of each row's ``ts``: the partition it goes to."""
        return self._build().hours

    def id_range(self, rows: list[int] | None = None) -> tuple[StreamId, StreamId]:
        """The smallest and largest event id of ``rows`` (all rows when None)."""
        split = self._build().ids
        if split is None:
            at = range(len(self._ids)) if rows is None else rows
            order = [StreamId.parse(self._ids[i]) for i in at]
            return min(order), max(order)
        ms, seq = split
        if rows is not None:
            taken = pa.array(rows, pa.int64())
            ms, seq = ms.take(taken), seq.take(taken)
        low, high = pc.min_max(ms).values()
        first = pc.min(seq.filter(pc.equal(ms, low))).as_py()
        last = pc.max(seq.filter(pc.equal(ms, high))).as_py()
        return StreamId(low.as_py(), first), StreamId(high.as_py(), last)
