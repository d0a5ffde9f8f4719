"""What an actor is handed and what it reports: the rows of ``hero_cycle``.

A claimed job arrives as a row (from a cycle's reply, a handoff message or
an adoption's read) and becomes a ``Claimed``; its end goes back as an
``Outcome``. The Function calls that carry them are built in ``library``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.model.job import DEFAULT_TIMEOUT, stored_int

#: The hash fields a claimed job is run from, after its id (CLAIM_FIELDS in
#: hero.lua, whose last one, ``legacy``, stays inside Lua).
CLAIM_FIELDS = ("script", "script_type", "timeout", "env_vars", "caller_id", "context_id",
                "attempt", "retries", "group", "instance")  # fmt: skip


@dataclass(frozen=True)
class Claimed:
    """A job handed to an actor (by its cycle, a handoff message or an
    adoption), with what it needs to run it."""

    job_id: str
    script: str
    script_type: str
    timeout: int
    env_vars: dict[str, str]
    caller_id: str
    context_id: str
    attempt: int
    retries: int
    group: str = ""
    instance: str = ""
    #: Stream mode: the work stream's entry, acked when the job is done.
    entry: str = ""
    #: This run's token (hero.lua ``take``), sent back with its log writes and report.
    run: str = ""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Claimed:
        """From ``[job_id, *CLAIM_FIELDS, entry?, run?]``: a hero_cycle row, a
        handoff message (the same row as JSON) or an adoption's HMGET.
        Missing values (nil in Lua: null or false) take the defaults, and so
        do values that are not what they should be: a job hash is anyone's
        to write (an outside producer's), and one row that raised here
        failed the actor's whole cycle and ended the actor."""
        job_id, script, script_type, timeout, env, caller, context, attempt, retries = row[:9]
        group, instance, entry, run = [*row[9:13], "", "", "", ""][:4]
        return cls(
            job_id=job_id,
            script=script or "",
            script_type=script_type,
            timeout=stored_int(timeout, DEFAULT_TIMEOUT, low=1),
            env_vars=_environment(env) if env and env != "{}" else {},  # most jobs: none
            caller_id=caller or "",
            context_id=context or "",
            attempt=stored_int(attempt, 1, low=1),
            retries=stored_int(retries, 0, low=0),
            group=group or "",
            instance=instance or "",
            entry=entry or "",
            run=run if isinstance(run, str) else "",
        )

    def ended(self, status: str, output: str = "", error: str = "", log_path: str = "") -> Outcome:
        """This run's end, named as Redis checks a report (attempt, run, stream entry)."""
        return Outcome(self.job_id, status, output, error, log_path,
                       self.attempt, self.run, self.entry)  # fmt: skip


def _environment(text: str) -> dict[str, str]:
    """A job's env_vars: a JSON object of strings, else none at all."""
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str)}


@dataclass(frozen=True)
class Outcome:
    """The end an actor reports for a run (``Claimed.ended``); ``attempt`` 0, ``run``
    "": not known (a report sent again names its attempt: ``InHand.checked``)."""

    job_id: str
    status: str  # finished | error | timeout | stopped
    output: str = ""
    error: str = ""
    log_path: str = ""
    attempt: int = 0
    run: str = ""  #: the run's token (``Claimed.run``; "": not known)
    entry: str = ""  #: stream mode: the entry of the run (``Claimed.entry``), acked


@dataclass(frozen=True)
class CycleReply:
    """What one hero_cycle claimed, and the ms until a parked outside id is
    due (0: none), so an idle actor knows when to cycle again."""

    claimed: tuple[Claimed, ...]
    settle_ms: int


#: The values of one claimed row in a hero_cycle reply (hero.lua ``CLAIMED_WIDTH``):
#: the job id, CLAIM_FIELDS, the stream entry and the run token.
CLAIMED_WIDTH = 1 + len(CLAIM_FIELDS) + 2
