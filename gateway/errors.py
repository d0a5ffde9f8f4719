"""The one exception tree of hero-gateway.

Every layer raises these; the RPC layer maps them to JSON-RPC error codes
(the code lives on the class, so the mapping is written once). Lower-level
errors (redis-py, OS, subprocess) are caught at the layer boundary and
re-raised as one of these, so nothing above the supervisor ever sees a
``redis.exceptions`` type and no client ever sees a stack trace.

    HeroError
    ├── InvalidJob              -32602  a JobSpec failed validation (per-field details)
    ├── InvalidParams           -32602  any other bad argument
    ├── JobNotFound             -32001
    ├── InvalidState            -32002  e.g. starting a job twice
    ├── WaitTimeout             -32003  data: {"job_id": ...}
    ├── Unauthenticated         -32004
    ├── Forbidden               -32005
    ├── Overloaded              -32006
    └── BackendUnavailable      -32007  Redis unreachable

Messages are written for clients: they never contain secrets, paths on the
server or exception text from libraries.
"""

from __future__ import annotations

from typing import Any


class HeroError(Exception):
    """Root of every error hero-gateway raises on purpose."""

    code = -32603
    default_message = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)


class InvalidParams(HeroError):
    code = -32602
    default_message = "Invalid params"


class InvalidJob(InvalidParams):
    """A JobSpec that failed validation; ``data`` lists ``{"field", "message"}`` items."""

    default_message = "Invalid job"


class JobNotFound(HeroError):
    code = -32001
    default_message = "Job not found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job not found: {job_id}", {"job_id": job_id})


class InvalidState(HeroError):
    code = -32002
    default_message = "Invalid state for this operation"


class WaitTimeout(HeroError):
    code = -32003
    default_message = "Wait timed out"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Wait timed out for job {job_id}", {"job_id": job_id})


class Unauthenticated(HeroError):
    code = -32004
    default_message = "Unauthenticated"


class Forbidden(HeroError):
    code = -32005
    default_message = "Forbidden"


class Overloaded(HeroError):
    code = -32006
    default_message = "Overloaded"


class BackendUnavailable(HeroError):
    code = -32007
    default_message = "Redis unavailable"
