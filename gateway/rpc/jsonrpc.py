"""jsonrpcserver, the product's JSON-RPC library: imported here only, and wrapped.

It routes each Request to the method registered with it under that name and
builds the response from what the method returns (its ``Success`` /
``Error``). What it gets wrong is kept away from it rather than patched
(DESIGN, "Known traps"):

- it rejects a whole batch when one element is invalid: it is handed one
  element at a time, already parsed and checked by ``protocol``, so its
  deserializer just hands the element over and its validator (a jsonschema
  walk of the envelope) is replaced by a no-op;
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

import warnings

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

from jsonrpcserver import Error, Result, Success, async_dispatch_to_response  # noqa: E402
from jsonrpcserver.codes import (  # noqa: E402
    ERROR_INTERNAL_ERROR,
    ERROR_INVALID_REQUEST,
    ERROR_METHOD_NOT_FOUND,
    ERROR_PARSE_ERROR,
    ERROR_SERVER_ERROR,
)
from jsonrpcserver.exceptions import JsonRpcError  # noqa: E402
from jsonrpcserver.methods import Method  # noqa: E402
from jsonrpcserver.response import to_serializable_one  # noqa: E402
from jsonrpcserver.sentinels import NODATA  # noqa: E402

from gateway.errors import HeroError  # noqa: E402
from gateway.rpc import messages  # noqa: E402
from gateway.rpc.messages import Failure, Request, Response  # noqa: E402

#: Its errors that may carry ``str(exc)`` of something that went wrong inside.
_LEAKY = frozenset({ERROR_INTERNAL_ERROR, ERROR_SERVER_ERROR})


async def route(request: Request, methods: dict[str, Method], context: Any) -> Response | None:
    """jsonrpcserver's answer to one parsed Request (None for a notification).

    ``methods`` must be a dict of methods that never raise (see ``Dispatcher``);
    ``context`` is passed to each as its first argument.
    """
    element: dict[str, Any] = {"jsonrpc": "2.0", "method": request.method}
    if request.params is not None:
        element["params"] = request.params
    if not request.notification:
        element["id"] = request.id
    answer = await async_dispatch_to_response(
        "",
        methods,
        context=context,
        deserializer=lambda _text: element,
        validator=_parsed,
        post_process=to_serializable_one,
    )
    if answer is None:
        return None
    return _ours(request, answer)


def _parsed(element: Any) -> Any:
    """The envelope check jsonrpcserver would run (a jsonschema walk), already
    done by ``protocol.parse_element``."""
    return element


def _ours(request: Request, wire: Any) -> Response:
    """Its serialisable response as ours, with nothing internal left in it."""
    if "result" in wire:
        return messages.Success(request.id, wire["result"])
    error = wire["error"]
    code = error["code"]
    if code == ERROR_METHOD_NOT_FOUND:
        return Failure(request.id, code, error["message"], {"method": request.method})
    if code in _LEAKY:
        return Failure(request.id, ERROR_INTERNAL_ERROR, HeroError.default_message)
    return Failure(request.id, code, error["message"], error.get("data"))


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
    "failure",
    "route",
]
