"""The Redis Function library (``lua/hero.lua``) that makes every transition atomic.

The Lua source names keys only through ``{{PLACEHOLDERS}}`` filled from
``keys.py`` here, so the key scheme still has one home. Loading is
idempotent (FUNCTION LOAD REPLACE), done once per process at connect.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, ResponseError

from gateway.config import Config
from gateway.supervisor import keys
from gateway.supervisor.connection import Commands

LIBRARY_NAME = "hero"


@cache
def source() -> str:
    text = resources.files("gateway.supervisor").joinpath("lua/hero.lua").read_text()
    placeholders = {
        "JOB": keys.job(""),
        "EVENTS": keys.EVENTS,
        "ENDED": keys.ENDED,
        "ENDED_MAXLEN": str(keys.ENDED_MAXLEN),
        "INDEX_ALL": keys.INDEX_ALL,
        "INDEX_STATUS": keys.index_status(""),
        "INDEX_TYPE": keys.index_type(""),
        "INDEX_CALLER": keys.index_caller(""),
        "REPLY": keys.reply(""),
        "LEGACY_WORK": keys.legacy_work(""),
        "LEGACY_STOP": keys.legacy_stop(""),
        "LEGACY_ACTOR": keys.legacy_actor_queue(""),
        "WORK": keys.work_queue(""),
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
        "EXPIRING": keys.EXPIRING,
    }
    for name, value in placeholders.items():
        text = text.replace("{{" + name + "}}", value)
    if "{{" in text:
        raise RuntimeError("unrendered placeholder in hero.lua")
    return text


def head(config: Config) -> list[str]:
    """The ARGV every Function call starts with (see the top of hero.lua).

    The jitter is drawn here because scripts must be deterministic."""
    return [
        str(config.events_maxlen),
        compat_spec(config),
        str(config.job_ttl),
        repr(config.retry_base),
        repr(config.retry_max),
        repr(random.random()),
        str(config.dlq_maxlen),
    ]


def compat_spec(config: Config) -> str:
    """Head entry [2]: "0" when compat is off, else "1" and each type's own
    legacy queue kinds (``HERO_LEGACY_QUEUES``)."""
    if not config.compat_legacy:
        return "0"
    return "1" + "".join(f";{t}={'+'.join(kinds)}" for t, kinds in config.legacy_queues)


async def call(
    client: Commands,
    config: Config,
    function: str,
    *args: str | int | float,
    key_names: Sequence[str] = (),
) -> Any:
    """FCALL with the common head. A Redis that came back without the library
    (restarted without persistence, or flushed with FUNCTION FLUSH) gets it
    loaded again, and the call is retried once."""
    argv = [*key_names, *head(config), *args]
    try:
        return await client.execute_command("FCALL", function, len(key_names), *argv)
    except ResponseError as exc:
        if not lost_library(exc):
            raise
        if not await load(client):  # an actor's user: like Redis away until a gateway loads it
            raise RedisConnectionError("the Functions are not loaded yet") from None
        return await client.execute_command("FCALL", function, len(key_names), *argv)


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
        # redis-py names the refusal by its class, hiredis (wire.Wire) by its text
        if not isinstance(exc, NoPermissionError) and not str(exc).startswith("NOPERM"):
            raise
        return False
    return True
