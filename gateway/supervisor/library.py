"""The Redis Function library (``lua/hero.lua``) that makes every transition
atomic, and the one place a Function is called.

What each Function takes and returns is ``gateway.model.library`` (sans
I/O); here a ``Call`` is run (``call``, or ``pipeline`` for many) and its
reply decoded.

The Lua source names keys only through ``{{PLACEHOLDERS}}`` filled from
``keys.py`` here, so the key scheme still has one home. Loading is
idempotent (FUNCTION LOAD REPLACE), done once per process at connect.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, ResponseError

from gateway.config import Config
from gateway.model.library import Call, Reply
from gateway.supervisor import keys
from gateway.supervisor.connection import Commands

R = TypeVar("R")

LIBRARY_NAME = "hero"


@cache
def source() -> str:
    text = resources.files("gateway.supervisor").joinpath("lua/hero.lua").read_text()
    placeholders = {
        "JOB": keys.job(""),
        "EVENTS": keys.EVENTS,
        "ENDED": keys.ENDED,
        "ENDED_MAXLEN": str(keys.ENDED_MAXLEN),
        "TRANSITIONS": keys.TRANSITIONS,
        "INDEX_ALL": keys.INDEX_ALL,
        "INDEX_STATUS": keys.index_status(""),
        "INDEX_TYPE": keys.index_type(""),
        "INDEX_CALLER": keys.index_caller(""),
        "REPLY": keys.reply(""),
        "LEGACY_WORK": keys.legacy_work(""),
        "LEGACY_STOP": keys.legacy_stop(""),
        "LEGACY_ACTOR": keys.legacy_actor_queue(""),
        "WORK": keys.work_queue(""),
        "STREAM": keys.work_stream(""),
        "CTL": keys.ctl(""),
        "ORPHANS": keys.ORPHANS,
        "LOGS": keys.logs(""),
        "QUEUES": keys.QUEUES,
        "DELAYED": keys.DELAYED,
        "DLQ": keys.dlq(""),
        "DLQ_STREAM": keys.dlq_stream(""),
        "STREAM_GROUP": keys.STREAM_GROUP,
        "WAKE": keys.wake(""),
        "IDLE": keys.idle(""),
        "ACTORS": keys.ACTORS,
        "LEADER": keys.LEADER,
        "WATCH": keys.WATCH,
        "EXPIRE_CURSOR": keys.EXPIRE_CURSOR,
        "EXPIRING": keys.EXPIRING,
    }
    for name, value in placeholders.items():
        text = text.replace("{{" + name + "}}", value)
    if "{{" in text:
        raise RuntimeError("unrendered placeholder in hero.lua")
    return text


async def call(client: Commands, config: Config, fcall: Call[R]) -> R:
    """Run one Function call and decode its reply. A Redis that came back
    without the library (restarted without persistence, or flushed with
    FUNCTION FLUSH) gets it loaded again, and the call is retried once."""
    command = fcall.command(config)
    try:
        reply = await client.execute_command(*command)
    except ResponseError as exc:
        if not lost_library(exc):
            raise
        await reload(client)
        reply = await client.execute_command(*command)
    return fcall.decode(Reply(reply))


async def pipeline(wire: Commands, config: Config, calls: Sequence[Call[R]]) -> list[R | Exception]:
    """Many Function calls in one pipeline, each decoded; the error of a call
    that failed stands in its place. A lost library is loaded again and the
    calls that found it missing (those only: the others ran, before or after
    another process loaded it) are sent once more."""
    commands = [c.command(config) for c in calls]
    replies = await wire.pipeline(commands, errors_in_place=True)
    lost = [i for i, r in enumerate(replies) if lost_library(r)]
    if lost:
        await reload(wire)
        again = await wire.pipeline([commands[i] for i in lost], errors_in_place=True)
        for i, reply in zip(lost, again, strict=True):
            replies[i] = reply
    return [
        r if isinstance(r, Exception) else c.decode(Reply(r))
        for c, r in zip(calls, replies, strict=True)
    ]


async def reload(client: Commands) -> None:
    """After a call found the library missing: load it, or, for a user that may
    not (an actor's), fail like a Redis that is away until a gateway loads it."""
    if not await load(client):
        raise RedisConnectionError("the Functions are not loaded yet")


def lost_library(reply: Any) -> bool:
    """Whether a reply is the error of a Redis that has not (or no longer) the library."""
    return isinstance(reply, ResponseError) and "function not found" in str(reply).lower()


async def load(client: Commands) -> bool:
    """Load (or replace) the library; False when this Redis user may not. Such
    a user (the actor's, see acl.py) uses what a gateway or ``hero-gateway acl
    --apply`` loaded, so the refusal is not an error here."""
    try:
        await client.execute_command("FUNCTION", "LOAD", "REPLACE", source())
    except ResponseError as exc:
        if not isinstance(exc, NoPermissionError):  # redis-py names the refusal by its class
            raise
        return False
    return True
