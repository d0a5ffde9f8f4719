"""Who is calling, and what the connection can do for a handler.

One ``CallContext`` lives as long as its connection (a WebSocket) or its
request (an HTTP POST). It is mutable on purpose: ``auth.login`` replaces the
identity for every later call on the same socket.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

Scope = Literal["user", "admin", "anonymous"]
SCOPES: tuple[Scope, ...] = ("user", "admin", "anonymous")


@dataclass(frozen=True, slots=True)
class Identity:
    """The contract's Identity. A user acts as its ``caller_id``: it may only
    see and touch jobs carrying that caller id, so it must have one.
    ``key_id`` names the API key it was proven with (for revocation); it is
    never shown, printed or compared."""

    name: str
    scope: Scope
    caller_id: str | None = None
    key_id: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}")
        if self.scope == "user" and not self.caller_id:
            raise ValueError("a user identity needs a caller_id")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Identity:
        """From what a key store answers: ``{"name", "scope", "caller_id", "key_id"}``."""
        return cls(
            str(data["name"]), cast(Scope, data["scope"]), data.get("caller_id"), data.get("key_id")
        )

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "scope": self.scope, "caller_id": self.caller_id}


#: The identity of every connection when the server runs without API keys.
ANONYMOUS = Identity("anonymous", "anonymous")


class Notify(Protocol):
    """Sends a JSON-RPC notification (a request without id) to the client."""

    def __call__(self, method: str, params: dict[str, Any]) -> Awaitable[None]: ...


class Subscriptions(Protocol):
    """A connection's subscriptions (wired by the WebSocket layer). They end
    with the connection; events go out through the connection's ``Notify``."""

    async def subscribe(
        self,
        *,
        job_ids: Collection[str] | None,
        script_type: str | None,
        caller_id: str | None,
        since: str | None,
    ) -> str:
        """Start one; returns its id. ``caller_id`` limits it to that caller's jobs."""
        ...

    async def unsubscribe(self, subscription: str) -> bool:
        """End one; false if this connection has no such subscription."""
        ...


@dataclass(slots=True)
class CallContext:
    """What a handler knows about its caller.

    ``identity`` is ``None`` until the connection authenticates (only possible
    when the server has API keys). ``notify`` and ``subscriptions`` are ``None``
    on transports that cannot push (HTTP POST).
    """

    identity: Identity | None
    notify: Notify | None = None
    subscriptions: Subscriptions | None = None
