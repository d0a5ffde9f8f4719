"""Who may do what: the identity rules every method handler applies.

- No identity (auth required, not logged in) → Unauthenticated.
- ``anonymous`` exists only when the server runs without API keys; it is then
  unrestricted, like a local developer's own Redis.
- ``admin`` sees and touches every job and may use the admin methods.
- ``user`` acts as its caller_id: its new jobs carry it, and another caller's
  job is Forbidden (not hidden: the ids are not secrets, the contents are).
"""

from __future__ import annotations

from typing import Any

from gateway.errors import Forbidden, Unauthenticated
from gateway.rpc.backends import Supervisor
from gateway.rpc.context import CallContext, Identity


def identity(ctx: CallContext, *, auth_required: bool) -> Identity:
    """The caller, or Unauthenticated. An anonymous identity on a server that
    has keys is treated as no identity at all, whatever the transport set."""
    who = ctx.identity
    if who is None or (who.scope == "anonymous" and auth_required):
        raise Unauthenticated("Authenticate first: Authorization header or auth.login")
    return who


def require_admin(who: Identity) -> None:
    if who.scope == "user":
        raise Forbidden("This method needs an admin key")


def own_spec(who: Identity, spec: dict[str, Any]) -> dict[str, Any]:
    """A JobSpec as ``who`` may submit it: a user's jobs carry its caller_id."""
    if who.scope != "user":
        return spec
    return {**spec, "caller_id": who.caller_id}


def caller_filter(who: Identity, caller_id: str | None) -> str | None:
    """The caller_id a listing is limited to: a user sees only its own jobs."""
    if who.scope != "user":
        return caller_id
    if caller_id is not None and caller_id != who.caller_id:
        raise Forbidden("A user key may only list its own jobs")
    return who.caller_id


def check_caller(who: Identity, job_id: str, caller_id: str | None) -> None:
    if who.scope == "user" and caller_id != who.caller_id:
        raise Forbidden(f"Job {job_id} belongs to another caller", {"job_id": job_id})


async def check_owner(who: Identity, sup: Supervisor, job_id: str) -> None:
    """Forbidden unless ``who`` may touch the job (JobNotFound if there is none)."""
    if who.scope == "user":
        check_caller(who, job_id, await sup.owner(job_id))
