"""One entry of the events stream: its fields, their types, and stream ids.

``emit`` in ``supervisor/lua/hero.lua`` (and ``hero_log`` for the ``log`` and
``progress`` events a running job reports) writes every field as a string;
empty means absent. ``Event`` is that record typed, with its nullability
explicit, and the one codec between the two (``from_entry`` / ``to_wire``).
A test (tests/test_model.py) holds its fields equal to the XADDs in hero.lua.

``StreamId`` is a stream entry id ("ms-seq"; a bare "ms" counts as "ms-0"),
ordered as Redis orders them: the one parser of stream ids in the tree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gateway.model.job import stored_int

#: Each half of a stream id is an unsigned 64-bit number in Redis.
_U64 = 2**64 - 1


@dataclass(frozen=True, order=True)
class StreamId:
    """A stream entry id: milliseconds and a sequence number, ordered."""

    ms: int
    seq: int = 0

    @classmethod
    def parse(cls, text: str) -> StreamId:
        """``"ms-seq"`` or a bare ``"ms"``; ValueError on anything else."""
        ms, sep, seq = text.partition("-")
        # isascii: str.isdigit (and int) also take other scripts' digits
        if not (text.isascii() and ms.isdigit()) or (sep and not seq.isdigit()):
            raise ValueError(f"not a stream id: {text!r}")
        at = cls(int(ms), int(seq) if sep else 0)
        if at.ms > _U64 or at.seq > _U64:  # Redis refuses it ("Invalid stream ID")
            raise ValueError(f"not a stream id: {text!r}")
        return at

    @classmethod
    def lenient(cls, text: str) -> StreamId:
        """As ``parse``, but junk sorts before every real id (``-1-0``)."""
        try:
            return cls.parse(text)
        except ValueError:
            return cls(-1, 0)

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"


#: The greatest stream id Redis takes: nothing comes after it.
LAST_ID = StreamId(_U64, _U64)


#: The entry's fields every event carries, in the order emit writes them.
COMMON_FIELDS = ("job_id", "event", "status", "script_type", "group", "instance", "actor",
                 "caller_id", "attempt", "ts", "error")  # fmt: skip
#: Fields only some events carry: a terminal event's output (when small), an
#: actor's ``sandbox`` tag ("off": python jobs run unconfined) on ``started``,
#: ``lines`` on ``log`` and ``progress``/``message`` on ``progress`` events.
OPTIONAL_FIELDS = ("output", "sandbox", "lines", "progress", "message")


class UnknownFields(ValueError):
    """A strict decode met fields the model does not know (or lacks some)."""


@dataclass(frozen=True)
class Event:
    """One transition (or report) of one job, as the events stream holds it."""

    id: StreamId
    job_id: str
    event: str
    status: str
    script_type: str
    group: str | None
    instance: str | None
    actor: str | None
    caller_id: str | None
    attempt: int
    ts: int
    error: str | None
    #: A terminal event's output ("" when empty), when small; None: not carried.
    output: str | None = None
    #: "off" when the actor that started it runs python jobs unconfined.
    sandbox: str | None = None
    lines: str | None = None
    progress: float | None = None
    message: str | None = None

    @classmethod
    def from_entry(cls, entry_id: str, raw: Mapping[str, str], *, strict: bool = False) -> Event:
        """Decode a stream entry. Entries written by older actors may lack
        fields: absent strings are empty, ``ts`` falls back to the id's
        milliseconds. ``strict``: a missing common field or an unknown one
        raises ``UnknownFields`` (for tests that hold Lua and model equal)."""
        if strict:
            unknown = set(raw) - set(COMMON_FIELDS) - set(OPTIONAL_FIELDS)
            missing = set(COMMON_FIELDS) - set(raw)
            if unknown or missing:
                raise UnknownFields(f"unknown {sorted(unknown)}, missing {sorted(missing)}")
        at = StreamId.lenient(entry_id)
        progress = raw.get("progress")
        return cls(
            id=at,
            job_id=raw.get("job_id", ""),
            event=raw.get("event", ""),
            status=raw.get("status", ""),
            script_type=raw.get("script_type", ""),
            group=raw.get("group") or None,
            instance=raw.get("instance") or None,
            actor=raw.get("actor") or None,
            caller_id=raw.get("caller_id") or None,
            attempt=stored_int(raw.get("attempt"), 0, low=0),
            ts=stored_int(raw.get("ts"), max(at.ms, 0)),
            error=raw.get("error") or None,
            output=raw.get("output"),
            sandbox=raw.get("sandbox") or None,
            lines=raw.get("lines"),
            progress=None if progress is None else min(max(_float(progress), 0.0), 1.0),
            message=raw.get("message", "") if progress is not None else raw.get("message"),
        )

    def to_wire(self) -> dict[str, str]:
        """The entry's fields as emit writes them (strings; empty for null)."""
        wire = {name: _text(getattr(self, name)) for name in COMMON_FIELDS}
        for name in OPTIONAL_FIELDS:
            value = getattr(self, name)
            if value is not None:
                wire[name] = _text(value)
        return wire

    def to_contract(self) -> dict[str, Any]:
        """The contract's Event (gateway/openrpc.json), as a subscriber gets it:
        ``output`` only on terminal events, ``lines`` on log events,
        ``progress`` and ``message`` on progress events; ``sandbox`` is not
        described there (Event is a closed schema), so it is left out."""
        shown: dict[str, Any] = {"id": str(self.id)}
        for name in COMMON_FIELDS:
            shown[name] = getattr(self, name)
        if self.output is not None:
            shown["output"] = self.output or None
        if self.lines is not None:
            shown["lines"] = self.lines
        if self.progress is not None:
            shown["progress"] = self.progress
            shown["message"] = self.message or ""
        return shown


#: The entry fields Event knows (``id`` is the entry's id, not a field).
ENTRY_FIELDS = tuple(f.name for f in fields(Event) if f.name != "id")


def _text(value: object) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        return 0.0
    return value if math.isfinite(value) else 0.0
