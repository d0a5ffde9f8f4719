"""The JSON-RPC 2.0 protocol error codes, taken from jsonrpcserver.

Server codes (-32001…-32007) and -32602/-32603 live on the exception classes
in ``gateway.errors``; the three protocol-level codes that no handler raises
(parse error, invalid request, method not found) come from here.

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

from jsonrpcserver.codes import (  # noqa: E402  (the filter must come first)
    ERROR_INVALID_REQUEST,
    ERROR_METHOD_NOT_FOUND,
    ERROR_PARSE_ERROR,
)
from jsonrpcserver.exceptions import JsonRpcError  # noqa: E402
from jsonrpcserver.sentinels import NODATA  # noqa: E402

from gateway.errors import HeroError, InvalidParams  # noqa: E402

PARSE_ERROR: int = ERROR_PARSE_ERROR
INVALID_REQUEST: int = ERROR_INVALID_REQUEST
METHOD_NOT_FOUND: int = ERROR_METHOD_NOT_FOUND
INVALID_PARAMS: int = InvalidParams.code
INTERNAL_ERROR: int = HeroError.code

#: The messages the JSON-RPC 2.0 specification gives each protocol code.
PARSE_ERROR_MESSAGE = "Parse error"
INVALID_REQUEST_MESSAGE = "Invalid Request"
METHOD_NOT_FOUND_MESSAGE = "Method not found"
INTERNAL_ERROR_MESSAGE: str = HeroError.default_message

__all__ = [
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_MESSAGE",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "INVALID_REQUEST_MESSAGE",
    "METHOD_NOT_FOUND",
    "METHOD_NOT_FOUND_MESSAGE",
    "NODATA",
    "PARSE_ERROR",
    "PARSE_ERROR_MESSAGE",
    "JsonRpcError",
]
