"""What passes between an actor and the supervisor about one job.

``Claimed`` is a job handed to an actor (by its cycle, a handoff message or
an adoption), ``Outcome`` the end the actor reports for it. Both travel
positionally through ``hero_cycle`` (a claimed job as a reply row, an
outcome as arguments), so the field order here is the one in ``hero.lua``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: What hero_cycle returns per claimed job, after its id (same order as CLAIM_FIELDS in hero.lua).
CLAIM_FIELDS = ("script", "script_type", "timeout", "env_vars", "caller_id", "context_id",
                "attempt", "retries")  # fmt: skip


@dataclass(frozen=True)
class Claimed:
    """A job handed to an actor, with what it needs to run it."""

    job_id: str
    script: str
    script_type: str
    timeout: int
    env_vars: dict[str, str]
    caller_id: str
    context_id: str
    attempt: int
    retries: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Claimed:
        """From ``[job_id, *CLAIM_FIELDS]``."""
        job_id, script, script_type, timeout, env, caller, context, attempt, retries = row[:9]
        return cls(
            job_id=job_id,
            script=script or "",
            script_type=script_type,
            timeout=int(timeout or 300),
            env_vars=json.loads(env) if env else {},
            caller_id=caller or "",
            context_id=context or "",
            attempt=int(attempt or 1),
            retries=int(retries or 0),
        )


@dataclass(frozen=True)
class Outcome:
    job_id: str
    status: str  # finished | error | timeout | stopped
    output: str = ""
    error: str = ""
    log_path: str = ""
