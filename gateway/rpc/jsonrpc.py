"""jsonrpcserver, the product's JSON-RPC library: imported here only, and wrapped.

It routes each Request to the method registered with it under that name and
builds the response from what the method returns (its ``Success`` /
``Error``). What it gets wrong is kept away from it rather than patched
(DESIGN, "Known traps"):

- it rejects a whole batch when one element is invalid: it is handed one
  valid Request at a time, already parsed and checked by ``protocol``, at
  its per-request steps (its method lookup and its call of the method), so
  its parser and its envelope check (a jsonschema walk) never run;
- it puts ``str(exc)`` in a -32603 (or a -32000 when it fails itself): the
  methods registered with it never raise, and any -32603/-32000 it builds
  anyway is answered bare here;
- it fails a batch on an unserialisable result: its responses are turned
  into ``messages`` values and ``protocol`` serialises each on its own.

jsonrpcserver 5.0.9 calls the deprecated ``importlib.resources.read_text`` at
import time, which warns twice: once attributed to ``jsonrpcserver.main`` and
once more, for the ``open_text`` it calls inside, to
``importlib.resources._legacy`` (a frame only a legacy call can produce). Those
two are filtered by module and message before the import, so every other
DeprecationWarning still shows.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import warnings
from collections.abc import Sequence

warnings.filterwarnings(
    "ignore",
    message=r"read_text is deprecated",
    category=DeprecationWarning,
    module=r"jsonrpcserver\.main$",
)
warnings.filterwarnings(
    "ignore",
    message=r"open_text is deprecated",
    category=DeprecationWarning,
    module=r"importlib\.resources\._legacy$",
)

from typing import Any  # noqa: E402  (the filter must come first)

from jsonrpcserver import Error, Result, Success, async_dispatcher, dispatcher  # noqa: E402
from jsonrpcserver.codes import (  # noqa: E402
    ERROR_INTERNAL_ERROR,
    ERROR_INVALID_REQUEST,
    ERROR_METHOD_NOT_FOUND,
    ERROR_PARSE_ERROR,
    ERROR_SERVER_ERROR,
)
from jsonrpcserver.dispatcher import to_response  # noqa: E402
from jsonrpcserver.exceptions import JsonRpcError  # noqa: E402
from jsonrpcserver.methods import Method  # noqa: E402
from jsonrpcserver.request import Request as _TheirRequest  # noqa: E402
from jsonrpcserver.sentinels import NODATA, NOID  # noqa: E402
from oslash.either import Left  # type: ignore[import-untyped]  # noqa: E402

from gateway.errors import HeroError  # noqa: E402
from gateway.rpc import messages  # noqa: E402
from gateway.rpc.messages import Failure, Request, Response  # noqa: E402

log = logging.getLogger("gateway.rpc")

#: Its errors that may carry ``str(exc)`` of something that went wrong inside.
_LEAKY = frozenset({ERROR_INTERNAL_ERROR, ERROR_SERVER_ERROR})


async def route(request: Request, methods: dict[str, Method], context: Any) -> Response | None:
    """jsonrpcserver's answer to one parsed Request (None for a notification).

    The Request goes to jsonrpcserver's own per-request steps (its method
    lookup and its call, see ``accepts_any``), and its ``to_response`` builds the
    response from what the method returned; not
    through its entry point, which would parse and validate an envelope
    checked already and gather a task even for one request: a lone call runs
    in its caller's task. Its Request is built here as its ``create_request``
    builds it, and its response read as it stands, without the dict its
    ``to_serializable_one`` would make on the way. Should jsonrpcserver fail
    itself, the request is answered a bare -32603.

    ``methods`` must be a dict of methods that never raise and take any
    params (see ``Dispatcher`` and ``accepts_any``); ``context`` is passed to
    each as its first argument.
    """
    params = [] if request.params is None else request.params
    theirs = _TheirRequest(request.method, params, NOID if request.notification else request.id)
    try:
        # jsonrpcserver's ``dispatch_request`` without its params bind (see
        # ``accepts_any``), spelled here rather than in a coroutine of its own:
        # one coroutine fewer for every call a batch makes.
        result = dispatcher.get_method(methods, theirs.method)
        if not isinstance(result, Left):
            result = await async_dispatcher.call(theirs, context, result._value)
        if request.notification:
            return None
        response = to_response(theirs, result)
    except Exception:
        log.exception("jsonrpcserver failed", extra={"method": request.method})
        return None if request.notification else _internal(request)
    return _ours(request, response)


async def route_many(
    requests: Sequence[Request], methods: dict[str, Method], context: Any
) -> list[Response | None]:
    """``route`` for each of a frame's Requests, in order; several run
    concurrently (a task each), one runs in the caller's task. The tasks are
    awaited in order rather than gathered: they end in the order they were
    answered, so this task wakes once, and no callback runs per task."""
    if len(requests) == 1:
        return [await route(requests[0], methods, context)]
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(route(r, methods, context)) for r in requests]
    try:
        return [await task for task in tasks]
    finally:
        for task in tasks:  # cancelled (the connection went): so are the calls
            task.cancel()


def _ours(request: Request, response: Any) -> Response:
    """Its response as ours, with nothing internal left in it."""
    if not isinstance(response, Left):
        return messages.Success(request.id, response._value.result)
    error = response._error
    code = error.code
    if code == ERROR_METHOD_NOT_FOUND:
        return Failure(request.id, code, error.message, {"method": request.method})
    if code in _LEAKY:
        return _internal(request)
    return Failure(request.id, code, error.message, None if error.data is NODATA else error.data)


def _internal(request: Request) -> Failure:
    return Failure(request.id, ERROR_INTERNAL_ERROR, HeroError.default_message)


def accepts_any(method: Method) -> Method:
    """``method``, which must be of signature ``(ctx, /, *args, **kwargs)``
    (else TypeError): any params bind to it, so jsonrpcserver's params bind,
    left out by ``route``, could never refuse a call to it. The context is
    positional-only so a param may be called ``ctx`` too.

    ``route`` takes jsonrpcserver's ``dispatch_request`` apart to leave the
    bind out: its method lookup (a Method not found result for a name not in
    the table), then its call of the method, which maps what the method
    raises into a result. The bind is ``inspect.signature(method).bind(...)``
    on every request, 3.4 µs of the 7 µs jsonrpcserver took per request
    (bench/analysis.md), and it always passes for the methods let in here: the
    contract's params check is the one that answers -32602."""
    kinds = [p.kind for p in inspect.signature(method).parameters.values()]
    if kinds != [_P.POSITIONAL_ONLY, _P.VAR_POSITIONAL, _P.VAR_KEYWORD]:
        raise TypeError(f"not (ctx, /, *args, **kwargs): {inspect.signature(method)}")
    return method


_P = inspect.Parameter


def failure(code: int, message: str, data: Any = None) -> Result:
    """An ``Error`` result; ``data`` None is left out of the response."""
    return Error(code, message, NODATA if data is None else data)


__all__ = [
    "ERROR_INTERNAL_ERROR",
    "ERROR_INVALID_REQUEST",
    "ERROR_METHOD_NOT_FOUND",
    "ERROR_PARSE_ERROR",
    "NODATA",
    "JsonRpcError",
    "Method",
    "Result",
    "Success",
    "accepts_any",
    "failure",
    "route",
    "route_many",
]
