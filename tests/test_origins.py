"""Which browser pages a key-less gateway serves (rpc/origins.py), and the setting."""

from __future__ import annotations

import pytest

from gateway.config.process import normalise_origin, parse_origins
from gateway.rpc.origins import may_use_keyless

NONE: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        (None, "127.0.0.1:8080", "http"),  # not a browser: curl, the generated clients
        (None, None, "ws"),
        ("http://127.0.0.1:8080", "127.0.0.1:8080", "http"),  # the console page
        ("http://127.0.0.1:8080", "127.0.0.1:8080", "ws"),  # its WebSocket
        ("HTTP://LocalHost:8080", "localhost:8080", "ws"),
        ("http://[::1]:8080", "[::1]:8080", "http"),
        ("http://127.0.0.2:9", "127.0.0.2:9", "http"),
        ("https://localhost:8443", "localhost:8443", "wss"),
    ],
)
def test_programs_and_the_gateways_own_loopback_page_may(
    origin: str | None, host: str | None, scheme: str
) -> None:
    assert may_use_keyless(origin, host, scheme, NONE)


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://evil.example", "127.0.0.1:8080", "http"),  # a page posting cross-site
        ("http://evil.example", "127.0.0.1:8080", "ws"),
        ("http://evil.example:8080", "evil.example:8080", "http"),  # DNS rebinding
        ("http://10.0.0.5:8080", "10.0.0.5:8080", "ws"),  # own origin, not loopback
        ("http://localhost:3000", "localhost:8080", "ws"),  # another loopback port
        ("https://127.0.0.1:8080", "127.0.0.1:8080", "ws"),  # another scheme
        ("null", "127.0.0.1:8080", "ws"),  # a sandboxed frame, a file:// page
        ("http://127.0.0.1:8080", None, "http"),
        ("http://127.0.0.1:8080/page", "127.0.0.1:8080", "http"),
    ],
)
def test_other_pages_may_not(origin: str, host: str | None, scheme: str) -> None:
    assert not may_use_keyless(origin, host, scheme, NONE)


def test_a_listed_origin_may_from_anywhere() -> None:
    allowed = frozenset(parse_origins(" http://Dev.Example:3000 , https://ops.example "))
    assert allowed == {"http://dev.example:3000", "https://ops.example"}
    assert may_use_keyless("http://dev.example:3000", "127.0.0.1:8080", "ws", allowed)
    assert may_use_keyless("https://OPS.example", "gateway:8080", "http", allowed)
    assert not may_use_keyless("http://dev.example:3001", "127.0.0.1:8080", "ws", allowed)


@pytest.mark.parametrize(
    "text",
    ["null", "dev.example", "ftp://dev.example", "http://x/path", "http://u@x", "http://x:99999"],
)
def test_the_setting_refuses_what_is_not_an_origin(text: str) -> None:
    assert normalise_origin(text) is None
    with pytest.raises(ValueError, match="not an origin"):
        parse_origins(f"http://fine.example,{text}")


def test_an_empty_setting_lists_none() -> None:
    assert parse_origins("") == () and parse_origins(" , ") == ()
