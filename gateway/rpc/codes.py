"""The JSON-RPC 2.0 protocol error codes, taken from jsonrpcserver.

Server codes (-32001…-32007) and -32602/-32603 live on the exception classes
in ``gateway.errors``; the three protocol-level codes that no handler raises
(parse error, invalid request, method not found) come from jsonrpcserver,
through ``jsonrpc`` (its one importer).
"""

from __future__ import annotations

from gateway.errors import HeroError, InvalidParams
from gateway.rpc.jsonrpc import (
    ERROR_INVALID_REQUEST,
    ERROR_METHOD_NOT_FOUND,
    ERROR_PARSE_ERROR,
    JsonRpcError,
)

PARSE_ERROR: int = ERROR_PARSE_ERROR
INVALID_REQUEST: int = ERROR_INVALID_REQUEST
METHOD_NOT_FOUND: int = ERROR_METHOD_NOT_FOUND
INVALID_PARAMS: int = InvalidParams.code
INTERNAL_ERROR: int = HeroError.code

#: The messages the JSON-RPC 2.0 specification gives each protocol code.
PARSE_ERROR_MESSAGE = "Parse error"
INVALID_REQUEST_MESSAGE = "Invalid Request"
INTERNAL_ERROR_MESSAGE: str = HeroError.default_message

__all__ = [
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_MESSAGE",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "INVALID_REQUEST_MESSAGE",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PARSE_ERROR_MESSAGE",
    "JsonRpcError",
]
