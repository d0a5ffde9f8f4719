"""Every setting hero-gateway has, declared once.

Each ``Setting`` names its environment variable (``HERO_`` prefix), its CLI
flag and its default. The CLI builds its flags from this table, the README's
configuration table lists the same rows (a test keeps them in step), and the
rest of the code only ever sees a resolved ``Config``.

Precedence: CLI flag, then environment variable, then default.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from gateway.paths import read_dev_record

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_SCRIPT_TYPES = ("osis", "sal", "v", "python")


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _event_loop(text: str) -> str:
    value = text.strip().lower()
    if value not in {"auto", "uvloop", "asyncio"}:
        raise ValueError(f"not an event loop: {text!r} (auto, uvloop or asyncio)")
    return value


def _on_off(text: str) -> str:
    value = text.strip().lower()
    if value not in {"on", "off"}:
        raise ValueError(f"not on or off: {text!r}")
    return value


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


#: The legacy queues a compat-mode dispatch can also push to (see ``legacy_queues``).
LEGACY_KINDS = ("work_queue", "actor_queue")


def _legacy_queues(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``type=kind[+kind],...``, e.g. ``python=actor_queue,osis=work_queue+actor_queue``."""
    routes = []
    for entry in _csv(text):
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
class Setting:
    name: str
    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    commands: tuple[str, ...]

    @property
    def env(self) -> str:
        return "HERO_" + self.name.upper()


_ALL = ("serve", "actor", "dev", "archive", "keys", "acl")

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "redis_url",
        "--redis-url",
        str,
        None,
        f"Redis URL. `dev` starts its own redis-server when unset; other commands then use the "
        f"Redis of a running `dev` (recorded in its state folder), else {DEFAULT_REDIS_URL}.",
        _ALL,
    ),
    Setting(
        "redis_max_connections",
        "--redis-max-connections",
        int,
        8,
        "Size of the shared connection pool per process (callers queue for a connection).",
        _ALL,
    ),
    Setting(
        "script_types",
        "--script-types",
        _csv,
        DEFAULT_SCRIPT_TYPES,
        "Comma-separated script types the supervisor accepts.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "compat_legacy",
        "--compat-legacy",
        _bool,
        False,
        "Also push to and read from the legacy Hero keys (hero:work_queue:*, hero:reply:*).",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "legacy_queues",
        "--legacy-queues",
        _legacy_queues,
        (),
        "Compat mode: the legacy queues each type's jobs are also pushed to, as "
        "`type=kind[+kind],...` with kinds work_queue (hero:work_queue:{worker_id or type}) "
        "and actor_queue (hero:job:actor_queue:{type}); unnamed types use work_queue.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "outside_grace",
        "--outside-grace",
        float,
        2.0,
        "Seconds an actor waits for the hash of a popped job id that has none (or no script) "
        "yet, since an outside producer may LPUSH before it HSETs; then the job ends in error.",
        ("actor", "dev"),
    ),
    Setting(
        "queue_poll",
        "--queue-poll",
        float,
        0.0,
        "Seconds between an idle actor's checks of its queues for jobs other producers pushed. "
        "0: no polling, Redis tells (CLIENT TRACKING); a Redis that refuses that gets 0.025.",
        ("actor", "dev"),
    ),
    Setting(
        "stream_types",
        "--stream-types",
        _csv,
        (),
        "Comma-separated script types whose type queue is a Redis Stream with a consumer "
        "group (at-least-once delivery) instead of a list.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "stream_claim_idle",
        "--stream-claim-idle",
        float,
        30.0,
        "Stream mode: seconds a delivered job may go unacknowledged by a silent actor before "
        "another actor claims it (live actors keep theirs fresh on every heartbeat).",
        ("actor", "dev"),
    ),
    Setting(
        "dlq_maxlen",
        "--dlq-maxlen",
        int,
        10_000,
        "Stream mode: approximate MAXLEN of each type's dead-letter stream.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "events_maxlen",
        "--events-maxlen",
        int,
        100_000,
        "Approximate MAXLEN of the hero:events stream.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "watch_interval",
        "--watch-interval",
        float,
        0.25,
        "Seconds between batched hash checks for jobs run by actors that write only the hash.",
        ("serve", "dev"),
    ),
    Setting(
        "retry_base",
        "--retry-base",
        float,
        1.0,
        "Retry backoff base in seconds: a failed attempt n waits min(base*2^n + U(0,1), max).",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "retry_max",
        "--retry-max",
        float,
        60.0,
        "Retry backoff cap in seconds.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "timeout_grace",
        "--timeout-grace",
        float,
        30.0,
        "Seconds past its timeout before the supervisor ends a started job whose actor is gone.",
        ("serve", "dev"),
    ),
    Setting(
        "job_ttl",
        "--job-ttl",
        int,
        7 * 24 * 3600,
        "Seconds an ended job, its reply and its logs are kept (0: forever).",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "presence_ttl",
        "--presence-ttl",
        int,
        15,
        "Seconds an actor's presence key lives; the actor refreshes it every third of that. "
        "The gateway declares an actor dead once its presence has been missing for this long "
        "while Redis was reachable (an outage does not count). Set it alike on both.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "max_actor_deaths",
        "--max-actor-deaths",
        int,
        2,
        "Actors a job may see die while running it: it runs again without spending its "
        "retries until then, and the last death sends it to the dead-letter list (reason "
        "poison) instead of the next actor.",
        ("serve", "dev"),
    ),
    Setting(
        "host",
        "--host",
        str,
        "127.0.0.1",
        "Address the gateway listens on.",
        ("serve", "dev"),
    ),
    Setting(
        "port",
        "--port",
        int,
        8080,
        "Port the gateway listens on.",
        ("serve", "dev"),
    ),
    Setting(
        "insecure",
        "--insecure",
        _bool,
        False,
        "Listen on a non-loopback address even when no API key exists (anyone may do anything).",
        ("serve",),
    ),
    Setting(
        "max_message_bytes",
        "--max-message-bytes",
        int,
        1_048_576,
        "Largest JSON-RPC message in bytes (WebSocket message: close 1009; HTTP body: 413).",
        ("serve",),
    ),
    Setting(
        "max_inflight",
        "--max-inflight",
        int,
        64,
        "Requests one connection may have running at once; the excess are answered -32006.",
        ("serve",),
    ),
    Setting(
        "max_unsent_bytes",
        "--max-unsent-bytes",
        int,
        1_048_576,
        "Reply bytes a WebSocket may leave unread; past it the gateway stops reading that socket.",
        ("serve",),
    ),
    Setting(
        "unsent_grace",
        "--unsent-grace",
        float,
        10.0,
        "Seconds a WebSocket over --max-unsent-bytes gets to read before it is closed with 1008.",
        ("serve",),
    ),
    Setting(
        "auth_timeout",
        "--auth-timeout",
        float,
        10.0,
        "Seconds a WebSocket opened without a key (while keys exist) gets to auth.login "
        "before it is closed with 1008.",
        ("serve",),
    ),
    Setting(
        "header_timeout",
        "--header-timeout",
        float,
        10.0,
        "Seconds a client gets to send a request's complete HTTP headers before the "
        "connection is closed.",
        ("serve",),
    ),
    Setting(
        "max_connections",
        "--max-connections",
        int,
        4096,
        "Connections one gateway process serves at once; past it a WebSocket upgrade or an "
        "HTTP request is answered 503.",
        ("serve",),
    ),
    Setting(
        "ping_interval",
        "--ping-interval",
        float,
        20.0,
        "Seconds between WebSocket keepalive pings (0: no pings).",
        ("serve",),
    ),
    Setting(
        "ping_timeout",
        "--ping-timeout",
        float,
        20.0,
        "Seconds a client has to answer a keepalive ping before its socket is closed.",
        ("serve",),
    ),
    Setting(
        "shutdown_grace",
        "--shutdown-grace",
        float,
        10.0,
        "On SIGTERM, seconds in-flight calls get to finish before sockets close with 1012.",
        ("serve",),
    ),
    Setting(
        "check_results",
        "--check-results",
        _bool,
        False,
        "Check every RPC result against the contract; a mismatch is answered -32603 (tests).",
        ("serve",),
    ),
    Setting(
        "log_dir",
        "--log-dir",
        str,
        None,
        "Folder for per-job log files the actor writes. Default: under the user state dir.",
        ("actor", "dev"),
    ),
    Setting(
        "sandbox",
        "--sandbox",
        _on_off,
        "on",
        "on: every python job runs in bubblewrap namespaces and the actor refuses to start "
        "where they cannot be made; off: jobs run unconfined (trusted scripts only).",
        ("actor", "dev"),
    ),
    Setting(
        "job_network",
        "--job-network",
        _bool,
        False,
        "Give python jobs the host's network (default: loopback of their own only).",
        ("actor", "dev"),
    ),
    Setting(
        "job_uid",
        "--job-uid",
        int,
        65534,
        "Host uid and gid python jobs run as when the actor runs as root.",
        ("actor", "dev"),
    ),
    Setting(
        "job_memory_mb",
        "--job-memory-mb",
        int,
        1024,
        "Memory of a whole python job in MiB (its cgroup; else per process, RLIMIT_AS).",
        ("actor", "dev"),
    ),
    Setting(
        "job_max_procs",
        "--job-max-procs",
        int,
        64,
        "Processes and threads of a whole python job (its cgroup; else RLIMIT_NPROC).",
        ("actor", "dev"),
    ),
    Setting(
        "job_cpu_seconds",
        "--job-cpu-seconds",
        int,
        0,
        "CPU seconds of a whole python job (its cgroup; else per process, RLIMIT_CPU; "
        "0: the job's timeout + 5).",
        ("actor", "dev"),
    ),
    Setting(
        "job_max_output",
        "--job-max-output",
        int,
        1 << 20,
        "Bytes of a python job's stdout kept as its output (the rest is cut, and says so).",
        ("actor", "dev"),
    ),
    Setting(
        "job_max_log",
        "--job-max-log",
        int,
        8 << 20,
        "Bytes of a job's log file on disk (the rest is cut, and says so).",
        ("actor", "dev"),
    ),
    Setting(
        "event_loop",
        "--event-loop",
        _event_loop,
        "auto",
        "Event loop: uvloop, asyncio, or auto (uvloop where installed). uvloop took "
        "about a quarter off a WebSocket run-and-wait in bench/.",
        ("serve", "actor", "dev"),
    ),
    Setting(
        "log_format",
        "--log-format",
        str,
        "json",
        "Log format: json (one object per line) or text.",
        _ALL,
    ),
    Setting(
        "log_level",
        "--log-level",
        str,
        "info",
        "Log level: debug, info, warning, error.",
        _ALL,
    ),
)


@dataclass(frozen=True)
class Config:
    redis_url: str | None = None
    redis_max_connections: int = 8
    script_types: tuple[str, ...] = DEFAULT_SCRIPT_TYPES
    compat_legacy: bool = False
    legacy_queues: tuple[tuple[str, tuple[str, ...]], ...] = ()
    outside_grace: float = 2.0
    queue_poll: float = 0.0
    stream_types: tuple[str, ...] = ()
    stream_claim_idle: float = 30.0
    dlq_maxlen: int = 10_000
    events_maxlen: int = 100_000
    watch_interval: float = 0.25
    presence_ttl: int = 15
    max_actor_deaths: int = 2
    job_ttl: int = 7 * 24 * 3600
    retry_base: float = 1.0
    retry_max: float = 60.0
    timeout_grace: float = 30.0
    host: str = "127.0.0.1"
    port: int = 8080
    insecure: bool = False
    max_message_bytes: int = 1_048_576
    max_inflight: int = 64
    max_unsent_bytes: int = 1_048_576
    unsent_grace: float = 10.0
    auth_timeout: float = 10.0
    header_timeout: float = 10.0
    max_connections: int = 4096
    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    shutdown_grace: float = 10.0
    check_results: bool = False
    log_dir: str | None = None
    sandbox: str = "on"
    job_network: bool = False
    job_uid: int = 65534
    job_memory_mb: int = 1024
    job_max_procs: int = 64
    job_cpu_seconds: int = 0
    job_max_output: int = 1 << 20
    job_max_log: int = 8 << 20
    event_loop: str = "auto"
    log_format: str = "json"
    log_level: str = "info"

    @property
    def redis(self) -> str:
        return self.redis_url or DEFAULT_REDIS_URL


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the flags of every setting that applies to ``command``."""
    for s in SETTINGS:
        if command not in s.commands:
            continue
        if s.parse is _bool:
            parser.add_argument(
                s.flag,
                dest=s.name,
                action="store_const",
                const=True,
                default=None,
                help=f"{s.help} [env {s.env}]",
            )
        else:
            parser.add_argument(
                s.flag,
                dest=s.name,
                type=s.parse,
                default=None,
                help=f"{s.help} [env {s.env}, default {_show(s.default)}]",
            )


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(v if isinstance(v, str) else f"{v[0]}={'+'.join(v[1])}" for v in value)
    return "unset" if value is None else str(value)


def resolve(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    dev_redis: bool = True,
) -> Config:
    """Build a ``Config`` from flags, then ``HERO_*`` variables, then defaults.

    The Redis URL has one more step before its default: the Redis of a running
    ``hero-gateway dev`` (see ``_dev_redis_url``). It applies to the process's
    own environment (``environ`` None) and to commands that talk to Redis,
    which are the ones with a ``--redis-url`` flag; never to ``dev`` itself.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    known = {f.name for f in fields(Config)}
    for s in SETTINGS:
        flag_value = getattr(args, s.name, None) if args is not None else None
        if flag_value is not None:
            values[s.name] = flag_value
        elif s.env in env:
            try:
                values[s.name] = s.parse(env[s.env])
            except ValueError as exc:
                raise SystemExit(f"{s.env}: {exc}") from None
        elif s.name in known:
            values[s.name] = s.default
    uses_redis = args is None or (
        hasattr(args, "redis_url") and getattr(args, "command", None) != "dev"
    )
    if dev_redis and environ is None and uses_redis and values.get("redis_url") is None:
        values["redis_url"] = _dev_redis_url()
    config = Config(**values)
    for variable, named in (
        ("HERO_STREAM_TYPES", config.stream_types),
        ("HERO_LEGACY_QUEUES", [t for t, _ in config.legacy_queues]),
    ):
        unknown = sorted(set(named) - set(config.script_types))
        if unknown:
            raise SystemExit(
                f"{variable}: {', '.join(unknown)} not among the script types "
                f"({', '.join(config.script_types)})"
            )
    return config


_announced: set[str] = set()


def _dev_redis_url() -> str | None:
    """The URL ``hero-gateway dev`` recorded, said once per process on stderr.

    A record whose dev has exited stops the command: falling back to 6379
    would load the ``hero`` library into whatever Redis happens to be there.
    """
    record = read_dev_record()
    if record is None:
        return None
    if not record.alive:
        raise SystemExit(
            f"hero-gateway: the dev Redis recorded in {record.path} ({record.redis_url}) is "
            f"gone: `hero-gateway dev` (pid {record.pid}) is no longer running. Start it again "
            f"(make run), set HERO_REDIS_URL or --redis-url, or delete that file to use "
            f"{DEFAULT_REDIS_URL}."
        )
    if record.redis_url not in _announced:
        _announced.add(record.redis_url)
        print(
            f"hero-gateway: using the Redis of `hero-gateway dev`, {record.redis_url} "
            f"(HERO_REDIS_URL or --redis-url choose another)",
            file=sys.stderr,
        )
    return record.redis_url


def markdown_table() -> str:
    """The README's configuration table, generated from SETTINGS."""
    rows = [
        "| variable | flag | default | commands | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        default = "off" if s.parse is _bool else _show(s.default)
        rows.append(
            f"| `{s.env}` | `{s.flag}` | `{default}` | {', '.join(s.commands)} | {s.help} |"
        )
    return "\n".join(rows)


def redacted(config: Config) -> dict[str, Any]:
    """The effective settings with any password in the Redis URL hidden."""
    values = {s.name: getattr(config, s.name) for s in SETTINGS}
    url = values.get("redis_url")
    if url and "@" in url:
        scheme, _, rest = url.partition("://")
        values["redis_url"] = f"{scheme}://***@{rest.rpartition('@')[2]}"
    return values
