"""Actor presence: who is alive, found without SCAN.

Each actor instance keeps its ``keys.presence`` key (JSON, with a TTL) and a
member in the ``keys.ACTORS`` sorted set scored by
the key's expiry. Listing reads the members whose key is there; a passed
score is how the reaper finds an instance that may have died (see
maintenance.py). Outside actors write only the key: ``fold`` indexes them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Sequence
from typing import Any

from gateway import __version__
from gateway.supervisor import keys
from gateway.supervisor.connection import Commands, scan


def record(
    script_type: str, group: str, instance: str, capabilities: Sequence[str]
) -> dict[str, Any]:
    """What an actor instance announces in its presence key (``beat`` adds
    ``last_heartbeat``)."""
    return {
        "script_type": script_type,
        "group": group,
        "instance": instance,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "started_at": time.time(),
        "version": __version__,
        "capabilities": list(capabilities),
    }


async def beat(client: Commands, info: dict[str, Any], ttl: int) -> None:
    key = keys.presence(info["script_type"], info["group"], info["instance"])
    info = dict(info, last_heartbeat=time.time())
    await client.pipeline(
        [
            ("SET", key, json.dumps(info), "EX", ttl),
            ("ZADD", keys.ACTORS, int((time.time() + ttl) * 1000), key),
        ]
    )


async def leave(client: Commands, info: dict[str, Any]) -> None:
    key = keys.presence(info["script_type"], info["group"], info["instance"])
    await client.pipeline([("DEL", key), ("ZREM", keys.ACTORS, key)])


async def fold(client: Commands, ttl: int) -> int:
    """Put every live presence key into the index, ours or an outside actor's
    (the protocol asks no more of an actor than its key). Run by the
    maintenance leader, never on a request, since it SCANs. A deadline is
    only ever moved later (``GT``), so a fold never undoes ``hero_watch``.
    Returns how many keys it saw."""
    found = [key for key in await scan(client, keys.presence("*", "*", "*")) if _named(key)]
    if not found:
        return 0
    left = await client.pipeline([("PTTL", key) for key in found])
    now_ms = int(time.time() * 1000)
    scores = {k: now_ms + (ms if ms >= 0 else ttl * 1000) for k, ms in zip(found, left, strict=True)
              if ms != -2}  # fmt: skip
    if scores:
        members = [x for key, score in scores.items() for x in (score, key)]
        await client.execute_command("ZADD", keys.ACTORS, "GT", *members)
    return len(scores)


async def live(client: Commands, script_type: str | None = None) -> list[dict[str, Any]]:
    """Instances in the index whose presence key is there now. Outside actors'
    JSON may lack our fields or be no JSON at all: the key names the instance."""
    members: list[str] = await client.execute_command("ZRANGE", keys.ACTORS, 0, -1)
    if not members:
        return []
    actors = []
    for member, raw in zip(members, await client.execute_command("MGET", *members), strict=True):
        parts = keys.parse_presence(member)
        if raw is None or parts is None:  # expired, not yet reaped
            continue
        info = _shape(raw, parts)
        if script_type is None or info["script_type"] == script_type:
            actors.append(info)
    return sorted(actors, key=lambda a: (a["script_type"], a["group"], a["instance"]))


def _named(key: str) -> bool:
    """A presence key whose parts are identifiers we can list (and reap by)."""
    parts = keys.parse_presence(key)
    return parts is not None and all(re.fullmatch(keys.IDENT_PATTERN, p) for p in parts)


def _shape(raw: str, parts: tuple[str, str, str]) -> dict[str, Any]:
    """The presence fields we list, typed, from whatever JSON the key holds
    (an outside actor may write other fields, other types or no JSON)."""
    try:
        found = json.loads(raw)
    except ValueError:
        found = None
    got: dict[str, Any] = found if isinstance(found, dict) else {}

    def number(name: str) -> float:
        value = got.get(name)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        return value if ok else 0  # type: ignore[return-value]

    capabilities = got.get("capabilities")
    return {
        "script_type": parts[0],
        "group": parts[1],
        "instance": parts[2],
        "pid": int(number("pid")),
        "hostname": str(got.get("hostname") or ""),
        "started_at": number("started_at"),
        "version": str(got.get("version") or ""),
        "capabilities": [str(c) for c in capabilities] if isinstance(capabilities, list) else [],
        "last_heartbeat": number("last_heartbeat"),
    }
