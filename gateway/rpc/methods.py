"""The method table: every method of the contract, each a thin handler.

A handler gets params already checked against the contract (so a JobSpec
goes to the supervisor marked ``validated``: it is not checked twice), applies the
identity rules (``access``), calls the supervisor and returns its answer as
the contract shapes it. No handler knows a Redis key or decides anything
about queues.

The Hero names (create_job, …) are the same handlers under their old names;
the contract marks them deprecated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gateway import contract
from gateway.errors import InvalidJob, InvalidParams, InvalidState, Unauthenticated
from gateway.rpc import access
from gateway.rpc.backends import Backends, JsonObject
from gateway.rpc.context import ANONYMOUS, CallContext, Identity, Subscriptions
from gateway.rpc.dispatch import Handler

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


def build_methods(backends: Backends) -> dict[str, Handler]:
    """Every served method, by name (checked against the contract by tests and
    by ``Dispatcher``)."""
    h = _Handlers(backends)
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
        self._sup = backends.supervisor
        self._keys = backends.keys
        self._script_types = backends.script_types

    def _who(self, ctx: CallContext) -> Identity:
        return access.identity(ctx, auth_required=self._keys is not None)

    async def _owned(self, ctx: CallContext, job_id: str) -> None:
        await access.check_owner(self._who(ctx), self._sup, job_id)

    # -- jobs --------------------------------------------------------------------

    async def job_create(self, params: Params, ctx: CallContext) -> JsonObject:
        spec = access.own_spec(self._who(ctx), params["job"])
        with _job_param():
            return await self._sup.create(spec, validated=True)

    async def job_start(self, params: Params, ctx: CallContext) -> JsonObject:
        await self._owned(ctx, params["job_id"])
        return await self._sup.start(params["job_id"])

    async def job_run(self, params: Params, ctx: CallContext) -> JsonObject:
        spec = access.own_spec(self._who(ctx), params["job"])
        with _job_param():
            return await self._sup.run(spec, params.get("wait"), validated=True)

    async def job_output(self, params: Params, ctx: CallContext) -> JsonObject:
        await self._owned(ctx, params["job_id"])
        return await self._sup.output(params["job_id"], params.get("wait"))

    async def job_status(self, params: Params, ctx: CallContext) -> JsonObject:
        await self._owned(ctx, params["job_id"])
        return await self._sup.status(params["job_id"])

    async def job_get(self, params: Params, ctx: CallContext) -> JsonObject:
        who = self._who(ctx)
        job = await self._sup.get(params["job_id"])
        access.check_caller(who, params["job_id"], job.get("caller_id"))
        return job

    async def job_list(self, params: Params, ctx: CallContext) -> JsonObject:
        caller_id = access.caller_filter(self._who(ctx), params.get("caller_id"))
        return await self._sup.list_jobs(
            status=params.get("status"),
            script_type=params.get("script_type"),
            caller_id=caller_id,
            cursor=params.get("cursor"),
            limit=params.get("limit", 50),
        )

    async def job_stop(self, params: Params, ctx: CallContext) -> JsonObject:
        await self._owned(ctx, params["job_id"])
        return await self._sup.stop(params["job_id"])

    async def job_delete(self, params: Params, ctx: CallContext) -> JsonObject:
        await self._owned(ctx, params["job_id"])
        return await self._sup.delete(params["job_id"])

    async def job_purge(self, params: Params, ctx: CallContext) -> JsonObject:
        access.require_admin(self._who(ctx))
        return await self._sup.purge(
            params.get("status", "finished"), older_than=params.get("older_than", 0.0)
        )

    async def job_logs(self, params: Params, ctx: CallContext) -> JsonObject:
        await self._owned(ctx, params["job_id"])
        return await self._sup.logs(params["job_id"])

    # -- subscriptions -------------------------------------------------------------

    async def job_subscribe(self, params: Params, ctx: CallContext) -> JsonObject:
        who = self._who(ctx)
        subs = _subscriptions(ctx)
        job_ids: list[str] | None = params.get("job_ids")
        for job_id in job_ids or ():
            await access.check_owner(who, self._sup, job_id)
        subscription = await subs.subscribe(
            job_ids=job_ids,
            script_type=params.get("script_type"),
            caller_id=who.caller_id if who.scope == "user" else None,
            since=params.get("since"),
        )
        return {"subscription": subscription}

    async def job_unsubscribe(self, params: Params, ctx: CallContext) -> JsonObject:
        self._who(ctx)
        return {"unsubscribed": await _subscriptions(ctx).unsubscribe(params["subscription"])}

    # -- queues, actors, stats ---------------------------------------------------------

    async def queue_stats(self, params: Params, ctx: CallContext) -> JsonObject:
        self._who(ctx)
        return {"queues": await self._sup.queue_stats(script_type=params.get("script_type"))}

    async def dlq_list(self, params: Params, ctx: CallContext) -> JsonObject:
        access.require_admin(self._who(ctx))
        entries = await self._sup.dlq_list(
            script_type=params.get("script_type"), limit=params.get("limit", 50)
        )
        return {"entries": entries}

    async def dlq_replay(self, params: Params, ctx: CallContext) -> JsonObject:
        access.require_admin(self._who(ctx))
        replayed = await self._sup.dlq_replay(params["script_type"], params.get("job_ids"))
        return {"replayed": replayed}

    async def actor_list(self, params: Params, ctx: CallContext) -> JsonObject:
        self._who(ctx)
        return {"actors": await self._sup.actors(script_type=params.get("script_type"))}

    async def stats_report(self, params: Params, ctx: CallContext) -> JsonObject | None:
        self._who(ctx)
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
        return self._who(ctx).as_dict()

    async def rpc_discover(self, params: Params, ctx: CallContext) -> JsonObject:
        return contract.served(self._script_types)


def _subscriptions(ctx: CallContext) -> Subscriptions:
    if ctx.subscriptions is None:
        raise InvalidState("Subscriptions need a WebSocket connection")
    return ctx.subscriptions


@contextmanager
def _job_param() -> Iterator[None]:
    """Re-raises the supervisor's InvalidJob (``data``: a list of
    ``{"field", "message", "schema_path"}`` relative to JobSpec) in the shape of
    every other -32602 (``{"path", "schema_path", "message", "errors"}``, paths
    under the ``job`` param, schema paths as contract locations)."""
    try:
        yield
    except InvalidJob as exc:
        found = [_job_problem(p) for p in exc.data or () if isinstance(p, dict)]
        if not found:
            raise
        raise InvalidParams(exc.message, {**found[0], "errors": found}) from exc


def _job_problem(problem: dict[str, Any]) -> dict[str, str]:
    field = str(problem.get("field") or "")
    steps = [s for s in str(problem.get("schema_path") or "").split("/") if s]
    return {
        "path": f"job.{field}" if field else "job",
        "schema_path": contract.locate(steps, _JOBSPEC),
        "message": str(problem.get("message", "")),
    }


_JOBSPEC = "/components/schemas/JobSpec"
