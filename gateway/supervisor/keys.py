"""Every Redis key hero-gateway reads or writes, built in one place.

The canonical and legacy names follow the Hero job protocol (DESIGN.md) so
actors we did not write keep working. Names marked *ours* are private to
hero-gateway. No other module spells a key: grep for ``hero:`` should only
ever find this file.

Identifiers that go into a key (job ids, script types, groups, instances,
caller ids) are validated before they reach here (see ``IDENT_PATTERN``), so
no client can inject ``:`` or glob characters into a key name.
"""

from __future__ import annotations

import re

from gateway.model.job import DEFAULT_PRIORITY as DEFAULT_PRIORITY  # stats.py reads it here too
from gateway.model.job import IDENT_PATTERN as IDENT_PATTERN  # what may go into a key
from gateway.model.job import JobSpec

_IDENT = re.compile(IDENT_PATTERN)

PREFIX = "hero"


#: Priorities: 0 high, 1 normal (plain key, seen by plain Hero actors), 2 low.
PRIORITIES = (0, 1, 2)
_PRIORITY_TEXT = tuple(str(p) for p in PRIORITIES)  # as a queue's name spells them

EVENTS = f"{PREFIX}:events"
#: The terminal events alone, under the same ids as in EVENTS (trimmed to
#: about ENDED_MAXLEN): a process with waiting callers and no subscriber
#: blocks on this one, so it wakes once per ended job, not per transition.
#: A reader needs only the entries after its events position, which it
#: moves every 10 ms while busy, so a short stream suffices (entries carry
#: outputs of up to 4 KiB: at most about 4 MiB).
ENDED = f"{PREFIX}:events:ended"
ENDED_MAXLEN = 1_000


# -- canonical ---------------------------------------------------------------


def job(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}"


def work_queue(
    script_type: str,
    group: str | None = None,
    instance: str | None = None,
    priority: int = DEFAULT_PRIORITY,
) -> str:
    """The work list a job is dispatched to: instance, else group, else type."""
    key = f"{PREFIX}:q:work:type:{script_type}"
    if group:
        key += f":group:{group}"
        if instance:
            key += f":inst:{instance}"
    if priority != DEFAULT_PRIORITY:
        key += f":prio:{priority}"
    return key


def dispatch_queue(spec: JobSpec) -> str:
    """Where a job is dispatched: the type's stream in stream mode; else the
    instance queue, else the group queue, else the type queue."""
    if spec.stream:
        return work_stream(spec.script_type)
    return work_queue(spec.script_type, spec.group, spec.instance, spec.priority)


def work_stream(script_type: str) -> str:
    """Stream mode: the type queue as a Redis Stream read by the ``STREAM_GROUP``
    consumer group. A key of its own, so switching a type between modes never
    meets a list where a stream is expected."""
    return f"{PREFIX}:q:stream:type:{script_type}"


def parse_work_stream(key: str) -> str | None:
    """The script type of a work stream key, or None when it is not one."""
    head = f"{PREFIX}:q:stream:type:"
    rest = key[len(head) :] if key.startswith(head) else ""
    return rest if _IDENT.fullmatch(rest) else None


#: The consumer group every actor of a stream-mode type reads through.
STREAM_GROUP = "hero"


def parse_work_queue(key: str) -> dict[str, str | int | None] | None:
    """The parts of a canonical work queue key, or None when it is not one."""
    head = f"{PREFIX}:q:work:type:"
    if not key.startswith(head):
        return None
    parts = key[len(head) :].split(":")
    found: dict[str, str | int | None] = {
        "script_type": parts[0],
        "group": None,
        "instance": None,
        "priority": DEFAULT_PRIORITY,
    }
    if not _IDENT.fullmatch(parts[0]):  # anyone may name a queue: text that is no key part
        return None
    names = {"group": "group", "inst": "instance", "prio": "priority"}
    for name, value in zip(parts[1::2], parts[2::2], strict=False):
        if name not in names:
            return None
        if name == "prio":  # anyone may name a queue (a job hash's field): no crash on junk
            if value not in _PRIORITY_TEXT:
                return None
            found["priority"] = int(value)
        elif _IDENT.fullmatch(value):
            found[names[name]] = value
        else:
            return None
    return found


def pop_order(script_type: str, group: str | None, instance: str | None) -> list[str]:
    """The queues an actor pops, highest precedence first.

    Priority dominates, then specificity: inst p0, group p0, type p0, inst p1, …
    An actor without a group only serves the type queues.
    """
    levels: list[tuple[str | None, str | None]] = []
    if group and instance:
        levels.append((group, instance))
    if group:
        levels.append((group, None))
    levels.append((None, None))
    return [work_queue(script_type, g, i, p) for p in PRIORITIES for g, i in levels]


def reply(job_id: str) -> str:
    return f"{PREFIX}:q:reply:{job_id}"


def ctl(script_type: str, group: str | None = None, instance: str | None = None) -> str:
    if group and instance:
        return f"{PREFIX}:q:ctl:type:{script_type}:group:{group}:inst:{instance}"
    return f"{PREFIX}:q:ctl:type:{script_type}"


def presence(script_type: str, group: str, instance: str) -> str:
    return f"{PREFIX}:meta:actor:inst:{script_type}:{group}:{instance}"


# -- legacy (compat mode) ----------------------------------------------------


def legacy_work(worker_id: str) -> str:
    return f"{PREFIX}:work_queue:{worker_id}"


def legacy_actor_queue(suffix: str) -> str:
    return f"{PREFIX}:job:actor_queue:{suffix}"


def legacy_reply(job_id: str) -> str:
    return f"{PREFIX}:reply:{job_id}"


def legacy_stop(worker_id: str) -> str:
    return f"{PREFIX}:stop_queue:{worker_id}"


# -- ours --------------------------------------------------------------------

#: Sorted set of presence keys scored by expiry (ms), so listing actors never SCANs.
ACTORS = f"{PREFIX}:meta:actors"

#: Set of every work queue key a job was ever dispatched to (for queue.stats without SCAN).
QUEUES = f"{PREFIX}:meta:queues"

#: Sorted set of every job id, scored by creation time (ms): the list index.
INDEX_ALL = f"{PREFIX}:idx:all"


def index_status(status: str) -> str:
    return f"{PREFIX}:idx:status:{status}"


def index_type(script_type: str) -> str:
    return f"{PREFIX}:idx:type:{script_type}"


def index_caller(caller_id: str) -> str:
    return f"{PREFIX}:idx:caller:{caller_id}"


def held(script_type: str, group: str, instance: str) -> str:
    """Jobs an actor instance has claimed and not finished (reliable consumption)."""
    return f"{PREFIX}:q:held:{script_type}:{group}:{instance}"


def logs(job_id: str) -> str:
    """The tail of a job's stdout/stderr, so ``logs`` works when the actor is on another host."""
    return f"{PREFIX}:logs:{job_id}"


def api_key(key_hash: str) -> str:
    return f"{PREFIX}:auth:key:{key_hash}"


#: Set of the hashes of every API key, for ``keys list``.
API_KEYS = f"{PREFIX}:auth:keys"

#: Pub/sub channel: the hash of each revoked API key is published on it, so
#: every gateway ends the connections that key opened at once.
API_KEY_REVOKED = f"{PREFIX}:auth:revoked"

#: The latest pipeline report (JSON), so any gateway can serve ``stats.report``.
STATS_REPORT = f"{PREFIX}:stats:report"

#: Hash of job transitions counted since the key was made, one field per
#: ``<status>:<script type>`` (a status never holds ``:``): written by
#: ``emit`` in hero.lua, read by ``GET /metrics`` (every gateway reports the
#: same deployment-wide count without reading the events stream).
TRANSITIONS = f"{PREFIX}:stats:transitions"

#: Sorted set of jobs waiting out a retry backoff, scored by the time (ms) they are due.
DELAYED = f"{PREFIX}:q:delayed"

#: Tombstones of ended jobs (JSON, scored by expiry ms): which index entries to drop.
EXPIRING = f"{PREFIX}:idx:expiring"

#: Who runs the maintenance loop (reaper, retries, timeouts) among several gateways.
LEADER = f"{PREFIX}:meta:leader"

#: When the maintenance leader last reached Redis (ms): a long gap is an
#: outage, which the dead-actor detector does not count against actors.
WATCH = f"{PREFIX}:meta:watch"

#: Where the expiry pass (hero_expire) goes on in each status index: a rank
#: per status, so more jobs in one status than a pass looks at starve none.
EXPIRE_CURSOR = f"{PREFIX}:meta:expire"


#: Ids popped from a work queue whose job hash (or its script) was not there
#: yet: JSON {id, queue} scored by the time (ms) their grace ends (an outside
#: producer may LPUSH before it HSETs).
ORPHANS = f"{PREFIX}:q:orphans"


def dlq(script_type: str) -> str:
    """Dead-letter list per type: JSON entries with reason, last error and time."""
    return f"{PREFIX}:q:dlq:type:{script_type}"


def wake(script_type: str) -> str:
    """Pub/sub channel on which ``dispatch`` names the queue it pushed to, so
    idle actors of the type wake (a wake-up only: the job is in the queue)."""
    return f"{PREFIX}:wake:type:{script_type}"


def idle(script_type: str) -> str:
    """Hash of the actors of the type whose last cycle left them room, each
    with its free slots: a dispatch hands a job to one of them directly (no
    claim round trip). (A list named ``hero:q:idle:type:{t}`` before slots
    were counted: a new name, so a list left by an older version is no
    WRONGTYPE.)"""
    return f"{PREFIX}:q:idle:slots:type:{script_type}"


def handoff(script_type: str, group: str, instance: str) -> str:
    """Pub/sub channel of one actor instance: the claim rows of jobs handed to it."""
    return f"{PREFIX}:wake:inst:{script_type}:{group}:{instance}"


def dlq_stream(script_type: str) -> str:
    """Stream mode's dead-letter stream per type: job_id, reason, last_error, dlq_ts, attempt."""
    return f"{PREFIX}:q:dlq:stream:type:{script_type}"


def parse_presence(key: str) -> tuple[str, str, str] | None:
    """(script_type, group, instance) of a presence key."""
    head = f"{PREFIX}:meta:actor:inst:"
    if not key.startswith(head):
        return None
    parts = key[len(head) :].split(":")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None
