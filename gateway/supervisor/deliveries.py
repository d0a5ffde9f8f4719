"""Stream mode: the deliveries an actor's consumer holds, and letting go of
those whose jobs ended while nobody ran them (see ``ActorLink.adopt``)."""

from __future__ import annotations

from collections.abc import Collection

from redis.exceptions import ResponseError

from gateway.supervisor import keys, replies
from gateway.supervisor.connection import Commands


async def held(wire: Commands, stream: str, consumer: str) -> dict[str, str]:
    """Job id → entry of each delivery ``consumer`` holds unacked."""
    try:
        reply = await wire.execute_command(
            "XREADGROUP", "GROUP", keys.STREAM_GROUP, consumer,
            "COUNT", 1000, "STREAMS", stream, "0",
        )  # fmt: skip
    except ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        return {}  # nothing was ever dispatched to this stream
    return {f.get("job_id", ""): e for _, raw in reply or [] for e, f in replies.entries(raw)}


async def drop(wire: Commands, stream: str, entries: Collection[str]) -> None:
    """Ack and delete ``entries``: nothing is left to run for them."""
    await wire.pipeline([("XACK", stream, keys.STREAM_GROUP, *entries), ("XDEL", stream, *entries)])
