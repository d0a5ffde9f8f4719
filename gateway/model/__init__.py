"""The model of a job and its events, and the typed binding of hero.lua.

Sans-I/O and on the lowest floor: it imports only floor modules, and the
supervisor, rpc, the pipeline and the actor all use it. Facts about the
protocol (an event's fields, a job's statuses, a Function's arguments and
reply) live here once; key names stay in ``supervisor/keys.py``.
"""

from gateway.model import library
from gateway.model.claim import CLAIM_FIELDS, Claimed, CycleReply, Outcome
from gateway.model.event import LAST_ID, Event, StreamId, UnknownFields
from gateway.model.job import (
    DEFAULT_PRIORITY,
    REPORT_EVENTS,
    STATUSES,
    TERMINAL,
    JobSpec,
    belongs,
    decode,
    result,
)
from gateway.model.library import Call, Reply, Transition, Verdict

__all__ = [
    "CLAIM_FIELDS",
    "DEFAULT_PRIORITY",
    "LAST_ID",
    "REPORT_EVENTS",
    "STATUSES",
    "TERMINAL",
    "Call",
    "Claimed",
    "CycleReply",
    "Event",
    "JobSpec",
    "Outcome",
    "Reply",
    "StreamId",
    "Transition",
    "UnknownFields",
    "Verdict",
    "belongs",
    "decode",
    "library",
    "result",
]
