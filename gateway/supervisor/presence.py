"""Actor presence: who is alive, found without SCAN.

Each actor instance keeps its ``keys.presence`` key (JSON, with a TTL) and a
member in the ``keys.ACTORS`` sorted set scored by
the key's expiry. Listing reads the live members; an expired score is how
the reaper finds an instance that died.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis.asyncio as aioredis

from gateway.supervisor import keys


async def beat(client: aioredis.Redis, info: dict[str, Any], ttl: int) -> None:
    key = keys.presence(info["script_type"], info["group"], info["instance"])
    info = dict(info, last_heartbeat=time.time())
    async with client.pipeline(transaction=False) as pipe:
        pipe.set(key, json.dumps(info), ex=ttl)
        pipe.zadd(keys.ACTORS, {key: int((time.time() + ttl) * 1000)})
        await pipe.execute()


async def leave(client: aioredis.Redis, info: dict[str, Any]) -> None:
    key = keys.presence(info["script_type"], info["group"], info["instance"])
    async with client.pipeline(transaction=False) as pipe:
        pipe.delete(key)
        pipe.zrem(keys.ACTORS, key)
        await pipe.execute()


async def live(client: aioredis.Redis, script_type: str | None = None) -> list[dict[str, Any]]:
    now_ms = int(time.time() * 1000)
    members: list[str] = await client.zrangebyscore(keys.ACTORS, now_ms, "+inf")
    if not members:
        return []
    actors = []
    for raw in await client.mget(members):
        if raw is None:  # expired between the two reads
            continue
        info = json.loads(raw)
        if script_type is None or info.get("script_type") == script_type:
            actors.append(info)
    return sorted(actors, key=lambda a: (a["script_type"], a["group"], a["instance"]))
