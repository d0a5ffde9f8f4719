"""The job model: a validated JobSpec in, the Hero job hash out, and back.

Validation is the contract's JobSpec schema (one description of the shape)
plus the one check a schema cannot make: the script type must be configured.
The hash keeps every value as a string (Hero actors read it as such); the
JSON fields (env_vars, prerequisites, dependents) are stored as JSON text.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from gateway import contract
from gateway.errors import InvalidJob

#: Every status, and those a job ends in: the contract's Status and EndedStatus
#: enums (hero.lua keeps its own TERMINAL table; a test holds the two equal).
STATUSES: tuple[str, ...] = tuple(contract.resolve("#/components/schemas/Status")["enum"])
TERMINAL = frozenset(contract.resolve("#/components/schemas/EndedStatus")["enum"])
#: Events a running job reports (new log lines, progress; ``hero_log`` in hero.lua)
#: besides its transitions: their status is the job's (started), not a new one.
REPORT_EVENTS = frozenset(("log", "progress"))

#: What a job id, script type, group, instance, caller id or worker id may look
#: like, matched whole (``re.fullmatch``: Python's ``$`` would let a trailing
#: newline through). Such a name is safe in a Redis key (no ``:``, no glob
#: characters) and as a file name (no ``/``, no leading dot).
IDENT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"

#: How text that is not UTF-8 is read from Redis and written back (any
#: producer may write bytes): Python's own convention for bytes that are not
#: text, as in file names. Such a byte is a lone surrogate in the ``str``.
TEXT_ERRORS = "surrogateescape"


def as_stored(text: str) -> bytes:
    """``text`` as the bytes Redis holds it as (see ``TEXT_ERRORS``)."""
    return text.encode("utf-8", TEXT_ERRORS)


def from_stored(raw: bytes) -> str:
    """The text Redis's ``raw`` bytes read as (see ``TEXT_ERRORS``)."""
    return raw.decode("utf-8", TEXT_ERRORS)


def stored_int(text: object, default: int, low: int | None = None) -> int:
    """A whole number as a hash or stream field holds it (at least ``low``),
    else ``default``: those fields are anyone's to write (an outside
    producer's), and one value that raised failed a whole listing or cycle."""
    try:
        value = int(text)  # type: ignore[call-overload]  # anything: what is no number falls back
    except (TypeError, ValueError, OverflowError):
        return default
    return default if low is not None and value < low else value


def as_hex(text: str) -> str:
    """``text``'s stored bytes in hex: plain ASCII whatever it holds, for an
    id that is not an identifier where only safe text may go (a log file's
    name, a ``job.list`` cursor)."""
    return as_stored(text).hex()


def from_hex(written: str) -> str:
    """The text ``as_hex`` wrote; ValueError for anything that is not hex."""
    return from_stored(bytes.fromhex(written))


#: Priority 1 (normal) is the plain queue key, so plain Hero actors see normal
#: jobs; 0 (high) and 2 (low) get their own queues (``keys.work_queue``).
DEFAULT_PRIORITY = 1
#: Seconds a job may run when its spec does not say (the contract's JobSpec default).
DEFAULT_TIMEOUT = 300

_INT_FIELDS = ("timeout", "retries", "priority", "attempt")
_JSON_FIELDS: dict[str, Any] = {"env_vars": {}, "prerequisites": [], "dependents": []}
_NULLABLE = (
    "caller_id",
    "context_id",
    "worker_id",
    "group",
    "instance",
    "log_path",
    "output",
    "error",
    "started_at",
    "finished_at",
    "actor",
    "queue",
    "updated_at",
)
#: The hash fields a client sees: the contract's Job. Ours that are internal
#: (ctl, lease, mode, entry, legacy) and those an outside producer added are not.
_SHOWN = frozenset(contract.resolve("#/components/schemas/Job")["properties"])


#: A JobSpec's env_vars when it has none: one shared mapping, read-only.
_NO_ENV: Mapping[str, str] = MappingProxyType({})


class JobSpec(NamedTuple):
    """A job as a client asked for it. A NamedTuple, immutable as a frozen
    dataclass is but made in a fifth of the time (0.6 against 2.9 µs with
    its fields named): one is made per job submitted (docs/performance.md)."""

    script: str
    script_type: str
    job_id: str
    caller_id: str = ""
    context_id: str = ""
    worker_id: str = ""
    group: str = ""
    instance: str = ""
    priority: int = DEFAULT_PRIORITY
    timeout: int = DEFAULT_TIMEOUT
    retries: int = 0
    env_vars: Mapping[str, str] = _NO_ENV
    prerequisites: tuple[str, ...] = ()
    #: Stream mode: the type queue is a Redis Stream (``HERO_STREAM_TYPES``).
    stream: bool = False

    @classmethod
    def parse(
        cls, data: Any, script_types: Collection[str], stream_types: Collection[str] = ()
    ) -> JobSpec:
        """Validate a client's JobSpec; every bad field is reported at once."""
        found = contract.schema_validator("JobSpec").problems(data)
        if found:
            raise _invalid(found)
        return cls.from_valid(data, script_types, stream_types)

    @classmethod
    def from_valid(
        cls,
        data: Mapping[str, Any],
        script_types: Collection[str],
        stream_types: Collection[str] = (),
    ) -> JobSpec:
        """A JobSpec from data that already passed the contract's JobSpec schema
        (the RPC layer checks every call's params before its handler runs), so
        the schema is not checked twice. Only the checks a schema cannot make
        are done here: the configured script types and stream mode's limits.
        Data that was not checked against the schema goes through ``parse``."""
        script_type = data["script_type"]
        found: list[dict[str, str]] = []
        if script_type not in script_types:
            message = "must be one of " + ", ".join(sorted(script_types))
            found.append({"field": "script_type", "message": message, "schema_path": ""})
        stream = not found and script_type in stream_types
        if stream:
            found += _stream_problems(data)
        if found:
            raise _invalid(found)
        get = data.get
        env_vars = get("env_vars")
        prerequisites = get("prerequisites")
        # Positional, in the fields' order, each absent one its default: one is
        # built per job submitted, and a dict of the present fields spread as
        # keywords took three times as long (2.5 against 0.8 µs, ``timeit``).
        return cls(
            data["script"],
            script_type,
            get("job_id") or str(uuid.uuid4()),
            get("caller_id", ""),
            get("context_id", ""),
            get("worker_id", ""),
            get("group", ""),
            get("instance", ""),
            get("priority", DEFAULT_PRIORITY),
            get("timeout", DEFAULT_TIMEOUT),
            get("retries", 0),
            dict(env_vars) if env_vars else _NO_ENV,
            tuple(prerequisites) if prerequisites else (),
            stream,
        )


#: JSON as the hash keeps it (no spaces); one encoder, since ``json.dumps``
#: with options builds a new one on every call.
compact_json = json.JSONEncoder(separators=(",", ":")).encode


def _invalid(found: list[dict[str, str]]) -> InvalidJob:
    return InvalidJob(
        "Invalid job: " + "; ".join(f"{p['field'] or 'job'} {p['message']}" for p in found),
        data=found,
    )


def _stream_problems(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """A stream-mode type has one queue: it cannot honour routing or priority,
    and silently ignoring them would surprise the caller."""
    mode = f"the script type {data['script_type']} runs in stream mode"
    found = [
        {"field": name, "message": f"is not available: {mode}", "schema_path": ""}
        for name in ("group", "instance")
        if data.get(name)
    ]
    if data.get("priority", DEFAULT_PRIORITY) != DEFAULT_PRIORITY:
        found.append({"field": "priority", "message": f"must be 1: {mode}", "schema_path": ""})
    return found


def decode(raw: Mapping[str, str]) -> dict[str, Any]:
    """A job hash as a client sees it (the contract's Job): typed, private fields removed."""
    job: dict[str, Any] = {k: v for k, v in raw.items() if k in _SHOWN}
    for name in _INT_FIELDS:
        if name in job:
            try:
                job[name] = int(job[name])
            except ValueError:
                job[name] = None
    for name, empty in _JSON_FIELDS.items():
        try:
            job[name] = json.loads(job[name]) if job.get(name) else empty
        except ValueError:
            job[name] = empty
    for name in _NULLABLE:
        if job.get(name, "") == "":
            job[name] = None
    job["concurrent"] = job.get("concurrent") == "true"
    return job


def belongs(owner: str | None, caller_id: str | None) -> bool:
    """Whether a job whose ``caller_id`` field is ``owner`` ("" or None: no
    caller, an outside producer's job) answers a call restricted to
    ``caller_id`` (a user key's, never empty; None or "": unrestricted, an
    admin's). The rule of every read that checks the owner in the read itself
    (hero.lua's ``callers`` is its twin for the Functions)."""
    return not caller_id or caller_id == (owner or "")


def result(job_id: str, status: str, output: str | None, error: str | None) -> dict[str, Any]:
    """A JobResult. A failed job is a result with status error, not an RPC error."""
    return {"job_id": job_id, "status": status, "output": output or None, "error": error or None}
