"""``queue.stats``: what an autoscaler needs per work queue.

Depth is the length of every routed list (the dispatch targets are recorded
in ``keys.QUEUES``, so nothing SCANs); pending is what live actors hold;
consumers are the live actors whose pop order includes the queue.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import redis.asyncio as aioredis

from gateway.supervisor import keys, presence


def _age(iso: str | None, now: float) -> float | None:
    if not iso:
        return None
    try:
        return max(0.0, now - datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return None


async def queue_stats(client: aioredis.Redis, script_type: str | None) -> list[dict[str, Any]]:
    queues = []
    for key in sorted(await client.smembers(keys.QUEUES)):
        parts = keys.parse_work_queue(key)
        if parts is not None and (script_type is None or parts["script_type"] == script_type):
            queues.append((key, parts))
    actors = await presence.live(client, script_type)
    held_keys = [keys.held(a["script_type"], a["group"], a["instance"]) for a in actors]

    async with client.pipeline(transaction=False) as pipe:
        for key, _ in queues:
            pipe.llen(key)
            pipe.lindex(key, -1)
        for held in held_keys:
            pipe.lrange(held, 0, -1)
        rows = await pipe.execute()
    depths = rows[: 2 * len(queues) : 2]
    oldest = rows[1 : 2 * len(queues) : 2]
    held_ids = [job_id for ids in rows[2 * len(queues) :] for job_id in ids]

    async with client.pipeline(transaction=False) as pipe:
        for job_id in oldest:
            pipe.hget(keys.job(job_id or "-"), "updated_at")
        for job_id in held_ids:
            pipe.hget(keys.job(job_id), "queue")
        rows = await pipe.execute()
    since = rows[: len(oldest)]
    pending: dict[str, int] = {}
    for queue in rows[len(oldest) :]:
        if queue:
            pending[queue] = pending.get(queue, 0) + 1

    orders = [set(keys.pop_order(a["script_type"], a["group"], a["instance"])) for a in actors]
    now = time.time()
    return [
        {
            "queue": key,
            "script_type": parts["script_type"],
            "group": parts["group"],
            "instance": parts["instance"],
            "priority": parts["priority"],
            "depth": depth + pending.get(key, 0),
            "pending": pending.get(key, 0),
            "oldest_age": _age(ts, now) if job_id else None,
            "consumers": sum(1 for order in orders if key in order),
        }
        for (key, parts), depth, job_id, ts in zip(queues, depths, oldest, since, strict=True)
    ]
