"""Invalid Unicode and deep nesting, at the parser (the server tests cover the wire)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.rpc import wellformed
from gateway.rpc.messages import Failure, Request, Success
from gateway.rpc.protocol import encode_reply, parse_frame

BAD_ID = '{"jsonrpc":"2.0","id":"\\ud800","method":"auth.whoami"}'
GOOD = '{"jsonrpc":"2.0","id":2,"method":"auth.whoami"}'


@pytest.mark.parametrize(
    "text",
    [
        BAD_ID,
        '{"jsonrpc":"2.0","id":1,"method":"auth.\\udfff"}',
        '{"jsonrpc":"2.0","id":1,"method":"auth.whoami","\\ud800":1}',
        '{"jsonrpc":"2.0","id":"\ud800","method":"auth.whoami"}',  # a raw surrogate in a str
    ],
)
def test_invalid_unicode_in_the_envelope_of_a_frame_is_a_parse_error(text: str) -> None:
    frame = parse_frame(text)
    assert frame.elements == (Failure(None, -32700, "Parse error"),)


def test_invalid_unicode_in_a_batch_element_costs_only_that_element() -> None:
    frame = parse_frame(f"[{BAD_ID},{GOOD}]")
    bad, good = frame.elements
    assert isinstance(bad, Failure) and (bad.id, bad.code) == (None, -32600)
    assert isinstance(good, Request) and good.id == 2
    with_id = parse_frame('[{"jsonrpc":"2.0","id":5,"method":"a\\ud800"}]').elements[0]
    assert isinstance(with_id, Failure) and (with_id.id, with_id.code) == (5, -32600)


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ('{"job":{"env_vars":{"X":"\\udfff"}}}', "job.env_vars.X"),
        ('{"job":{"env_vars":{"\\udfff":"x"}}}', "job.env_vars"),
        ('{"job":{"prerequisites":["a","\\ud800"]}}', "job.prerequisites.1"),
        ('["\\ud800"]', "0"),
    ],
)
def test_invalid_unicode_in_params_is_invalid_params_with_its_path(params: str, path: str) -> None:
    (element,) = parse_frame(f'{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}').elements
    assert isinstance(element, Failure)
    assert (element.id, element.code, element.data["path"]) == (1, -32602, path)
    json.loads(encode_reply(parse_frame(GOOD), [element]) or "")  # the answer itself encodes


def test_nesting_past_the_limit_is_invalid_params_and_a_pair_is_fine() -> None:
    deep = "[" * 950 + "]" * 950
    (element,) = parse_frame(
        f'{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"p":{deep}}}}}'
    ).elements
    assert isinstance(element, Failure) and element.code == -32602
    assert element.data["message"] == wellformed.TOO_DEEP
    ok = "[" * (wellformed.MAX_DEPTH - 1) + "]" * (wellformed.MAX_DEPTH - 1)
    (fine,) = parse_frame(f'{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"p":{ok}}}}}').elements
    assert isinstance(fine, Request)
    (pair,) = parse_frame(
        '{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\\ud83d\\ude00"}}'
    ).elements
    assert isinstance(pair, Request) and pair.params == {"a": "\U0001f600"}


def test_the_shortcuts_never_miss_what_the_walk_finds() -> None:
    assert not wellformed.may_hold_surrogates(GOOD) and not wellformed.may_be_deep(GOOD)
    assert wellformed.may_hold_surrogates(BAD_ID)
    assert wellformed.may_be_deep("[" * (wellformed.MAX_DEPTH + 1))


def _nested(depth: int, wide: int = 0) -> Any:
    """Containers ``depth`` deep, dicts and lists in turn, with ``wide``
    empty containers beside the deep branch at every level above the first
    (they never add to the depth)."""
    value: Any = "leaf"
    for level in range(depth):
        n = wide if level else 0
        value = [*[[]] * n, value] if level % 2 else {**{f"s{i}": {} for i in range(n)}, "v": value}
    return value


@pytest.mark.parametrize("wide", [0, 3])
def test_too_deep_draws_the_line_where_the_full_walk_does(wide: int) -> None:
    """The batch path checks depth with ``too_deep`` alone: it must refuse
    exactly what ``problem`` refuses for depth, at every limit."""
    for limit in (1, 2, 5, wellformed.MAX_DEPTH):
        for depth in range(limit + 3):
            value = _nested(depth, wide)
            by_walk = wellformed.problem(value, limit) is not None
            assert wellformed.too_deep(value, limit) == by_walk == (depth > limit), (limit, depth)
    assert wellformed.too_deep([[]], 0) and not wellformed.too_deep("x", 0)
    assert wellformed.too_deep(_nested(5000), wellformed.MAX_DEPTH)  # never recurses past the limit


def test_a_stored_lone_surrogate_still_goes_out_as_valid_utf8() -> None:
    """Jobs stored before the parser refused them may hold one (for their TTL)."""
    text = encode_reply(parse_frame(GOOD), [Success(2, {"env_vars": {"X": "\udfff"}})]) or ""
    text.encode("utf-8")  # no UnicodeEncodeError: the send cannot fail on it
    assert json.loads(text)["result"]["env_vars"]["X"] == "\udfff"
