"""A frame's requests reach jsonrpcserver's per-request step; what that must not change.

The cheaper path (``jsonrpc.route_many``, ``jsonrpc.bind_any``, the parser's
depth-only walk for plain ASCII frames) answers exactly what the element by
element path answered: the same binding, every element on its own, the
Unicode and depth rules inside long batches too.
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
    ("args", "kwargs"),
    [((CTX,), {}), ((CTX, 1, 2), {}), ((CTX,), {"a": 1}), ((CTX,), {"ctx": 5}), ((), {})],
)
def test_bind_any_binds_like_the_signature_it_replaces(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    async def method(ctx: Any, /, *args: Any, **kwargs: Any) -> Any:
        return None

    reference = inspect.signature(method)
    fast = inspect.signature(jsonrpc.bind_any(method))
    try:
        expected = reference.bind(*args, **kwargs).arguments
    except TypeError:
        with pytest.raises(TypeError):
            fast.bind(*args, **kwargs)
        return
    assert fast.bind(*args, **kwargs).arguments == expected


def test_bind_any_refuses_another_signature() -> None:
    async def method(ctx: Any, job_id: str) -> Any:
        return None

    with pytest.raises(TypeError):
        jsonrpc.bind_any(method)


async def test_a_frame_is_answered_in_order_each_request_routed_by_jsonrpcserver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jsonrpcserver import async_dispatcher

    routed: list[str] = []
    real = async_dispatcher.dispatch_request

    async def spy(methods: Any, context: Any, request: Any) -> Any:
        routed.append(request.method)
        return await real(methods, context, request)

    monkeypatch.setattr(jsonrpc, "dispatch_request", spy)
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

    real = async_dispatcher.dispatch_request

    async def broken(methods: Any, context: Any, request: Any) -> Any:
        if request.params.get("job_id") == "b":
            raise RuntimeError("inside jsonrpcserver")
        return await real(methods, context, request)

    monkeypatch.setattr(jsonrpc, "dispatch_request", broken)
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
