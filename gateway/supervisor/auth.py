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

from gateway.errors import InvalidParams
from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE, Commands, guarded
from gateway.supervisor.replies import pairs
from gateway.supervisor.subscriber import Subscriber
from gateway.supervisor.wire import Wire

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

    def __init__(self, client: Commands, url: str, *, timeout: float | None = None) -> None:
        """``client``: the process's connection (a gateway passes its
        supervisor's). ``url``: the same Redis, for the connections a
        ``create`` (its WATCH) and ``watch_revocations`` open beside it;
        ``timeout``: the WATCH connection's (``Wire``), HERO_REDIS_TIMEOUT."""
        self._redis = client
        self._url = url
        self._timeout = timeout

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
        flat = [x for item in fields.items() for x in item]
        # WATCH the set of hashes: two concurrent creates with one name cannot
        # both pass. A WATCH holds for its connection, so it gets its own.
        own = Wire(self._url, "keys", timeout=self._timeout)
        try:
            for _ in range(_CREATE_ATTEMPTS):
                await own.execute_command("WATCH", keys.API_KEYS)
                if name in await self._names(own):
                    raise InvalidParams(f"an API key named {name!r} exists already")
                done = await own.pipeline(
                    [
                        ("MULTI",),
                        ("HSET", keys.api_key(digest(key)), *flat),
                        ("SADD", keys.API_KEYS, digest(key)),
                        ("EXEC",),
                    ]
                )
                if done[-1] is not None:  # None: the set changed since the WATCH
                    return key
        finally:
            await own.aclose()
        raise InvalidParams("API keys are changing too fast; try again")

    @guarded
    async def verify(self, key: str) -> dict[str, Any] | None:
        """``{"name", "scope", "caller_id", "key_id"}`` for a valid key, else
        None. ``key_id`` (the hash) names the key in revocations."""
        if not key.startswith(KEY_PREFIX) or len(key) > 256:
            return None
        key_id = digest(key)
        name, scope, caller_id = await self._redis.execute_command(
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
        member = await self._redis.execute_command("SMISMEMBER", keys.API_KEYS, *ids)
        return frozenset(i for i, found in zip(ids, member, strict=True) if not found)

    async def watch_revocations(self, on_revoked: OnRevoked) -> None:
        """Call ``on_revoked`` with the ids of keys as they are revoked, and
        with None each time the subscription is (re)made: whatever was revoked
        while nobody listened must be asked about. Runs until cancelled."""
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
        return bool(await self._redis.execute_command("SCARD", keys.API_KEYS))

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
        commands: list[tuple[str, ...]] = [("MULTI",)]
        for h in hashes:
            commands += [
                ("DEL", keys.api_key(h)),
                ("SREM", keys.API_KEYS, h),
                ("PUBLISH", keys.API_KEY_REVOKED, h),
            ]
        # one write on the shared connection: no other caller's command lands inside
        await self._redis.pipeline([*commands, ("EXEC",)])
        return True

    async def _names(self, client: Commands) -> set[str]:
        return {row.get("name", "") for _, row in await self._rows(client)}

    @staticmethod
    async def _rows(client: Commands) -> list[tuple[str, dict[str, str]]]:
        """(hash, fields) of every listed key; a hash whose fields are gone is skipped."""
        hashes = sorted(await client.execute_command("SMEMBERS", keys.API_KEYS))
        rows = await client.pipeline([("HGETALL", keys.api_key(h)) for h in hashes])
        return [(str(h), pairs(row)) for h, row in zip(hashes, rows, strict=True) if row]


def _check_ident(what: str, value: str) -> None:
    if not re.fullmatch(keys.IDENT_PATTERN, value):
        raise InvalidParams(
            f"{what} must be letters, digits, '_', '.', '-' (at most 128 characters)"
        )
