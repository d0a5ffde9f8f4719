"""API keys, stored in Redis as hashes of the key only.

A key is shown once, when it is made; Redis holds ``sha256(key)`` as the name
of a hash (``keys.api_key``) with the key's name, scope, caller_id and
created_at, plus one set of every hash (``keys.API_KEYS``) for listing and for
"does any key exist" (which decides whether the gateway requires auth).
Plain sha256 is enough here: keys are 256 random bits, not passwords, so
there is nothing to brute-force; a slow hash would only make every
connection slower.

Names are unique, so an operator can revoke a key by the name they gave it.
Nothing in this module logs or raises a key or a hash: error messages name
the key's *name* at most.

Revoking publishes the key's hash on ``keys.API_KEY_REVOKED`` in the same
transaction that deletes it; every gateway hears it (``watch_revocations``)
and ends the connections that key opened. A gateway that was not subscribed
at that moment (its pub/sub connection dropped) asks again about every key
its connections hold as soon as it is subscribed again, so a revocation in
the gap is not missed.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any, Literal, cast

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from gateway.errors import InvalidParams
from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE, Commands, guarded
from gateway.supervisor.wire import Subscriber

Scope = Literal["user", "admin"]
SCOPES: tuple[Scope, ...] = ("user", "admin")

#: Recognisable prefix, so secret scanners and humans can tell what leaked.
KEY_PREFIX = "hgk_"
_CREATE_ATTEMPTS = 10
#: Longest pause (s) between attempts to subscribe to revocations again.
_RESUBSCRIBE_MAX = 0.5

#: Told the ids (hashes) of revoked keys; None: "any key may have been revoked".
OnRevoked = Callable[[frozenset[str] | None], None]


def digest(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyStore:
    """Create, verify, list and revoke API keys (``gateway.rpc`` sees only
    ``verify`` and ``exist``, through its ``KeyStore`` protocol)."""

    def __init__(
        self, client: aioredis.Redis, *, checks: Commands | None = None, url: str | None = None
    ) -> None:
        """``checks``: where ``verify``, ``exist`` and ``revoked`` go, the
        per-connection checks (a gateway passes its job-path wire: 10,000
        clients connecting at once must not queue for the pool); the rest
        uses ``client``. ``url``: the Redis to hear revocations from
        (``watch_revocations``)."""
        self._redis = client
        self._checks: Commands = checks or client
        self._url = url

    @guarded
    async def create(self, name: str, scope: str, caller_id: str | None = None) -> str:
        """A new key (returned once, never stored). A user key needs a caller_id;
        the name must be unused."""
        _check_ident("name", name)
        if scope not in SCOPES:
            raise InvalidParams(f"scope must be one of {', '.join(SCOPES)}")
        if caller_id is not None:
            _check_ident("caller_id", caller_id)
        if scope == "user" and not caller_id:
            raise InvalidParams("a user key needs a caller_id")
        key = new_key()
        fields: dict[Any, Any] = {
            "name": name,
            "scope": scope,
            "caller_id": caller_id or "",
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        # WATCH the set of hashes: two concurrent creates with one name cannot both pass.
        for _ in range(_CREATE_ATTEMPTS):
            async with self._redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(keys.API_KEYS)
                    if name in await self._names(pipe):
                        raise InvalidParams(f"an API key named {name!r} exists already")
                    cast(Any, pipe).multi()  # untyped in redis-py
                    pipe.hset(keys.api_key(digest(key)), mapping=fields)
                    pipe.sadd(keys.API_KEYS, digest(key))
                    await pipe.execute()
                    return key
                except WatchError:
                    continue
        raise InvalidParams("API keys are changing too fast; try again")

    @guarded
    async def verify(self, key: str) -> dict[str, Any] | None:
        """``{"name", "scope", "caller_id", "key_id"}`` for a valid key, else
        None. ``key_id`` (the hash) names the key in revocations."""
        if not key.startswith(KEY_PREFIX) or len(key) > 256:
            return None
        key_id = digest(key)
        name, scope, caller_id = await self._checks.execute_command(
            "HMGET", keys.api_key(key_id), "name", "scope", "caller_id"
        )
        if scope not in SCOPES:
            return None
        return {
            "name": name or "",
            "scope": cast(Scope, scope),
            "caller_id": caller_id or None,
            "key_id": key_id,
        }

    @guarded
    async def revoked(self, key_ids: Collection[str]) -> frozenset[str]:
        """Which of these key ids (from ``verify``) no longer name a key."""
        ids = sorted(key_ids)
        if not ids:
            return frozenset()
        member = await self._checks.execute_command("SMISMEMBER", keys.API_KEYS, *ids)
        return frozenset(i for i, found in zip(ids, member, strict=True) if not found)

    async def watch_revocations(self, on_revoked: OnRevoked) -> None:
        """Call ``on_revoked`` with the ids of keys as they are revoked, and
        with None each time the subscription is (re)made: whatever was revoked
        while nobody listened must be asked about. Runs until cancelled."""
        if self._url is None:
            raise RuntimeError("watching revocations needs the Redis URL")
        subscriber = Subscriber(
            self._url, "gateway-revocations", lambda _, key_id: on_revoked(frozenset([key_id]))
        )
        delay = 0.05
        try:
            while True:
                try:
                    lost = await subscriber.subscribe([keys.API_KEY_REVOKED])
                except UNAVAILABLE:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _RESUBSCRIBE_MAX)
                    continue
                delay = 0.05
                on_revoked(None)
                await lost
        finally:
            await subscriber.aclose()

    @guarded
    async def exist(self) -> bool:
        """Whether any key exists (then every client must authenticate)."""
        return bool(await self._checks.execute_command("SCARD", keys.API_KEYS))

    @guarded
    async def list_keys(self) -> list[dict[str, Any]]:
        """Every key's name, scope, caller_id and created_at (never the key or its hash)."""
        rows = await self._rows(self._redis)
        listed = [
            {
                "name": row.get("name", ""),
                "scope": row.get("scope", ""),
                "caller_id": row.get("caller_id") or None,
                "created_at": row.get("created_at", ""),
            }
            for _, row in rows
        ]
        return sorted(listed, key=lambda k: str(k["name"]))

    @guarded
    async def revoke(self, name: str) -> bool:
        """Delete the key with this name; false when there is none."""
        hashes = [h for h, row in await self._rows(self._redis) if row.get("name") == name]
        if not hashes:
            return False
        async with self._redis.pipeline(transaction=True) as pipe:
            for h in hashes:
                pipe.delete(keys.api_key(h))
                pipe.srem(keys.API_KEYS, h)
                pipe.publish(keys.API_KEY_REVOKED, h)
            await pipe.execute()
        return True

    async def _names(self, client: Any) -> set[str]:
        return {row.get("name", "") for _, row in await self._rows(client)}

    @staticmethod
    async def _rows(client: Any) -> list[tuple[str, dict[str, str]]]:
        """(hash, fields) of every listed key; a hash whose fields are gone is skipped.

        ``client`` is the Redis client or a WATCHing pipeline (immediate mode),
        which is why this reads one hash at a time: there are few keys."""
        hashes = sorted(await client.smembers(keys.API_KEYS))
        rows = []
        for h in hashes:
            row = await client.hgetall(keys.api_key(h))
            if row:
                rows.append((str(h), dict(row)))
        return rows


def _check_ident(what: str, value: str) -> None:
    if not re.fullmatch(keys.IDENT_PATTERN, value):
        raise InvalidParams(
            f"{what} must be letters, digits, '_', '.', '-' (at most 128 characters)"
        )
