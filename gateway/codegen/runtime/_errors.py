"""The exceptions hero_client raises on its own, and the root of the server's.

Hand-written (the generator copies it verbatim as ``hero_client/_errors.py``);
the generated ``errors.py`` adds one ``RpcError`` subclass per server code.
Each such subclass enters ``ERRORS`` as it is defined, so the table of codes
is written once (by the classes) and ``error_for`` (which the connection
needs before any generated code exists) can still find them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ERRORS",
    "UNAUTHENTICATED",
    "CallTimeout",
    "ConnectionLost",
    "HeroClientError",
    "RpcError",
    "SubscriptionLost",
    "error_for",
]

#: JSON-RPC code of a refused key (the contract's Unauthenticated): no reconnect fixes it.
UNAUTHENTICATED = -32004


class HeroClientError(Exception):
    """Root of every error hero_client raises."""


class ConnectionLost(HeroClientError):
    """The connection dropped before the answer came: the server may or may not
    have acted on the call (retry only what is idempotent)."""


class CallTimeout(HeroClientError, TimeoutError):
    """No answer within the call's timeout."""


class SubscriptionLost(HeroClientError):
    """A subscription ended without being closed (it could not be resumed)."""


class RpcError(HeroClientError):
    """The server answered with a JSON-RPC error. ``code`` is the server's code,
    ``data`` its details (e.g. the failing schema path of -32602)."""

    code: int = 0

    def __init__(self, message: str, data: Any = None, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if code is not None:
            self.code = code

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that sets its own ``code`` is the class for that code."""
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            ERRORS[cls.code] = cls

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"


#: The exception class for each code the server answers (filled by errors.py).
ERRORS: dict[int, type[RpcError]] = {}


def error_for(code: int, message: str, data: Any = None) -> RpcError:
    """The exception for an error object (RpcError itself for codes not listed)."""
    cls = ERRORS.get(code)
    if cls is None:
        return RpcError(message, data, code)
    return cls(message, data)
