"""Redis ACL users: actors, gateways, admins and outside producers connect
as different users.

Jobs are hostile and run on actors, so the actor's user is the second wall
behind the sandbox: it may run only the commands and Functions an actor
uses, on the keys and channels an actor uses, and never ``hero:auth:*``
(API keys), ``FUNCTION LOAD``, ``CONFIG`` or ``KEYS``. Redis 7 checks a
Function's commands and keys against the calling user too, so the actor's
key patterns cover what ``hero_cycle`` touches inside Redis (finishing a job
dispatches its dependents, dead-letters, writes events and indexes).

Hero producers we did not write (DESIGN.md) are trusted with every job, not
with our private keys: their user may write job hashes only as hashes and
queues only as lists (one ACL selector per kind of key), read replies and
events, and nothing else, so a producer cannot make a key of ours another
type and stop every actor's cycle.

Every pattern is built by the key builders in ``keys.py`` with ``*`` for the
variable parts, so the rules follow the key scheme. Passwords come from the
environment or are generated; rules carry only their SHA-256 (``#<hash>``),
so printing or logging a rule never shows a password.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.supervisor import keys
from gateway.supervisor.connection import Commands
from gateway.supervisor.link import INVALIDATE

STAR = "*"

#: Keys an actor reads or writes, directly or inside the Functions it calls.
ACTOR_KEYS = (
    keys.job(STAR),
    keys.EVENTS,
    keys.ENDED,
    keys.TRANSITIONS,
    keys.INDEX_ALL,  # a job an outside producer pushed is indexed when claimed
    keys.index_status(STAR),
    keys.index_type(STAR),
    keys.index_caller(STAR),
    keys.ORPHANS,  # an outside id popped before its hash exists waits there
    keys.EXPIRING,
    keys.QUEUES,
    keys.DELAYED,
    keys.ACTORS,
    keys.work_queue(STAR),
    keys.work_stream(STAR),
    keys.held(STAR, STAR, STAR),
    keys.idle(STAR),
    keys.ctl(STAR),
    keys.reply(STAR),
    keys.logs(STAR),
    keys.dlq(STAR),
    keys.dlq_stream(STAR),
    keys.presence(STAR, STAR, STAR),
    # compat mode: a dispatch pushes copies there too, and a claim removes them
    keys.legacy_work(STAR),
    keys.legacy_actor_queue(STAR),
)

#: Pub/sub channels an actor listens on (wake-ups, handoffs, Redis's own
#: invalidation channel for the queues it tracks) or publishes to (a
#: dispatch inside ``hero_cycle`` wakes the type's actors).
ACTOR_CHANNELS = (keys.wake(STAR), keys.handoff(STAR, STAR, STAR), INVALIDATE)

#: The Functions an actor calls (hero.lua); no other FCALL is allowed.
ACTOR_FUNCTIONS = ("hero_cycle", "hero_log", "hero_stream_touch", "hero_stream_leave")

#: Commands an actor sends itself (worker.py, presence.py) and those the
#: Functions it calls run inside Redis on its behalf.
ACTOR_COMMANDS = (
    # connection: redis-py, connecting a wire.Wire, names it and selects the
    # URL's database; PING answers health checks
    "ping", "select", "client|setname",
    # a queue written by anyone wakes an idle actor (wire.py: broadcast tracking)
    "client|id", "client|tracking",
    # presence, idle offers, held jobs, stop requests, wake-ups
    "set", "del", "zadd", "zrem", "lrem", "lrange", "hmget", "hdel", "blpop",
    "subscribe",
    # the container health check lists presence (deploy/docker/healthcheck.py)
    "mget",
    # stream mode: the consumer's own deliveries
    "xreadgroup", "xack", "xdel",
    # inside the Functions above
    "time", "exists", "hget", "hstrlen", "hset", "hincrby", "expire", "append", "getrange",
    "lpush", "rpop", "llen", "lpos", "hrandfield", "sadd", "zrangebyscore", "zrange", "zscore",
    "publish", "object|encoding",
    "xadd", "xtrim", "xgroup|create", "xgroup|delconsumer", "xautoclaim", "xpending", "xclaim",
)  # fmt: skip

#: What a gateway must not do although it may touch every hero key: the
#: commands Redis marks dangerous (KEYS, CONFIG, FLUSHALL, ACL, ...) and
#: Functions other than loading ours.
GATEWAY_DENIED = (
    "-@dangerous", "-function|flush", "-function|delete", "-function|restore", "-function|kill",
)  # fmt: skip


#: What a Hero producer does (DESIGN.md, "Producers we did not write"), as
#: (key patterns, commands) pairs: each pair is one ACL selector, so a
#: command is allowed on those keys only.
PRODUCER_SELECTORS = (
    # the job hash it writes, and reads back (no EXPIRE: EXPIRE 0 deletes,
    # leaving the job in our indexes; the pattern also covers the legacy
    # actor queues, which ACL patterns cannot leave out)
    ((keys.job(STAR),), ("hset", "hsetnx", "hget", "hmget", "hgetall", "hexists")),
    # the queues it pushes ids onto: canonical (every group, instance and
    # priority) and legacy
    ((keys.work_queue(STAR), keys.legacy_work(STAR), keys.legacy_actor_queue(STAR)),
     ("lpush", "rpush")),
    # stop requests
    ((keys.ctl(STAR), keys.legacy_stop(STAR)), ("lpush",)),
    # the results
    ((keys.reply(STAR), keys.legacy_reply(STAR)),
     ("blpop", "brpop", "lpop", "rpop", "lrange", "llen", "expire", "del")),
)  # fmt: skip

#: Keys a producer may only read, with the commands it reads them with.
PRODUCER_READS = ((keys.EVENTS,), ("xread", "xrange", "xrevrange", "xlen"))

#: Commands on no key: connecting (redis-py names and selects), health
#: checks, and transactions (redis-py's default pipeline), whose commands
#: Redis checks against the selectors one by one.
PRODUCER_COMMANDS = ("ping", "select", "client|setname", "multi", "exec", "discard", "watch",
                     "unwatch")  # fmt: skip


def _selector(patterns: tuple[str, ...], commands: tuple[str, ...], access: str = "") -> str:
    """One ACL selector: ``commands`` allowed on ``patterns`` only (``access``
    ``%R``: for reading only)."""
    rules = [*(f"{access}~{p}" for p in patterns), *(f"+{c}" for c in commands)]
    return "(" + " ".join(rules) + ")"


@dataclass(frozen=True)
class Role:
    """One Redis user: its name, where its password comes from (``password_env``)
    and its rules without the password."""

    role: str
    user: str
    rules: tuple[str, ...]

    @property
    def password_env(self) -> str:
        return f"HERO_ACL_{self.role.upper()}_PASSWORD"


ROLES = (
    Role(
        "actor",
        "hero-actor",
        (
            *(f"~{pattern}" for pattern in ACTOR_KEYS),
            *(f"&{channel}" for channel in ACTOR_CHANNELS),
            *(f"+{command}" for command in ACTOR_COMMANDS),
            *(f"+fcall|{function}" for function in ACTOR_FUNCTIONS),
        ),
    ),
    Role(
        "gateway",
        "hero-gateway",
        (f"~{keys.PREFIX}:*", f"&{keys.PREFIX}:*", "+@all", *GATEWAY_DENIED),
    ),
    # `hero-gateway keys` and `hero-gateway acl --apply` run as this one
    Role("admin", "hero-admin", ("~*", "&*", "+@all")),
    Role(
        "producer",
        "hero-producer",
        (
            *(f"+{command}" for command in PRODUCER_COMMANDS),
            *(_selector(patterns, commands) for patterns, commands in PRODUCER_SELECTORS),
            _selector(*PRODUCER_READS, access="%R"),
        ),
    ),
)


@dataclass(frozen=True)
class User:
    role: Role
    password: str
    generated: bool

    def setuser(self) -> list[str]:
        """The ``ACL SETUSER`` arguments; the password only as its SHA-256."""
        digest = hashlib.sha256(self.password.encode()).hexdigest()
        return ["ACL", "SETUSER", self.role.user, "reset", "on", f"#{digest}", *self.role.rules]


def users(environ: Mapping[str, str] | None = None) -> list[User]:
    """One user per role, with the password from its environment variable
    or, when that is unset or empty, a newly generated one."""
    env = os.environ if environ is None else environ
    found = []
    for role in ROLES:
        given = env.get(role.password_env, "")
        password = given or secrets.token_urlsafe(24)
        found.append(User(role, password, generated=not given))
    return found


def render(user: User) -> str:
    """One line that redis-cli accepts (patterns and selectors quoted: they
    hold ``*`` or spaces)."""
    return " ".join(f"'{part}'" if "*" in part or " " in part else part for part in user.setuser())


async def apply(client: Commands, found: list[User]) -> None:
    """Set every user on the Redis ``client`` reaches (it needs the ACL
    commands: the admin user, or the default user of a fresh server)."""
    for user in found:
        await client.execute_command(*user.setuser())
