"""A frame's requests reach jsonrpcserver's per-request steps; what that must not change.

The cheaper path (``jsonrpc.route_many``, ``jsonrpc.route`` without
jsonrpcserver's params bind, the parser's depth-only walk for plain ASCII
frames) answers exactly what the element by element path answered: the same
binding, every element on its own, the Unicode and depth rules inside long
batches too.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from gateway.rpc import codes, jsonrpc, wellformed
from gateway.rpc.context import ANONYMOUS, CallContext
from gateway.rpc.dispatch import Dispatcher
from gateway.rpc.messages import Failure, Request, Success
from gateway.rpc.protocol import parse_frame

CTX = CallContext(ANONYMOUS)


async def job_get(params: dict[str, Any], ctx: CallContext) -> Any:
    return {"id": params["job_id"], "script_type": "python", "status": "finished"}


DISPATCHER = Dispatcher({"job.get": job_get})


@pytest.mark.parametrize(
    "params", [[], [1, 2], {"a": 1}, {"ctx": 5}, {"job_id": "a", "extra": [1]}]
)
async def test_leaving_out_the_params_bind_answers_as_jsonrpcserver_did(params: Any) -> None:
    """``route`` skips jsonrpcserver's params bind; for every registered method
    that bind passes whatever the params, so its own ``dispatch_request``
    gives the same result ``route`` gives."""
    from jsonrpcserver import async_dispatcher
    from jsonrpcserver.dispatcher import to_response
    from jsonrpcserver.request import Request as TheirRequest

    arguments = (CTX, *params) if isinstance(params, list) else (CTX,)
    named = params if isinstance(params, dict) else {}
    for registered in DISPATCHER.registered.values():
        inspect.signature(registered).bind(*arguments, **named)  # what the bind would do
    for name in [*DISPATCHER.registered, "job.teleport"]:
        theirs = TheirRequest(name, params, 1)
        _, expected = await async_dispatcher.dispatch_request(DISPATCHER.registered, CTX, theirs)
        ours = await jsonrpc.route(Request(name, params, 1), DISPATCHER.registered, CTX)
        assert ours == jsonrpc._ours(Request(name, params, 1), to_response(theirs, expected))


def test_a_method_that_does_not_take_any_params_is_refused() -> None:
    """Only a method any params bind to may skip jsonrpcserver's bind."""

    async def method(ctx: Any, job_id: str) -> Any:
        return None

    with pytest.raises(TypeError):
        jsonrpc.accepts_any(method)


async def test_a_frame_is_answered_in_order_each_request_routed_by_jsonrpcserver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jsonrpcserver import dispatcher

    routed: list[str] = []
    real = dispatcher.get_method

    def spy(methods: Any, name: str) -> Any:
        routed.append(name)
        return real(methods, name)

    monkeypatch.setattr(dispatcher, "get_method", spy)
    bad = Failure(7, codes.INVALID_REQUEST, codes.INVALID_REQUEST_MESSAGE)
    elements: list[Request | Failure | None] = [
        Request("job.get", {"job_id": "a"}, 1),
        bad,
        Request("job.get", {"job_id": "n"}, None, notification=True),
        None,
        Request("job.teleport", {}, "x"),
    ]
    answers = await DISPATCHER.dispatch_many(elements, CTX)
    assert routed == ["job.get", "job.get", "job.teleport"]
    assert isinstance(answers[0], Success) and answers[0].id == 1
    assert answers[1] is bad and answers[2] is None and answers[3] is None
    assert isinstance(answers[4], Failure) and answers[4].code == codes.METHOD_NOT_FOUND


async def test_jsonrpcserver_failing_itself_costs_only_that_request(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from jsonrpcserver import async_dispatcher

    real = async_dispatcher.call

    async def broken(request: Any, context: Any, method: Any) -> Any:
        if request.params.get("job_id") == "b":
            raise RuntimeError("inside jsonrpcserver")
        return await real(request, context, method)

    monkeypatch.setattr(async_dispatcher, "call", broken)
    requests = [
        Request("job.get", {"job_id": "a"}, 1),
        Request("job.get", {"job_id": "b"}, 2),
        Request("job.get", {"job_id": "b"}, None, notification=True),
    ]
    answers = await jsonrpc.route_many(requests, DISPATCHER.registered, CTX)
    assert isinstance(answers[0], Success)
    assert answers[1:] == [Failure(2, codes.INTERNAL_ERROR, codes.INTERNAL_ERROR_MESSAGE), None]
    assert "inside jsonrpcserver" not in repr(answers)
    assert any("jsonrpcserver failed" in r.getMessage() for r in caplog.records)


def _batch(extra: dict[str, Any], *, ensure_ascii: bool = False, size: int = 40) -> str:
    calls = [
        {"jsonrpc": "2.0", "method": "job.get", "params": {"job_id": f"j{i}"}, "id": i}
        for i in range(size)
    ]
    return json.dumps([*calls, extra], ensure_ascii=ensure_ascii)


def test_a_deep_element_in_a_long_plain_batch_is_still_refused() -> None:
    deep: Any = "x"
    for _ in range(wellformed.MAX_DEPTH + 1):
        deep = [deep]
    text = _batch({"jsonrpc": "2.0", "method": "job.get", "params": {"p": deep}, "id": "d"})
    assert text.isascii() and "\\u" not in text
    *fine, last = parse_frame(text).elements
    assert all(isinstance(e, Request) for e in fine)
    assert isinstance(last, Failure) and last.code == codes.INVALID_PARAMS
    assert last.data["message"] == wellformed.TOO_DEEP


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_lone_surrogate_in_a_long_batch_is_still_refused(ensure_ascii: bool) -> None:
    element = {"jsonrpc": "2.0", "method": "job.get", "params": {"p": "é\ud800"}, "id": "u"}
    text = _batch(element, ensure_ascii=ensure_ascii)
    last = parse_frame(text).elements[-1]
    assert isinstance(last, Failure) and last.code == codes.INVALID_PARAMS
    assert last.data["path"] == "p"
