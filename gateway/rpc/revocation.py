"""A revoked API key stops working on the sockets it already opened.

A key is checked when a connection opens (or logs in); after that the
connection holds the identity. So the key store tells every gateway when a
key is revoked (``KeyStore.watch_revocations``, a Redis pub/sub broadcast),
and this module ends the open connections proven with it: their identity is
dropped at once (any call still to come is -32004) and the socket is closed
with 1008. When the broadcast may have been missed (the gateway's
subscription dropped and came back), the keys of every open connection are
asked about again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Protocol

from gateway.errors import HeroError
from gateway.rpc.backends import KeyStore
from gateway.rpc.context import CallContext

log = logging.getLogger("gateway.rpc.revocation")

CLOSE_POLICY = 1008
REVOKED_REASON = "API key revoked"


class Revocable(Protocol):
    """An open connection (``websocket.Connection``)."""

    ctx: CallContext

    async def close(self, code: int, reason: str) -> None: ...


class Revoker:
    """Ends the connections of revoked keys, for as long as it runs."""

    def __init__(self, keys: KeyStore, connections: Callable[[], Collection[Revocable]]) -> None:
        self._keys = keys
        self._connections = connections
        self._tasks: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Future[None] | None = None

    def start(self) -> None:
        self._watch = asyncio.ensure_future(self._keys.watch_revocations(self._on_revoked))
        self._watch.add_done_callback(_report_end)

    async def stop(self) -> None:
        tasks: list[asyncio.Future[None]] = [*self._tasks, *([self._watch] if self._watch else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _on_revoked(self, key_ids: frozenset[str] | None) -> None:
        if key_ids is not None:
            self._end(key_ids)
            return
        task = asyncio.create_task(self._recheck())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _recheck(self) -> None:
        """Ask about every key an open connection holds."""
        held = {key_id for c in self._connections() if (key_id := _key_id(c)) is not None}
        if not held:
            return
        try:
            gone = await self._keys.revoked(held)
        except HeroError:  # Redis away again: the next resubscription asks again
            return
        self._end(gone)

    def _end(self, key_ids: Collection[str]) -> None:
        ending = [c for c in list(self._connections()) if _key_id(c) in key_ids]
        if ending:
            log.info("closing connections of a revoked key", extra={"connections": len(ending)})
        for connection in ending:
            connection.ctx.identity = None  # refused from now on, before the close is sent
            task = asyncio.create_task(connection.close(CLOSE_POLICY, REVOKED_REASON))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)


def _key_id(connection: Revocable) -> str | None:
    who = connection.ctx.identity
    return who.key_id if who is not None else None


def _report_end(watch: asyncio.Future[None]) -> None:
    """The watch runs until stopped; if it fails, revoked keys keep their sockets: say so."""
    if not watch.cancelled() and watch.exception() is not None:
        log.error("watching API key revocations failed", exc_info=watch.exception())
