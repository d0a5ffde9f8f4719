"""The settings of Redis and the queues: what the supervisor and actors agree on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.config.setting import (
    EVERY_COMMAND,
    non_negative,
    non_negative_int,
    parse_bool,
    parse_csv,
    positive,
    positive_int,
    setting,
)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_SCRIPT_TYPES = ("osis", "sal", "v", "python")

#: The legacy queues a compat-mode dispatch can also push to (see ``legacy_queues``).
LEGACY_KINDS = ("work_queue", "actor_queue")


#: How a Redis URL is written, for the message that refuses one.
REDIS_URL_FORM = "redis://[user:password@]host[:port][/db], rediss://… (TLS) or unix:///path"


#: Where a URL carries a credential: its user's password (``user:PASSWORD@``,
#: up to the netloc's last ``@`` as urlsplit reads it) and the value of a query
#: parameter whose name says credential (``?password=``, which redis-py reads
#: too, ``access_token``, ``api_key``, ``signature``...). One rule for every
#: place a URL is shown: ``mask_password`` and the log redaction (``gateway.logs``).
#: Group 1 is what stays before the mask.
URL_SECRETS = (
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^:/?#\s]*:)[^/?#\s]+(?=@)"),
    re.compile(
        r"(?i)([?&][\w.-]*?(?:token|key|secret|passw(?:or)?d|pwd|auth|signature|sig|credentials?)"
        r"s?=)[^&#\s'\"]+"
    ),
)


def mask_password(url: str) -> str:
    """``url`` fit for a message or a log: its password, wherever it is written
    (``URL_SECRETS``), replaced by ``***``."""
    try:
        urlsplit(url)
    except ValueError:  # a netloc urlsplit cannot read: show none of it
        return "<unreadable URL>"
    for pattern in URL_SECRETS:
        url = pattern.sub(r"\g<1>***", url)
    return url


def parse_redis_url(text: str) -> str:
    """A URL redis-py can connect with, checked when the setting is read, so that
    every command refuses a bad one alike (one line naming the setting) instead
    of redis-py raising from wherever the first connection happens to be made."""
    shown = mask_password(text)
    try:
        parts = urlsplit(text)
        port = parts.port  # ValueError when not a number from 0 to 65535
    except ValueError as exc:
        raise ValueError(f"not a Redis URL: {shown} ({exc})") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"not a Redis URL: {shown} (write {REDIS_URL_FORM})")
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"not a Redis URL: {shown} (unix:// needs the socket's path)")
        return text
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"not a Redis URL: {shown} (the database after the / is a number)")
    if port == 0:
        raise ValueError(f"not a Redis URL: {shown} (port 0)")
    return text


def parse_legacy_queues(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``type=kind[+kind],...``, e.g. ``python=actor_queue,osis=work_queue+actor_queue``."""
    routes = []
    for entry in parse_csv(text):
        script_type, sep, kinds = entry.partition("=")
        names = tuple(k.strip() for k in kinds.split("+") if k.strip())
        if not sep or not script_type.strip() or not names:
            raise ValueError(f"not type=kind[+kind]: {entry!r}")
        unknown = [k for k in names if k not in LEGACY_KINDS]
        if unknown:
            raise ValueError(f"unknown legacy queue {unknown[0]!r} ({', '.join(LEGACY_KINDS)})")
        routes.append((script_type.strip(), names))
    return tuple(routes)


@dataclass(frozen=True)
class QueueSettings:
    """Redis, routing, retries, retention and liveness."""

    redis_url: str | None = setting(
        None,
        parse_redis_url,
        f"Redis URL. `dev` starts its own redis-server when unset; other commands then use the "
        f"Redis of a running `dev` (recorded in its state folder), else {DEFAULT_REDIS_URL}. "
        "`pipeline run` publishes its report (stats.report) there when it is set or a `dev` runs.",
        (*EVERY_COMMAND, "pipeline run", "pipeline synth"),
    )
    redis_timeout: float = setting(
        10.0,
        positive,
        "Seconds Redis may owe a connection replies and send none before it counts as lost: "
        "the calls in flight on it are answered -32007 (Redis unreachable; they may have run "
        "once it answers again) instead of waiting on a stopped or wedged Redis for ever. "
        "Keep it above the longest Redis stays busy (the slow commands of all clients "
        "together) and the time the largest reply takes to arrive. BLOCKing reads wait as asked.",
        ("serve", "actor", "dev", "keys", "acl"),
    )
    script_types: tuple[str, ...] = setting(
        DEFAULT_SCRIPT_TYPES,
        parse_csv,
        "Comma-separated script types the supervisor accepts.",
        ("serve", "actor", "dev"),
    )
    compat_legacy: bool = setting(
        False,
        parse_bool,
        "Also push to and read from the legacy Hero keys (hero:work_queue:*, hero:reply:*).",
        ("serve", "actor", "dev"),
    )
    legacy_queues: tuple[tuple[str, tuple[str, ...]], ...] = setting(
        (),
        parse_legacy_queues,
        "Compat mode: the legacy queues each type's jobs are also pushed to, as "
        "`type=kind[+kind],...` with kinds work_queue (hero:work_queue:{worker_id or type}) "
        "and actor_queue (hero:job:actor_queue:{type}); unnamed types use work_queue.",
        ("serve", "actor", "dev"),
    )
    outside_grace: float = setting(
        2.0,
        non_negative,
        "Seconds an actor waits for the hash of a popped job id that has none (or no script) "
        "yet, since an outside producer may LPUSH before it HSETs; then the job ends in error.",
        ("actor", "dev"),
    )
    queue_poll: float = setting(
        0.0,
        non_negative,
        "Seconds between an idle actor's checks of its queues for jobs other producers pushed. "
        "0: no polling, Redis tells (CLIENT TRACKING); a Redis that refuses that gets 0.025.",
        ("actor", "dev"),
    )
    stream_types: tuple[str, ...] = setting(
        (),
        parse_csv,
        "Comma-separated script types whose type queue is a Redis Stream with a consumer "
        "group (at-least-once delivery) instead of a list.",
        ("serve", "actor", "dev"),
    )
    stream_claim_idle: float = setting(
        30.0,
        non_negative,
        "Stream mode: seconds a delivered job may go unacknowledged by a silent actor before "
        "another actor claims it (live actors keep theirs fresh on every heartbeat).",
        ("actor", "dev"),
    )
    dlq_maxlen: int = setting(
        10_000,
        positive_int,
        "Stream mode: approximate MAXLEN of each type's dead-letter stream.",
        ("serve", "actor", "dev"),
    )
    events_maxlen: int = setting(
        100_000,
        positive_int,
        "Approximate MAXLEN of the hero:events stream.",
        ("serve", "actor", "dev"),
    )
    watch_interval: float = setting(
        0.25,
        positive,
        "Seconds between batched hash checks for jobs run by actors that write only the hash.",
        ("serve", "dev"),
    )
    maintenance_interval: float = setting(
        1.0,
        positive,
        "Seconds between the supervisor's maintenance rounds: reaping dead actors' jobs, "
        "promoting due retries, expiring timed-out jobs, pruning stale stream consumers.",
        ("serve", "dev"),
    )
    retry_base: float = setting(
        1.0,
        non_negative,
        "Retry backoff base in seconds: a failed attempt n waits min(base*2^n + U(0,1), max).",
        ("serve", "actor", "dev"),
    )
    retry_max: float = setting(
        60.0,
        non_negative,
        "Retry backoff cap in seconds.",
        ("serve", "actor", "dev"),
    )
    timeout_grace: float = setting(
        30.0,
        non_negative,
        "Seconds past its timeout before the supervisor ends a started job whose actor is gone.",
        ("serve", "dev"),
    )
    job_ttl: int = setting(
        7 * 24 * 3600,
        non_negative_int,
        "Seconds an ended job, its reply and its logs (log files too) are kept (0: forever).",
        ("serve", "actor", "dev"),
    )
    created_ttl: int = setting(
        7 * 24 * 3600,
        non_negative_int,
        "Seconds a job may stay created and never started; then the supervisor stops it "
        "(status stopped, error 'not started within ...'), and HERO_JOB_TTL counts from "
        "there (0: created jobs stay until deleted).",
        ("serve", "dev"),
    )
    presence_ttl: int = setting(
        15,
        positive_int,
        "Seconds an actor's presence key lives; the actor refreshes it every third of that. "
        "The gateway declares an actor dead once its presence has been missing for this long "
        "while Redis was reachable (an outage does not count). Set it alike on both.",
        ("serve", "actor", "dev"),
    )
    max_actor_deaths: int = setting(
        2,
        non_negative_int,
        "Actors a job may see die while running it: it runs again without spending its "
        "retries until then, and the last death sends it to the dead-letter list (reason "
        "poison) instead of the next actor.",
        ("serve", "dev"),
    )

    @property
    def redis(self) -> str:
        """The Redis URL to use: the configured one, else the default."""
        return self.redis_url or DEFAULT_REDIS_URL
