"""Who may do what: each method's scope, declared once, enforced once.

Every method of the contract carries an ``x-scope`` (``openrpc/openrpc.json``);
the dispatcher asks ``Access`` before any handler runs, so a handler
cannot forget a check and a method without a scope cannot be served
(``Dispatcher`` refuses to bind it).

Scopes:

- ``public``: anyone, before authenticating too (``auth.login``, ``rpc.discover``),
  on a WebSocket; over HTTP, while keys exist, a POST needs a valid key
  before its body is read (``rpc/app.py``; the contract is also at
  ``GET /openrpc.json``).
- ``user``: any identity; the method touches no job (stats, actors, whoami).
- ``owner``: any identity; for a ``user`` key the method sees only its own
  jobs. A job id it names (``job_id``, ``job_ids``) that belongs to another
  caller, or to no caller (an outside producer's job), is answered exactly
  like a missing one (``JobNotFound``): ids of others are not even
  confirmed. The job it submits (``job``) and the listing or subscription it
  asks for (``caller_id``) are its own: ``admit`` sets ``caller_id`` in the
  params. A job a method names (``job_id``, each of ``job_ids``) is checked
  where it is read or changed, in the same Redis command or Function
  (``supervisor/reads.py``, hero.lua's ``callers``), given that
  ``caller_id``: an id deleted and taken by another caller meanwhile answers
  as missing, and nothing is looked up here first. That a submitted id is
  held by another caller is found atomically in Redis, where the job is
  created (``-32005``, see ``Supervisor.create``).
- ``admin``: an admin key.

Identities: no identity (auth required, not logged in) is refused everywhere
but ``public``; ``anonymous`` exists only when the server runs without API
keys and is then unrestricted, like a local developer's own Redis; ``admin``
sees and touches every job.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from gateway import contract
from gateway.errors import Forbidden, Unauthenticated
from gateway.rpc.context import CallContext, Identity

SCOPES = ("public", "user", "owner", "admin")


def scope_of(method: str) -> str:
    """A method's declared scope; ``KeyError``/``ValueError`` when it has none
    or an unknown one (a server must not start with such a method)."""
    scope = contract.scope(method)
    if scope not in SCOPES:
        raise ValueError(f"{method}: unknown x-scope {scope!r}")
    return scope


def visible_queues(who: Identity, queues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The queues ``who`` may see in ``queue.stats``. Group and instance names
    come from callers' JobSpecs, and a queue's depth and age tell when its
    jobs' owner is busy: a user key sees the type-level queues only (their
    depths are shared by everyone, like a public status page)."""
    if who.scope != "user":
        return queues
    return [queue for queue in queues if queue["group"] is None]


class Access:
    """The identity rules of one method table.

    ``auth_required``: the table serves a server with API keys (an
    ``anonymous`` identity is then no identity). The jobs a call names are
    the handler's reads' to check (see the module's docstring)."""

    def __init__(self, *, auth_required: bool = False) -> None:
        self._auth_required = auth_required

    def enter(self, scope: str, ctx: CallContext) -> Identity | None:
        """Who may call a method of ``scope``, checked before its params are
        looked at, so a caller without the right identity learns nothing
        about the method's params (-32004 / -32005 come before -32602).
        None for a public method."""
        if scope == "public":
            return None
        who = self.identity(ctx)
        if scope == "admin" and who.scope == "user":
            raise Forbidden("This method needs an admin key")
        return who

    @staticmethod
    def restricts(who: Identity | None, scope: str) -> TypeGuard[Identity]:
        """Whether ``who`` (from ``enter``) may use a call's checked params only
        as ``admit`` narrows them: a user's ``owner`` call reaches only that
        user's jobs."""
        return who is not None and who.scope == "user" and scope == "owner"

    def identity(self, ctx: CallContext) -> Identity:
        """The caller, or Unauthenticated. An anonymous identity on a server that
        has keys is treated as no identity at all, whatever the transport set."""
        who = ctx.identity
        if who is None or (who.scope == "anonymous" and self._auth_required):
            raise Unauthenticated("Authenticate first: Authorization header or auth.login")
        return who

    def admit(self, who: Identity, params: dict[str, Any]) -> dict[str, Any]:
        """A user's checked params for an ``owner`` method (see ``restricts``):
        its jobs only. The jobs it names are left to the handler's reads and
        changes, which are given the ``caller_id`` (see the module's docstring)."""
        mine = who.caller_id
        wanted = params.get("caller_id")
        if wanted is not None and wanted != mine:
            raise Forbidden("A user key may only list its own jobs")
        owned = {**params, "caller_id": mine}
        if isinstance(params.get("job"), dict):
            owned["job"] = {**params["job"], "caller_id": mine}
        return owned
