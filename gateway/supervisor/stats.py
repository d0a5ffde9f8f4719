"""``queue.stats``: what an autoscaler needs per work queue.

Every queue a job was ever dispatched to is recorded in ``keys.QUEUES``, so
nothing SCANs. For each one: ``lag`` (waiting, not yet handed to an actor),
``pending`` (handed out, not finished), ``depth`` = lag + pending, the age of
the oldest waiting job and the live actors that consume it.

- A list queue's lag is its length; its pending jobs are those the live
  actors hold (their held lists).
- A work stream (stream mode) holds exactly the jobs not yet done, because
  entries are deleted when acked: its length is the depth, the group's
  pending count is ``pending``.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from redis.exceptions import ResponseError

from gateway.model import StreamId
from gateway.supervisor import keys, presence
from gateway.supervisor.connection import Commands, lenient
from gateway.supervisor.replies import records


def _age(iso: str | None, now: float) -> float | None:
    if not iso:
        return None
    try:
        return max(0.0, now - datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return None


def _row(key: str, parts: dict[str, Any], mode: str, lag: int, pending: int) -> dict[str, Any]:
    return {
        "queue": key,
        "mode": mode,
        "script_type": parts["script_type"],
        "group": parts["group"],
        "instance": parts["instance"],
        "priority": parts["priority"],
        "depth": lag + pending,
        "lag": lag,
        "pending": pending,
    }


async def queue_stats(client: Commands, script_type: str | None) -> list[dict[str, Any]]:
    lists: list[tuple[str, dict[str, Any]]] = []
    streams: list[tuple[str, dict[str, Any]]] = []
    for key in sorted(await client.execute_command("SMEMBERS", keys.QUEUES)):
        parts: dict[str, Any] | None = keys.parse_work_queue(key)
        stream_type = keys.parse_work_stream(key)
        if stream_type is not None:
            parts = dict(
                script_type=stream_type, group=None, instance=None, priority=keys.DEFAULT_PRIORITY
            )
        if parts is None or (script_type is not None and parts["script_type"] != script_type):
            continue
        (lists if stream_type is None else streams).append((key, parts))
    actors = await presence.live(client, script_type)
    now = time.time()
    rows = await _list_rows(client, lists, actors, now) + await _stream_rows(client, streams, now)
    live_types = [a["script_type"] for a in actors]
    orders = [set(keys.pop_order(a["script_type"], a["group"], a["instance"])) for a in actors]
    for row in rows:
        if row["mode"] == "stream":
            row["consumers"] = live_types.count(row["script_type"])
        else:
            row["consumers"] = sum(1 for order in orders if row["queue"] in order)
    return sorted(rows, key=lambda r: str(r["queue"]))


async def _list_rows(
    client: Commands,
    queues: list[tuple[str, dict[str, Any]]],
    actors: list[dict[str, Any]],
    now: float,
) -> list[dict[str, Any]]:
    held_keys = [keys.held(a["script_type"], a["group"], a["instance"]) for a in actors]
    commands: list[tuple[str | int, ...]] = []
    for key, _ in queues:
        commands += [("LLEN", key), ("LINDEX", key, -1)]
    commands += [("LRANGE", held, 0, -1) for held in held_keys]
    replies = await lenient(client, commands)  # a queue made another type counts as empty
    lengths = [n or 0 for n in replies[: 2 * len(queues) : 2]]
    oldest = replies[1 : 2 * len(queues) : 2]
    held_ids = [job_id for ids in replies[2 * len(queues) :] for job_id in ids or ()]

    commands = [("HGET", keys.job(job_id or "-"), "updated_at") for job_id in oldest]
    commands += [("HGET", keys.job(job_id), "queue") for job_id in held_ids]
    replies = await lenient(client, commands)
    since = replies[: len(oldest)]
    pending: dict[str, int] = {}
    for queue in replies[len(oldest) :]:
        if queue:
            pending[queue] = pending.get(queue, 0) + 1
    rows = []
    for (key, parts), length, job_id, ts in zip(queues, lengths, oldest, since, strict=True):
        row = _row(key, parts, "list", length, pending.get(key, 0))
        row["oldest_age"] = _age(ts, now) if job_id else None
        rows.append(row)
    return rows


async def _stream_rows(
    client: Commands, streams: list[tuple[str, dict[str, Any]]], now: float
) -> list[dict[str, Any]]:
    rows = []
    for key, parts in streams:
        length, group = await _stream_group(client, key)
        pending = int(group.get("pending", 0)) if group else 0
        row = _row(key, parts, "stream", max(length - pending, 0), pending)
        row["oldest_age"] = None
        if group and row["lag"]:
            # the next entry after the last delivered one waits longest; its id
            # is the time it was dispatched
            after = await client.execute_command(
                "XRANGE", key, f"({group['last-delivered-id']}", "+", "COUNT", 1
            )
            if after:
                row["oldest_age"] = max(0.0, now - StreamId.parse(after[0][0]).ms / 1000)
        rows.append(row)
    return rows


async def _stream_group(client: Commands, key: str) -> tuple[int, dict[str, Any] | None]:
    try:
        length, groups = await client.pipeline([("XLEN", key), ("XINFO", "GROUPS", key)])
    except ResponseError:  # the key is gone (deleted by an operator)
        return 0, None
    mine = [g for g in records(groups) if g["name"] == keys.STREAM_GROUP]
    return int(length), (mine[0] if mine else None)
