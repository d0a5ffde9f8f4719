"""The method table: every method of the contract, each a thin handler.

A handler gets params already checked against the contract (so a ``job``
param becomes a ``JobSpec`` here, checked only for what a schema cannot know,
the configured types) and
already admitted by the method's declared scope (``access``, applied by the
dispatcher: a user's ``job`` and ``caller_id`` are its own; the jobs it names
are checked to be its own by the supervisor's reads), calls the supervisor
and returns its answer as the contract shapes it. No handler knows a Redis
key or decides anything about queues.

A handler that only hands its params on returns the supervisor's awaitable
rather than awaiting it in a coroutine of its own: the dispatcher awaits it
in the same ``try``, so what it raises is answered the same, and each such
call (every ``job.start`` of a batch) is one coroutine frame shorter
(docs/performance.md).

The Hero names (create_job, …) are the same handlers under their old names;
the contract marks them deprecated.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from gateway import contract
from gateway.errors import InvalidJob, InvalidParams, InvalidState, JobNotFound, Unauthenticated
from gateway.rpc.access import Access, visible_queues
from gateway.rpc.backends import Backends, JsonObject
from gateway.rpc.context import ANONYMOUS, CallContext, Identity, Subscriptions
from gateway.rpc.dispatch import Dispatcher, Handler, Observer

#: Hero's method names and the methods they are now.
HERO_ALIASES: dict[str, str] = {
    "create_job": "job.create",
    "start_job": "job.start",
    "run_job": "job.run",
    "get_job_status": "job.status",
    "get_job_output": "job.output",
    "get_job_logs": "job.logs",
    "list_jobs": "job.list",
    "stop_job": "job.stop",
    "delete_job": "job.delete",
}

Params = dict[str, Any]


def build_dispatcher(
    backends: Backends, *, check_results: bool = False, observe: Observer | None = None
) -> Dispatcher:
    """The served method table, with the access rules of ``backends`` (API
    keys or none)."""
    h = _Handlers(backends)
    return Dispatcher(_table(h), access=h.access, check_results=check_results, observe=observe)


def build_methods(backends: Backends) -> dict[str, Handler]:
    """Every served method, by name (checked against the contract by tests and
    by ``Dispatcher``)."""
    return _table(_Handlers(backends))


def _table(h: _Handlers) -> dict[str, Handler]:
    table: dict[str, Handler] = {
        "job.create": h.job_create,
        "job.start": h.job_start,
        "job.run": h.job_run,
        "job.output": h.job_output,
        "job.status": h.job_status,
        "job.get": h.job_get,
        "job.list": h.job_list,
        "job.stop": h.job_stop,
        "job.delete": h.job_delete,
        "job.purge": h.job_purge,
        "job.logs": h.job_logs,
        "job.subscribe": h.job_subscribe,
        "job.unsubscribe": h.job_unsubscribe,
        "queue.stats": h.queue_stats,
        "queue.dlq.list": h.dlq_list,
        "queue.dlq.replay": h.dlq_replay,
        "actor.list": h.actor_list,
        "stats.report": h.stats_report,
        "auth.login": h.auth_login,
        "auth.whoami": h.auth_whoami,
        "rpc.discover": h.rpc_discover,
    }
    for old, new in HERO_ALIASES.items():
        table[old] = table[new]
    return table


class _Handlers:
    def __init__(self, backends: Backends) -> None:
        self._backends = backends
        self._sup = backends.supervisor
        self._keys = backends.keys
        self.access = Access(auth_required=backends.keys is not None)
        self._script_types = backends.script_types

    # -- jobs --------------------------------------------------------------------

    async def job_create(self, params: Params, ctx: CallContext) -> JsonObject:
        with _JOB_PARAM:  # the configured types here, prerequisites in the supervisor
            return await self._sup.create(self._backends.job_spec(params["job"]))

    def job_start(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.start(params["job_id"], params.get("caller_id"))

    async def job_run(self, params: Params, ctx: CallContext) -> JsonObject:
        with _JOB_PARAM:  # the configured types here, prerequisites in the supervisor
            return await self._sup.run(self._backends.job_spec(params["job"]), params.get("wait"))

    def job_output(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        """A user's ``caller_id`` (set by ``access``) holds the wait to that
        user's job: the id may be deleted and taken by another caller meanwhile."""
        return self._sup.output(
            params["job_id"], params.get("wait"), caller_id=params.get("caller_id")
        )

    def job_status(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.status(params["job_id"], params.get("caller_id"))

    def job_get(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.get(params["job_id"], params.get("caller_id"))

    def job_list(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.list_jobs(
            status=params.get("status"),
            script_type=params.get("script_type"),
            caller_id=params.get("caller_id"),
            cursor=params.get("cursor"),
            limit=params.get("limit", 50),
        )

    def job_stop(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.stop(params["job_id"], params.get("caller_id"))

    async def job_delete(self, params: Params, ctx: CallContext) -> JsonObject:
        """A user (``caller_id`` set by ``access``) is told a job that is not
        there, or not theirs, is not found; an admin that nothing was deleted."""
        caller_id = params.get("caller_id")
        answer = await self._sup.delete(params["job_id"], caller_id)
        if caller_id is not None and not answer["deleted"]:
            raise JobNotFound(params["job_id"])
        return answer

    def job_purge(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.purge(
            params.get("status", "finished"), older_than=params.get("older_than", 0.0)
        )

    def job_logs(self, params: Params, ctx: CallContext) -> Awaitable[JsonObject]:
        return self._sup.logs(params["job_id"], params.get("caller_id"))

    # -- subscriptions -------------------------------------------------------------

    async def job_subscribe(self, params: Params, ctx: CallContext) -> JsonObject:
        """A user's ``job_ids`` are each read for that user first: another
        caller's job answers as missing, as in ``job.status``. (The feed itself
        carries only the user's events, ``caller_id`` being set by ``access``.)"""
        if Access.restricts(ctx.identity, "owner"):
            for job_id in params.get("job_ids") or ():
                await self._sup.status(job_id, params["caller_id"])
        subscription = await _subscriptions(ctx).subscribe(
            job_ids=params.get("job_ids"),
            script_type=params.get("script_type"),
            caller_id=params.get("caller_id"),
            since=params.get("since"),
        )
        return {"subscription": subscription}

    async def job_unsubscribe(self, params: Params, ctx: CallContext) -> JsonObject:
        return {"unsubscribed": await _subscriptions(ctx).unsubscribe(params["subscription"])}

    # -- queues, actors, stats ---------------------------------------------------------

    async def queue_stats(self, params: Params, ctx: CallContext) -> JsonObject:
        queues = await self._sup.queue_stats(script_type=params.get("script_type"))
        return {"queues": visible_queues(self.access.identity(ctx), queues)}

    async def dlq_list(self, params: Params, ctx: CallContext) -> JsonObject:
        entries = await self._sup.dlq_list(
            script_type=params.get("script_type"), limit=params.get("limit", 50)
        )
        return {"entries": entries}

    async def dlq_replay(self, params: Params, ctx: CallContext) -> JsonObject:
        replayed = await self._sup.dlq_replay(params["script_type"], params.get("job_ids"))
        return {"replayed": replayed}

    async def actor_list(self, params: Params, ctx: CallContext) -> JsonObject:
        return {"actors": await self._sup.actors(script_type=params.get("script_type"))}

    async def stats_report(self, params: Params, ctx: CallContext) -> JsonObject | None:
        return await self._sup.report()

    # -- auth, discovery -------------------------------------------------------------

    async def auth_login(self, params: Params, ctx: CallContext) -> JsonObject:
        """Without a key store every connection is anonymous: say so."""
        if self._keys is None:
            return (ctx.identity or ANONYMOUS).as_dict()
        found = await self._keys.verify(params["key"])
        if found is None:
            raise Unauthenticated("Unknown or revoked API key")
        ctx.identity = Identity.from_mapping(found)
        return ctx.identity.as_dict()

    async def auth_whoami(self, params: Params, ctx: CallContext) -> JsonObject:
        return self.access.identity(ctx).as_dict()

    async def rpc_discover(self, params: Params, ctx: CallContext) -> JsonObject:
        return contract.served(self._script_types)


def _subscriptions(ctx: CallContext) -> Subscriptions:
    if ctx.subscriptions is None:
        raise InvalidState("Subscriptions need a WebSocket connection")
    return ctx.subscriptions


class _JobParam:
    """Re-raises an InvalidJob (the model's or the supervisor's; ``data``: a list of
    ``{"field", "message", "schema_path"}`` relative to JobSpec) in the shape of
    every other -32602 (``{"path", "schema_path", "message", "errors"}``, paths
    under the ``job`` param, schema paths as contract locations).

    A class rather than a ``contextlib.contextmanager``: every ``job.create``
    enters it, and a generator's context manager costs a generator and three
    calls through contextlib each time (0.9 against 0.2 µs, ``timeit``)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if not isinstance(exc, InvalidJob):
            return
        found = [_job_problem(p) for p in exc.data or () if isinstance(p, dict)]
        if found:
            raise InvalidParams(exc.message, {**found[0], "errors": found}) from exc


_JOB_PARAM = _JobParam()


def _job_problem(problem: dict[str, Any]) -> dict[str, str]:
    field = str(problem.get("field") or "")
    steps = [s for s in str(problem.get("schema_path") or "").split("/") if s]
    return {
        "path": f"job.{field}" if field else "job",
        "schema_path": contract.locate(steps, _JOBSPEC),
        "message": str(problem.get("message", "")),
    }


_JOBSPEC = "/components/schemas/JobSpec"
