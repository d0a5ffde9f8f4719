"""Structured logs: fields passed with extra= survive in both formats."""

from __future__ import annotations

import json
import logging
import sys

from redis.exceptions import AuthenticationError
from websockets.frames import Frame, Opcode

from gateway.logs import (
    MASK,
    JsonFormatter,
    NoFrames,
    Redact,
    TextFormatter,
    redact,
    redis_failure,
)
from gateway.supervisor.connection import RedisRefused


def record() -> logging.LogRecord:
    rec = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "job done", None, None)
    rec.job_id = "j-1"
    return rec


def test_json_lines_carry_fields_as_keys() -> None:
    entry = json.loads(JsonFormatter().format(record()))
    assert entry["msg"] == "job done" and entry["job_id"] == "j-1" and entry["level"] == "info"


def test_text_lines_carry_fields_too() -> None:
    assert TextFormatter("%(message)s").format(record()) == "job done job_id=j-1"


def test_credentials_are_masked_in_messages_fields_and_tracebacks() -> None:
    key = "hgk_" + "A1b2-C3_d4" * 4
    rec = logging.LogRecord(
        "uvicorn.error",
        logging.DEBUG,
        __file__,
        1,
        "< %s: %s",
        ("Authorization", f"Bearer {key}"),
        None,
    )
    rec.header = f"authorization: Bearer {key}"
    try:
        raise ValueError(f"bad key {key}")
    except ValueError:
        rec.exc_info = sys.exc_info()
    assert Redact().filter(rec)
    line = JsonFormatter().format(rec)
    assert key not in line and key[4:] not in line
    entry = json.loads(line)
    assert entry["msg"] == f"< Authorization: {MASK}"
    assert MASK in entry["header"] and MASK in entry["exc"]


def test_lines_without_credentials_are_untouched() -> None:
    assert redact("authorized job j-1 in 3 ms") == "authorized job j-1 in 3 ms"


def test_header_pairs_and_url_passwords_are_masked_too() -> None:
    pairs = "[(b'authorization', b'Bearer hgk_q'), (b'host', b'x')]"
    assert redact(pairs) == f"[(b'authorization', b'{MASK}'), (b'host', b'x')]"
    assert redact("redis://:s3cret@127.0.0.1:6379/0") == f"redis://:{MASK}@127.0.0.1:6379/0"
    assert redact('{"Authorization": "Basic dXNlcjpw"}') == f'{{"Authorization": "{MASK}"}}'


def test_cookies_are_masked() -> None:
    """A browser sends the page every cookie of localhost, other programs' sessions too."""
    assert redact("< Cookie: sid=s3cret; theme=dark") == f"< Cookie: {MASK}"
    assert redact("[(b'cookie', b'sid=s3cret'), (b'host', b'x')]") == (
        f"[(b'cookie', b'{MASK}'), (b'host', b'x')]"
    )
    assert redact("> Set-Cookie: sid=s3cret; HttpOnly") == f"> Set-Cookie: {MASK}"
    assert redact("cookies are fine: 3 jobs") == "cookies are fine: 3 jobs"


def test_a_quoted_authorization_value_is_masked_whole() -> None:
    """Digest (and other schemes) quote parts of the value: a header line is
    masked to its end, a quoted value to its closing quote, not its first."""
    digest = 'Digest username="u", response="DIGESTSECRET1"'
    assert redact(f"< authorization: {digest}") == f"< authorization: {MASK}"
    pair = f"[(b'authorization', b'{digest}'), (b'host', b'x')]"
    assert redact(pair) == f"[(b'authorization', b'{MASK}'), (b'host', b'x')]"
    both = "(b'authorization', b'it\\'s \"q\" S3CRET'), (b'host', b'x')"  # repr escapes '
    assert redact(both) == f"(b'authorization', b'{MASK}'), (b'host', b'x')"


def test_every_credential_header_is_masked_in_both_forms() -> None:
    """Keys and tokens travel under headers of their own, without our prefix;
    some WebSocket clients carry one in the subprotocol."""
    for name in (
        "X-Api-Key",
        "api-key",
        "X-Auth-Token",
        "X-Csrf-Token",
        "X-Client-Secret",
        "X-Password",
        "Proxy-Authorization",
        "Sec-WebSocket-Protocol",
    ):
        assert redact(f"< {name}: RAWSECRET1") == f"< {name}: {MASK}", name
        pair = f"[(b'{name.lower()}', b'RAWSECRET1'), (b'host', b'x')]"
        assert redact(pair) == f"[(b'{name.lower()}', b'{MASK}'), (b'host', b'x')]", name
        assert redact(f'{{"{name}": "RAWSECRET1"}}') == f'{{"{name}": "{MASK}"}}', name


def test_credentials_in_query_strings_are_masked() -> None:
    """uvicorn logs every request's path with its query at info level; only
    the values of parameters whose names say credential go."""
    line = '127.0.0.1:4 - "WebSocket /ws?access_token=QS1&key=QS2&job_id=j-1" [accepted]'
    assert (
        redact(line)
        == f'127.0.0.1:4 - "WebSocket /ws?access_token={MASK}&key={MASK}&job_id=j-1" [accepted]'
    )
    for name in ("token", "api_key", "apikey", "password", "passwd", "secret", "auth", "signature"):
        assert (
            redact(f"POST /x?page=2&{name}=QS3 HTTP/1.1")
            == f"POST /x?page=2&{name}={MASK} HTTP/1.1"
        )
    url = "redis://127.0.0.1:7451/0?username=tester&password=PW1"
    assert redact(url) == f"redis://127.0.0.1:7451/0?username=tester&password={MASK}"
    assert redact("redis://u:p@ss@h:1/0") == f"redis://u:{MASK}@h:1/0"  # urlsplit's password


def test_ordinary_words_and_headers_stay() -> None:
    for line in (
        "key k-1 created for job j-1",
        "< sec-websocket-key: dGhlIHNhbXBsZQ==",
        "< host: 127.0.0.1:8080",
        "the token bucket is full: 3 jobs wait",
        "Redis refused user 'u': WRONGPASS invalid username-password pair",
        '"GET /jobs?author=me&job_id=j-1&page=2 HTTP/1.1" 200',
        "redis://h:6379/0 and redis://u@h:6379",
    ):
        assert redact(line) == line


def test_records_carrying_a_websocket_frame_are_dropped_whatever_their_level() -> None:
    """As websockets logs a frame: its text cut to head and tail, so the end of
    a key shows without the prefix a pattern could find it by."""
    frame = Frame(Opcode.TEXT, b'{"method":"auth.login","params":{"key":"hgk_' + b"k" * 43 + b'"}}')
    for level in (logging.DEBUG, logging.ERROR):
        rec = logging.LogRecord("uvicorn.error", level, __file__, 1, "< %s", (frame,), None)
        assert not NoFrames().filter(rec)
    state = logging.LogRecord("uvicorn.error", logging.DEBUG, __file__, 1, "= %s", ("OPEN",), None)
    assert NoFrames().filter(state)


def test_a_refusal_names_the_user_of_the_query_string() -> None:
    """As redis-py reads it: the user before the @ first, else ``username=``."""
    refusal = RedisRefused(AuthenticationError("WRONGPASS invalid username-password pair"))
    url = "redis://127.0.0.1:7451/0?username=tester&password=PW1"
    said = redis_failure(refusal, url)
    assert said.startswith("Redis refused user 'tester' at ") and "PW1" not in said
    assert "user 'ops'" in redis_failure(refusal, "redis://ops:PW1@h:1/0?username=tester")
    assert "user 'default'" in redis_failure(refusal, "redis://:PW1@h:1/0")
