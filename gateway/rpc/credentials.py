"""Who a new connection (or HTTP request) is, and which method table serves it.

Two method tables exist side by side: *open* (built without a key store:
everyone is ``anonymous`` and unrestricted) and *authenticated* (built with
the key store: no identity until a valid key is shown). A connection gets the
open table only when no API key exists at the moment it opens, so creating
the first key with ``hero-gateway keys create`` turns auth on for every new
connection without a restart. A server listening beyond loopback is told to
``require_keys``: it never serves the open table, even when the last key has
been revoked.

Keys arrive as ``Authorization: Bearer <key>`` (WebSocket upgrade or HTTP
POST) or through ``auth.login``. A key is never logged, echoed or put in an
error message.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from gateway.errors import HeroError, Unauthenticated
from gateway.rpc.backends import Backends, KeyStore, ServedSupervisor
from gateway.rpc.context import ANONYMOUS, Identity
from gateway.rpc.dispatch import Dispatcher, Observer
from gateway.rpc.methods import build_dispatcher


@dataclass(frozen=True, slots=True)
class Mode:
    """The method table a connection is served by, and who it is to begin with."""

    dispatcher: Dispatcher
    identity: Identity | None

    @property
    def authenticated(self) -> bool:
        """Whether this is the table that checks identities."""
        return self.identity is None or self.identity.scope != "anonymous"


class Authenticator:
    def __init__(
        self,
        supervisor: ServedSupervisor,
        keys: KeyStore | None,
        *,
        require_keys: bool = False,
        check_results: bool = False,
        observe: Observer | None = None,
        script_types: tuple[str, ...] = (),
        stream_types: tuple[str, ...] = (),
    ) -> None:
        self._keys = keys
        self._require = require_keys and keys is not None
        self.open = build_dispatcher(
            Backends(supervisor, None, script_types, stream_types),
            check_results=check_results,
            observe=observe,
        )
        self.checked = (
            build_dispatcher(
                Backends(supervisor, keys, script_types, stream_types),
                check_results=check_results,
                observe=observe,
            )
            if keys is not None
            else self.open
        )
        # Until Redis has answered once, assume keys exist: failing closed.
        self._keys_exist = keys is not None

    async def keys_required(self) -> bool:
        """Whether a client must authenticate now. When Redis cannot say, the
        last answer it gave stands (an outage must not switch auth off)."""
        if self._keys is None:
            return False
        if self._require:
            return True
        with contextlib.suppress(HeroError):
            self._keys_exist = await self._keys.exist()
        return self._keys_exist

    async def mode(self, authorization: str | None) -> Mode:
        """The mode for a new connection or request, from its Authorization
        header (None when it sent none). Unauthenticated for a header that is
        not a valid key; BackendUnavailable when Redis cannot check it."""
        if authorization is not None:
            return Mode(self.checked, await self.identify(bearer_key(authorization)))
        if await self.keys_required():
            return Mode(self.checked, None)
        return Mode(self.open, ANONYMOUS)

    async def before_login(self, current: Mode) -> Mode:
        """``auth.login`` on a connection opened while no key existed: if keys
        exist now, the connection moves to the authenticated table first, so the
        key is checked rather than answered with ``anonymous``."""
        if current.dispatcher is self.open and await self.keys_required():
            return Mode(self.checked, None)
        return current

    async def identify(self, key: str) -> Identity:
        if self._keys is None:
            raise Unauthenticated("This server has no API keys")
        found = await self._keys.verify(key)
        if found is None:
            raise Unauthenticated("Unknown or revoked API key")
        try:
            return Identity.from_mapping(found)
        except (KeyError, ValueError):  # a damaged key record: as good as none
            raise Unauthenticated("Unknown or revoked API key") from None


def bearer_key(authorization: str) -> str:
    """The key of an ``Authorization: Bearer <key>`` header value."""
    scheme, _, key = authorization.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise Unauthenticated("Authorization must be 'Bearer <API key>'")
    return key
