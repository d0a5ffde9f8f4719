"""jsonrpcserver does the routing; what it gets wrong never reaches a client.

The methods a ``Dispatcher`` registers with jsonrpcserver are real
jsonrpcserver methods (its own public ``dispatch`` serves them and answers
exactly like our transport does), the table handed to it is ours alone (its
global ``@method`` table is never consulted), and the defects DESIGN lists
are wrapped: a raise inside a method is never quoted, a param named like the
context argument is the contract's business, not a signature error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from gateway import errors
from gateway.rpc import codes, jsonrpc
from gateway.rpc.context import ANONYMOUS, CallContext
from gateway.rpc.dispatch import Dispatcher
from gateway.rpc.messages import Failure, Request
from gateway.rpc.protocol import handle_frame

SECRET = "s3cr3t-/srv/hero/internal.py"
CTX = CallContext(ANONYMOUS)

# After gateway.rpc.jsonrpc, which filters jsonrpcserver's import-time warning.
from jsonrpcserver import Success, async_dispatch, dispatcher, method  # noqa: E402
from jsonrpcserver.methods import global_methods  # noqa: E402


async def job_get(params: dict[str, Any], ctx: CallContext) -> Any:
    job_id = params["job_id"]
    if job_id == "boom":
        raise RuntimeError(SECRET)
    if job_id == "gone":
        raise errors.JobNotFound(job_id)
    return {"id": job_id, "script_type": "python", "status": "finished"}


DISPATCHER = Dispatcher({"job.get": job_get})


def frame(method_name: str, params: Any, id: Any = 1) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": method_name, "params": params, "id": id})


async def test_the_dispatcher_routes_through_jsonrpcserver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call is looked up by jsonrpcserver's router, in the table the
    Dispatcher registered with it (a spy around its real lookup)."""
    looked_up: list[tuple[object, str]] = []
    real = dispatcher.get_method

    def spy(methods: Any, name: str) -> Any:
        looked_up.append((methods, name))
        return real(methods, name)

    monkeypatch.setattr(dispatcher, "get_method", spy)
    answer = await DISPATCHER.dispatch(Request("job.get", {"job_id": "a"}, 1), CTX)
    assert answer is not None and not isinstance(answer, Failure)
    missing = await DISPATCHER.dispatch(Request("job.teleport", {}, 2), CTX)
    assert isinstance(missing, Failure) and missing.code == codes.METHOD_NOT_FOUND
    assert [name for _, name in looked_up] == ["job.get", "job.teleport"]
    assert all(table is DISPATCHER.registered for table, _ in looked_up)


@pytest.mark.parametrize(
    "params",
    [
        {"job_id": "a"},  # Success
        {"job_id": "gone"},  # a HeroError: -32001 with its data
        {"job_id": "boom"},  # a crash: bare -32603
        {"job_id": 7},  # the contract's params check: -32602 with the schema path
        {"job_id": "a", "ctx": 1},  # a param named like the context: still the contract's -32602
        ["a"],  # by position: refused by the contract, not by a signature bind
    ],
)
async def test_registered_methods_are_served_by_jsonrpcserver_alone(params: Any) -> None:
    """Handed to jsonrpcserver's own public dispatch, the registered methods give
    the answer our transport gives: they are complete jsonrpcserver methods
    returning its Success/Error, and our routing adds nothing to them."""
    text = frame("job.get", params)
    ours = await handle_frame(text, DISPATCHER, CTX)
    theirs = await async_dispatch(text, methods=DISPATCHER.registered, context=CTX)
    assert ours is not None and json.loads(theirs) == json.loads(ours)
    assert SECRET not in theirs


@pytest.fixture
def global_teleport() -> Iterator[None]:
    @method(name="job.get")
    async def teleport(ctx: Any, **params: Any) -> Any:
        return Success("from the global table")

    yield
    del global_methods["job.get"]


@pytest.mark.usefixtures("global_teleport")
async def test_jsonrpcserver_global_table_is_never_served() -> None:
    """A method in jsonrpcserver's global ``@method`` table and not in ours is
    not served: our table, bound to the contract, is the one it routes on."""
    empty = Dispatcher({})
    answer = await empty.dispatch(Request("job.get", {"job_id": "a"}, 1), CTX)
    assert answer == Failure(1, codes.METHOD_NOT_FOUND, "Method not found", {"method": "job.get"})
    served = await DISPATCHER.dispatch(Request("job.get", {"job_id": "a"}, 1), CTX)
    assert "from the global table" not in repr(served)


async def test_a_crash_inside_a_method_is_never_quoted_by_jsonrpcserver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A method registered with jsonrpcserver that raises makes it answer -32603
    with ``str(exc)`` as data (and log it): ``route`` answers it bare. Through a
    Dispatcher the raise never reaches jsonrpcserver at all."""

    async def leaky(ctx: Any, **params: Any) -> Any:
        raise RuntimeError(SECRET)

    raw = await async_dispatch(frame("leaky", {}), methods={"leaky": leaky}, context=CTX)
    assert SECRET in raw  # the defect being wrapped
    answer = await jsonrpc.route(Request("leaky", {}, 9), {"leaky": leaky}, CTX)
    assert answer == Failure(9, codes.INTERNAL_ERROR, codes.INTERNAL_ERROR_MESSAGE)

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="jsonrpcserver"):
        crashed = await DISPATCHER.dispatch(Request("job.get", {"job_id": "boom"}, 2), CTX)
    assert crashed == Failure(2, codes.INTERNAL_ERROR, codes.INTERNAL_ERROR_MESSAGE)
    assert not [r for r in caplog.records if r.name.startswith("jsonrpcserver")]


async def test_a_notification_is_routed_and_not_answered() -> None:
    seen: list[dict[str, Any]] = []

    async def record(params: dict[str, Any], ctx: CallContext) -> Any:
        seen.append(params)
        return {"jobs": [], "next_cursor": None}

    dispatcher = Dispatcher({"job.list": record})
    note = Request("job.list", {"limit": 5}, None, notification=True)
    assert await dispatcher.dispatch(note, CTX) is None
    assert seen == [{"limit": 5}]
