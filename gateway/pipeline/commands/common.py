"""What the pipeline's commands share: consoles, error reporting, Redis, folders, signals."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from rich.console import Console

from gateway import logs
from gateway.config import mask_password
from gateway.errors import BackendUnavailable, HeroError, InvalidParams
from gateway.paths import state_dir

log = logging.getLogger("gateway.pipeline.cli")
err = Console(stderr=True, soft_wrap=True)
out = Console()
if not out.is_terminal:
    out = Console(width=160)


def folder(configured: str | None, name: str) -> str:
    """A configured folder, else ``name`` under the state folder, like every other
    file a documented command writes without --out, so nothing lands in
    whatever folder the command was run from."""
    return configured or str(state_dir() / name)


def guard(action: Callable[[], int]) -> int:
    """Run a command body; user and environment errors become one line on stderr."""
    try:
        return action()
    except InvalidParams as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        return 2
    except HeroError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except OSError as exc:  # a full disk, a read-only folder, ...
        where = f" ({exc.filename})" if exc.filename else ""
        err.print(f"[red]error:[/red] {exc.strerror or exc}{where}", highlight=False)
        return 1


def redis_client(url: str, *, socket_timeout: float | None = None) -> redis.Redis:
    """A connected client, or the reason there is none as a one-line error."""
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            # a producer may have written bytes that are not UTF-8: archived as
            # U+FFFD (Parquet strings are UTF-8) rather than failing every batch
            encoding_errors="replace",
            socket_connect_timeout=5,
            socket_timeout=socket_timeout,
        )
        client.ping()
    except redis.RedisError as exc:  # refused (and why) or unreachable, as every command says
        raise BackendUnavailable(logs.redis_failure(exc, url)) from exc
    except ValueError as exc:  # an option in the URL's query redis-py does not take
        raise InvalidParams(f"cannot use Redis URL {mask_password(url)}: {exc}") from exc
    return client


def output_dir(path: Path) -> Path:
    """``path`` as a folder that exists, or a usage error naming --out."""
    if path.exists() and not path.is_dir():
        raise InvalidParams(f"--out {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidParams(f"cannot create --out {path}: {exc.strerror}") from None
    return path


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT/SIGTERM (when running on the main thread)."""
    stop = threading.Event()
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("stop requested", extra={"signal": signal.Signals(signum).name})
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
