"""Structured logging: one JSON object per line (or plain text for humans).

Fields passed with ``extra=`` (job_id, actor, ...) become top-level keys, so
a log pipeline can filter by job id without parsing messages.

``redis_failure`` says, in one line, why Redis failed a command: refused (and
what to change) or unreachable; commands print it, actors log it.

No credential reaches a log line, at any level: the handler ``setup``
installs carries ``Redact``, which masks API keys and the values of
credential headers (Authorization, cookies, X-Api-Key, ``*-Token``, ...) in
every record it writes, whoever logged it. That matters at debug
level, where uvicorn's and websockets' own loggers print every upgrade's
request headers, ``Authorization: Bearer hgk_…`` included. Frames are kept
out whole (``NoFrames``): what they carry cannot be masked by pattern.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError
from websockets.frames import Frame as WebSocketFrame

from gateway.config import URL_SECRETS, mask_password
from gateway.supervisor.auth import KEY_PREFIX
from gateway.supervisor.connection import RedisRefused, user_of

#: Record attributes that are not structured fields (uvicorn adds color_message, with ANSI codes).
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}


MASK = "[redacted]"

#: Names of headers whose values are credentials: Authorization and Cookie (a
#: browser sends every localhost cookie, other programs' too), API keys and
#: tokens under names of their own (``X-Api-Key``, ``X-Auth-Token``), and
#: Sec-WebSocket-Protocol, where some WebSocket clients carry a token because
#: a browser cannot set Authorization on an upgrade.
_CREDENTIAL_HEADERS = (
    r"(?:proxy-)?authorization|(?:set-)?cookie|(?:x-)?api-key|sec-websocket-protocol"
    r"|[\w-]*-(?:token|secret)|[\w-]*password[\w-]*"
)

#: Credentials as they appear in log lines; group 1 is what stays before the mask.
_SECRETS = (
    re.compile(rf"(){re.escape(KEY_PREFIX)}[A-Za-z0-9_\-]+"),  # an API key, anywhere
    re.compile(r"(?i)(\bbearer\s+)[^\s'\"]+"),  # a bearer token
    *URL_SECRETS,  # a URL's password, credentials in a query string
    # a credential header's value quoted after its quoted name, as a ("name",
    # "value") pair or a JSON or dict entry: up to its closing quote, which a
    # quote inside the value (Digest's response="...") does not end
    re.compile(
        rf"(?i)((?<![\w-])b?(?P<nq>['\"])(?:{_CREDENTIAL_HEADERS})(?P=nq)[ \t]*[:=,][ \t]*"
        r"b?(?P<vq>['\"]))(?:\\.|(?!(?P=vq))[^\\\r\n])*"
    ),
    # a header line, "name: value": the value is the rest of the line, quotes
    # and commas included (not after ? or &: a query parameter is a URL's)
    re.compile(rf"(?i)((?<![\w?&-])(?:{_CREDENTIAL_HEADERS})[ \t]*[:=][ \t]*)[^\r\n]+"),
)


def redact(text: str) -> str:
    """``text`` with every credential in it masked."""
    for pattern in _SECRETS:
        text = pattern.sub(rf"\g<1>{MASK}", text)
    return text


class NoFrames(logging.Filter):
    """Drops every record that carries a WebSocket frame.

    The websockets library's sans-I/O protocol, which uvicorn's
    ``websockets-sansio`` implementation drives (logging as ``uvicorn.error``),
    logs each frame sent or received at debug level: ``< TEXT '…'``. Frames
    carry API keys (``auth.login``) and env_vars (``job.create``, ``job.get``),
    and the library cuts a long frame to its head and tail, so a key may
    appear without the ``hgk_`` prefix ``Redact`` finds it by. Told apart by
    the record's argument (a ``websockets.frames.Frame``), not by its text, so
    the connection's own records stay: the upgrade and its headers (masked),
    the state changes, EOF."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(arg, WebSocketFrame) for arg in args)


class Redact(logging.Filter):
    """Masks credentials in a record's message, its string fields and its
    traceback text, before any formatter sees them (a handler filter, so it
    covers records propagated from every library's logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        for key, value in vars(record).items():
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, redact(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_text:  # formatted (and redacted) by ``Redact``
            entry["exc"] = record.exc_text
        elif record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """Human-readable lines that still carry the structured fields (job_id=…)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(
            f"{k}={v}"
            for k, v in vars(record).items()
            if k not in _STANDARD and not k.startswith("_")
        )
        line = super().format(record)
        return f"{line} {fields}" if fields else line


def setup(level: str = "info", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(NoFrames())  # first: a frame's text is never even formatted
    handler.addFilter(Redact())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def redis_failure(exc: BaseException, url: str) -> str:
    """Why the Redis at ``url`` failed, in one line for an operator: it refused
    (a wrong user or password, no such database, a user without permission)
    or it is unreachable. Telling them apart matters: waiting fixes only the
    last. redis-py raises a wrong password as a ConnectionError, and the
    supervisor's boundary re-raises redis-py's errors as BackendUnavailable, so
    the chain (``__cause__``, else ``__context__``) is read, not just ``exc``."""
    shown = mask_password(url)
    try:
        user = user_of(url)
    except ValueError:
        user = "?"
    for error in _chain(exc):
        reply = error.reply if isinstance(error, RedisRefused) else error
        if isinstance(reply, AuthenticationError):
            return (
                f"Redis refused user {user!r} at {shown}: {reply} (fix the user or password "
                "of --redis-url or HERO_REDIS_URL)"
            )
        if isinstance(reply, NoPermissionError):
            return (
                f"Redis refused user {user!r} at {shown}: {reply} (connect as a user allowed "
                "to; `hero-gateway acl` shows what each user may do)"
            )
        if "DB index" in str(reply):  # SELECT of a database the server does not have
            db = urlsplit(url).path.lstrip("/")
            return (
                f"Redis refused database {db} at {shown}: {reply} (choose one it has at the "
                "end of --redis-url)"
            )
    if isinstance(exc, ResponseError):
        return f"Redis at {shown} answered an error: {exc}"
    return f"Redis unreachable at {shown}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or during, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
