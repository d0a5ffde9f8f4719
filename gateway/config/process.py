"""The settings of the gateway's transport, of the actor's jobs and of every process."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.config.setting import (
    EVERY_COMMAND,
    non_negative,
    non_negative_int,
    one_of,
    parse_bool,
    parse_port,
    positive,
    positive_int,
    setting,
)


def normalise_origin(origin: str) -> str | None:
    """A browser origin as ``scheme://host[:port]`` in lower case, or None for
    anything that is not an http(s) origin (``null``, a path, a user, no host)."""
    text = origin.strip().lower()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port that is not one)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    return text


def parse_origins(text: str) -> tuple[str, ...]:
    """Comma-separated browser origins, each ``scheme://host[:port]``."""
    found = []
    for part in text.split(","):
        if not part.strip():
            continue
        origin = normalise_origin(part)
        if origin is None:
            raise ValueError(f"not an origin (scheme://host[:port]): {part.strip()!r}")
        found.append(origin)
    return tuple(found)


@dataclass(frozen=True)
class ServeSettings:
    """Where the gateway listens and what one connection may ask of it."""

    host: str = setting(
        "127.0.0.1",
        str,
        "Address the gateway listens on.",
        ("serve", "dev"),
    )
    port: int = setting(
        8080,
        parse_port,
        "Port the gateway listens on.",
        ("serve", "dev"),
    )
    insecure: bool = setting(
        False,
        parse_bool,
        "Listen on a non-loopback address even when no API key exists (anyone may do anything).",
        ("serve",),
    )
    allowed_origins: tuple[str, ...] = setting(
        (),
        parse_origins,
        "Comma-separated browser origins (scheme://host[:port]) whose pages may use the "
        "gateway while it has no API key; its own page on a loopback name always may.",
        ("serve", "dev"),
    )
    max_message_bytes: int = setting(
        1_048_576,
        positive_int,
        "Largest JSON-RPC message in bytes (WebSocket message: close 1009; HTTP body: 413).",
        ("serve",),
    )
    max_inflight: int = setting(
        64,
        positive_int,
        "Requests one connection may have running at once; the excess are answered -32006.",
        ("serve",),
    )
    max_batch: int = setting(
        256,
        positive_int,
        "Most elements one JSON-RPC batch may hold; a longer batch is answered with one -32600.",
        ("serve",),
    )
    max_unsent_bytes: int = setting(
        1_048_576,
        positive_int,
        "Reply bytes a WebSocket may leave unread; past it the gateway stops reading that socket.",
        ("serve",),
    )
    unsent_grace: float = setting(
        10.0,
        non_negative,
        "Seconds a WebSocket over --max-unsent-bytes gets to read before it is closed with 1008.",
        ("serve",),
    )
    auth_timeout: float = setting(
        10.0,
        positive,
        "Seconds a WebSocket opened without a key (while keys exist) gets to auth.login "
        "before it is closed with 1008.",
        ("serve",),
    )
    header_timeout: float = setting(
        10.0,
        positive,
        "Seconds a client gets to send a request's complete HTTP headers before the "
        "connection is closed, then as long for the body of a POST to /rpc (else 408); "
        "one that leaves its answers unread for as long is dropped (more than 64 KiB of "
        "them while its connection is open).",
        ("serve",),
    )
    max_connections: int = setting(
        4096,
        positive_int,
        "Connections one gateway process serves at once; past it a WebSocket upgrade or an "
        "HTTP request is answered 503.",
        ("serve",),
    )
    max_unidentified: int = setting(
        1024,
        positive_int,
        "Connections one gateway process lets stay unidentified for over a second (request "
        "headers not complete, or a WebSocket opened without a key not yet logged in), so "
        "the rest of --max-connections stays for clients that said who they are; past it, "
        "one that stays unidentified is closed (HTTP: 503, WebSocket: 1013).",
        ("serve",),
    )
    max_unidentified_per_client: int = setting(
        32,
        positive_int,
        "Of those, the most one client may hold: an IPv4 address, or an IPv6 /64 (uvicorn "
        "reads a WebSocket's client from X-Forwarded-For when the proxy is in its "
        "FORWARDED_ALLOW_IPS, 127.0.0.1 and ::1 unless set).",
        ("serve",),
    )
    ping_interval: float = setting(
        20.0,
        non_negative,
        "Seconds between WebSocket keepalive pings (0: no pings).",
        ("serve",),
    )
    ping_timeout: float = setting(
        20.0,
        non_negative,
        "Seconds a client has to answer a keepalive ping before its socket is closed.",
        ("serve",),
    )
    shutdown_grace: float = setting(
        10.0,
        non_negative,
        "On SIGTERM, seconds in-flight calls get to finish before sockets close with 1012.",
        ("serve",),
    )
    check_results: bool = setting(
        False,
        parse_bool,
        "Check every RPC result against the contract; a mismatch is answered -32603 (tests).",
        ("serve",),
    )


@dataclass(frozen=True)
class JobSettings:
    """How an actor runs python jobs: sandbox, limits, logs."""

    log_dir: str | None = setting(
        None,
        str,
        "Folder for per-job log files the actor writes, removed once their job has expired "
        "(HERO_JOB_TTL). Default: under the user state dir.",
        ("actor", "dev"),
    )
    sandbox: str = setting(
        "on",
        one_of("on or off", "on", "off"),
        "on: every python job runs in bubblewrap namespaces and the actor refuses to start "
        "where they cannot be made; off: jobs run unconfined (trusted scripts only).",
        ("actor", "dev"),
    )
    job_network: bool = setting(
        False,
        parse_bool,
        "Give python jobs the host's network (default: loopback of their own only).",
        ("actor", "dev"),
    )
    job_uid: int = setting(
        65534,
        positive_int,
        "Host uid and gid python jobs run as when the actor runs as root (not 0: root).",
        ("actor", "dev"),
    )
    job_memory_mb: int = setting(
        1024,
        positive_int,
        "Memory of a whole python job in MiB (its cgroup; else per process, RLIMIT_AS).",
        ("actor", "dev"),
    )
    job_max_procs: int = setting(
        64,
        positive_int,
        "Processes and threads of a whole python job (its cgroup; else RLIMIT_NPROC).",
        ("actor", "dev"),
    )
    job_cpu_seconds: int = setting(
        0,
        non_negative_int,
        "CPU seconds of a whole python job (its cgroup; else per process, RLIMIT_CPU; "
        "0: the job's timeout + 5).",
        ("actor", "dev"),
    )
    job_max_output: int = setting(
        1 << 20,
        non_negative_int,
        "Bytes of a python job's stdout kept as its output (the rest is cut, and says so).",
        ("actor", "dev"),
    )
    job_max_log: int = setting(
        8 << 20,
        non_negative_int,
        "Bytes of a job's log file on disk (the rest is cut, and says so).",
        ("actor", "dev"),
    )


@dataclass(frozen=True)
class ProcessSettings:
    """Every process: its event loop and its logs."""

    event_loop: str = setting(
        "auto",
        one_of("an event loop", "auto", "uvloop", "asyncio"),
        "Event loop: uvloop, asyncio, or auto (uvloop where installed). uvloop took "
        "about a quarter off a WebSocket run-and-wait in bench/.",
        ("serve", "actor", "dev"),
    )
    log_format: str = setting(
        "json",
        one_of("a log format", "json", "text"),
        "Log format: json (one object per line) or text.",
        EVERY_COMMAND,
    )
    log_level: str = setting(
        "info",
        one_of("a log level", "debug", "info", "warning", "error"),
        "Log level: debug, info, warning, error.",
        EVERY_COMMAND,
    )
