"""The sans-I/O JSON-RPC 2.0 core: framing, batches, validation, error mapping.

Pure logic, no Redis and no sockets: a tiny handler table under real contract
method names (so params are validated against the real contract) goes through
``handle_frame`` exactly as the WebSocket and HTTP layers will call it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from typing import Any

import pytest

from gateway import errors
from gateway.rpc import codes, wellformed
from gateway.rpc.context import ANONYMOUS, CallContext
from gateway.rpc.dispatch import Dispatcher, Handler
from gateway.rpc.messages import Failure, Request
from gateway.rpc.protocol import (
    encode_notification,
    encode_reply,
    encode_response,
    handle_frame,
    parse_frame,
)

SECRET = "s3cr3t-/srv/hero/internal.py"
LIMIT = "#/components/contentDescriptors/Limit/schema"
CURSOR = "#/components/contentDescriptors/Cursor/schema"

#: What job.get does, by job_id.
_RAISES: dict[str, BaseException] = {
    "boom": RuntimeError(SECRET),
    "keyerror": KeyError(SECRET),
    "herobase": errors.HeroError(),
    "notfound": errors.JobNotFound("notfound"),
    "state": errors.InvalidState("Job already ended", {"job_id": "state", "status": "finished"}),
    "timeout": errors.WaitTimeout("timeout"),
    "unauth": errors.Unauthenticated(),
    "forbidden": errors.Forbidden(),
    "overloaded": errors.Overloaded(),
    "redis": errors.BackendUnavailable(),
    "badparam": errors.InvalidParams("limit too large"),
    "badjob": errors.InvalidJob("Invalid job", [{"field": "script_type", "message": "unknown"}]),
    "custom": codes.JsonRpcError(-32099, "Custom"),
}


class _Circular(dict[str, Any]):
    pass


def _circular() -> dict[str, Any]:
    d: dict[str, Any] = _Circular()
    d["self"] = d
    return d


_RETURNS: dict[str, Any] = {
    "set": {"ids": {1, 2}},
    "object": object(),
    "nan": {"x": float("nan")},
    "deep-infinity": {"a": "s", "b": [1, None, {"c": ({"d": [2.5, float("-inf")]},)}]},
    "circular": None,  # built per call
    "badid": {"id": "x", "status": "nonsense"},  # breaks the Job schema
}

calls: list[tuple[str, dict[str, Any]]] = []
both_running = asyncio.Event()


async def job_get(params: dict[str, Any], ctx: CallContext) -> Any:
    calls.append(("job.get", params))
    job_id = params["job_id"]
    if job_id in _RAISES:
        raise _RAISES[job_id]
    if job_id == "circular":
        return _circular()
    if job_id in _RETURNS:
        return _RETURNS[job_id]
    if job_id == "waiter":  # finishes only when "setter" ran: proves concurrency
        await asyncio.wait_for(both_running.wait(), 2)
    if job_id == "setter":
        both_running.set()
    return {"id": job_id, "script_type": "python", "status": "finished"}


async def job_create(params: dict[str, Any], ctx: CallContext) -> Any:
    calls.append(("job.create", params))
    return {"job_id": params["job"].get("job_id", "j1"), "status": "created"}


async def job_list(params: dict[str, Any], ctx: CallContext) -> Any:
    calls.append(("job.list", params))
    return {"jobs": [], "next_cursor": None, "seen": params}


async def whoami(params: dict[str, Any], ctx: CallContext) -> Any:
    calls.append(("auth.whoami", params))
    assert ctx.identity is not None
    return ctx.identity.as_dict()


TABLE: dict[str, Handler] = {
    "job.get": job_get,
    "job.create": job_create,
    "job.list": job_list,
    "auth.whoami": whoami,
}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    calls.clear()
    both_running.clear()


async def rpc(frame: str | bytes, *, check_results: bool = False) -> Any:
    """The decoded reply to a frame (None when nothing is sent)."""
    reply = await handle_frame(
        frame, Dispatcher(TABLE, check_results=check_results), CallContext(ANONYMOUS)
    )
    return None if reply is None else json.loads(reply)


def req(method: str, params: Any = None, id: Any = 1, **extra: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **extra}
    if params is not None:
        msg["params"] = params
    if id is not ...:
        msg["id"] = id
    return msg


def note(method: str, params: Any = None) -> dict[str, Any]:
    return req(method, params, id=...)


def error(code: int, id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code}, "id": id}


def assert_error(reply: Any, code: int, id: Any = None) -> dict[str, Any]:
    assert isinstance(reply, dict), reply
    assert set(reply) == {"jsonrpc", "error", "id"}
    assert reply["jsonrpc"] == "2.0"
    assert reply["error"]["code"] == code, reply
    assert reply["id"] == id and type(reply["id"]) is type(id)
    err: dict[str, Any] = reply["error"]
    return err


# -- parse errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        "{",
        "",
        "   ",
        '{"jsonrpc": "2.0", "method": "job.get", "params": {"job_id": "a"}, "id": 1',
        '[{"jsonrpc": "2.0", "method": "job.get", "id": "1"}, {"jsonrpc": "2.0", "method"]',
        "NaN",
        '{"jsonrpc": "2.0", "method": "job.list", "params": {"limit": Infinity}, "id": 1}',
        b"\xff\xfe{}",
        "[" * 100_000 + "]" * 100_000,
        "1" * 5000,  # beyond Python's int-from-text limit
        "{'single': 'quotes'}",
    ],
    ids=[
        "truncated",
        "empty",
        "blank",
        "unclosed",
        "batch-cut",
        "nan",
        "infinity",
        "bad-utf8",
        "deep",
        "huge-int",
        "single-quotes",
    ],
)
async def test_unparseable_text_is_one_parse_error(frame: str | bytes) -> None:
    err = assert_error(await rpc(frame), codes.PARSE_ERROR, None)
    assert err["message"] == "Parse error"
    assert calls == []


async def test_bytes_frames_are_utf8() -> None:
    frame = json.dumps(req("job.list", {"cursor": "caf\u00e9"}), ensure_ascii=False).encode()
    reply = await rpc(frame)
    assert reply["result"]["seen"] == {"cursor": "caf\u00e9"}


# -- invalid requests ------------------------------------------------------------------


async def test_empty_batch_is_one_invalid_request_not_an_array() -> None:
    err = assert_error(await rpc("[]"), codes.INVALID_REQUEST, None)
    assert err["message"] == "Invalid Request"


@pytest.mark.parametrize("frame", ["1", '"job.get"', "null", "true", "3.5"])
async def test_non_object_frame_is_invalid_request(frame: str) -> None:
    assert_error(await rpc(frame), codes.INVALID_REQUEST, None)


async def test_batch_of_non_objects_answers_each() -> None:
    reply = await rpc("[1, 2, 3]")
    assert isinstance(reply, list) and len(reply) == 3
    for item in reply:
        assert_error(item, codes.INVALID_REQUEST, None)


#: Request objects that are not valid Requests, with the id their -32600 echoes.
INVALID_OBJECTS: list[tuple[dict[str, Any], Any]] = [
    ({"method": "job.list", "id": 7}, 7),  # no jsonrpc
    ({"jsonrpc": "1.0", "method": "job.list", "id": 7}, 7),
    ({"jsonrpc": 2.0, "method": "job.list", "id": 7}, 7),
    ({"jsonrpc": "2.0", "id": "a"}, "a"),  # no method
    ({"jsonrpc": "2.0", "method": 1, "params": "bar"}, None),  # the spec's example
    ({"jsonrpc": "2.0", "method": None, "id": 7}, 7),
    ({"jsonrpc": "2.0", "method": "job.list", "params": "bar", "id": 7}, 7),
    ({"jsonrpc": "2.0", "method": "job.list", "params": 3, "id": 7}, 7),
    ({"jsonrpc": "2.0", "method": "job.list", "params": None, "id": 7}, 7),
    ({"jsonrpc": "2.0", "method": "job.list", "id": True}, None),
    ({"jsonrpc": "2.0", "method": "job.list", "id": {"a": 1}}, None),
    ({"jsonrpc": "2.0", "method": "job.list", "id": [1]}, None),
    ({"jsonrpc": "2.0", "method": "job.list", "id": 7, "extra": 1}, 7),
    ({"jsonrpc": "2.0", "method": "job.list", "params": "bar", "id": 2.5}, 2.5),
    ({"jsonrpc": "2.0", "method": "job.list", "params": None}, None),
]
INVALID_OBJECT_IDS = [
    "no-jsonrpc",
    "jsonrpc-1.0",
    "jsonrpc-number",
    "no-method",
    "spec-example",
    "method-null",
    "params-string",
    "params-number",
    "params-null",
    "id-bool",
    "id-object",
    "id-array",
    "extra-member",
    "float-id",
    "params-null-no-id",
]


@pytest.mark.parametrize(("message", "id"), INVALID_OBJECTS, ids=INVALID_OBJECT_IDS)
async def test_invalid_request_objects(message: dict[str, Any], id: Any) -> None:
    err = assert_error(await rpc(json.dumps(message)), codes.INVALID_REQUEST, id)
    assert isinstance(err["data"]["message"], str)
    assert calls == []


@pytest.mark.parametrize(("message", "id"), INVALID_OBJECTS, ids=INVALID_OBJECT_IDS)
async def test_an_invalid_object_in_a_long_plain_batch_is_answered_as_alone(
    message: dict[str, Any], id: Any
) -> None:
    """A long plain-ASCII batch takes the parser's depth-only path; an invalid
    element there gets the very answer it gets alone, in its place."""
    valid = {"jsonrpc": "2.0", "method": "job.list", "params": {}}
    frame = [*({**valid, "id": n} for n in range(40)), message]
    text = json.dumps(frame)
    assert text.isascii() and wellformed.may_be_deep(text)
    answers = await rpc(text)
    alone = await rpc(json.dumps(message))
    assert len(answers) == 41 and answers[-1] == alone
    assert [a["id"] for a in answers[:40]] == list(range(40))


async def test_huge_number_id_is_not_an_id() -> None:
    frame = '{"jsonrpc": "2.0", "method": "job.list", "id": 1e400}'
    assert_error(await rpc(frame), codes.INVALID_REQUEST, None)


# -- ids and notifications ---------------------------------------------------------------


@pytest.mark.parametrize(
    "id", ["abc", "", "\u00e9\u4e2d", 0, -5, 12345678901234567890123, 1.5, None]
)
async def test_id_is_echoed_exactly(id: Any) -> None:
    reply = await rpc(json.dumps(req("job.list", {}, id=id)))
    assert reply["id"] == id and type(reply["id"]) is type(id)
    assert "result" in reply


async def test_id_text_is_echoed_for_integers() -> None:
    frame = '{"jsonrpc": "2.0", "method": "job.list", "id": 12345678901234567890123}'
    reply = await handle_frame(frame, Dispatcher(TABLE), CallContext(ANONYMOUS))
    assert reply is not None and reply.endswith('"id":12345678901234567890123}')


async def test_notification_runs_but_gets_no_reply() -> None:
    assert await rpc(json.dumps(note("job.list", {"limit": 3}))) is None
    assert calls == [("job.list", {"limit": 3})]


@pytest.mark.parametrize(
    "message",
    [
        note("job.nothing"),
        note("job.list", {"limit": 0}),
        note("job.get", {"job_id": "boom"}),
        note("job.get", {"job_id": "object"}),
        note("job.list", [1]),
    ],
    ids=["unknown-method", "bad-params", "raises", "unserialisable", "positional"],
)
async def test_failed_notification_is_still_silent(message: dict[str, Any]) -> None:
    assert await rpc(json.dumps(message)) is None


async def test_batch_of_notifications_gets_nothing() -> None:
    frame = json.dumps([note("job.list"), note("job.get", {"job_id": "a"}), note("nope")])
    assert await rpc(frame) is None
    assert [c[0] for c in calls] == ["job.list", "job.get"]


async def test_null_id_is_a_request_not_a_notification() -> None:
    reply = await rpc(json.dumps(req("job.list", id=None)))
    assert reply["id"] is None and "result" in reply


# -- methods and params ------------------------------------------------------------------


async def test_unknown_method() -> None:
    reply = await rpc(json.dumps(req("job.teleport", id="x")))
    err = assert_error(reply, codes.METHOD_NOT_FOUND, "x")
    assert err["message"] == "Method not found"
    assert err["data"] == {"method": "job.teleport"}


async def test_success_shape() -> None:
    reply = await rpc(json.dumps(req("job.get", {"job_id": "a"}, id=3)))
    assert reply == {
        "jsonrpc": "2.0",
        "result": {"id": "a", "script_type": "python", "status": "finished"},
        "id": 3,
    }


@pytest.mark.parametrize("params", [None, [], {}], ids=["absent", "empty-array", "empty-object"])
async def test_no_params(params: Any) -> None:
    message = req("job.list", id=1)
    if params is not None:
        message["params"] = params
    reply = await rpc(json.dumps(message))
    assert reply["result"]["seen"] == {}


async def test_positional_params_are_refused() -> None:
    err = assert_error(await rpc(json.dumps(req("job.get", ["a"]))), codes.INVALID_PARAMS, 1)
    assert err["data"]["schema_path"] == "#/methods/5/paramStructure"
    assert calls == []


@pytest.mark.parametrize(
    ("method", "params", "path", "schema_path"),
    [
        (
            "job.create",
            {"job": {"script": "x", "script_type": "python", "priority": 9}},
            "job.priority",
            "#/components/schemas/JobSpec/properties/priority/maximum",
        ),
        (
            "job.create",
            {"job": {"script": "x", "script_type": "python", "prerequisites": ["ok", "no!"]}},
            "job.prerequisites.1",
            "#/components/schemas/Ident/pattern",
        ),
        (
            "job.create",
            {"job": {"script": "x", "script_type": "python", "instance": "i1"}},
            "job",
            "#/components/schemas/JobSpec/dependentRequired",
        ),
        (
            "job.create",
            {"job": {"script": "x", "script_type": "python", "colour": "red"}},
            "job",
            "#/components/schemas/JobSpec/additionalProperties",
        ),
        (
            "job.create",
            {"job": {"script_type": "python"}},
            "job",
            "#/components/schemas/JobSpec/required",
        ),
        ("job.create", {}, "job", "#/components/contentDescriptors/JobSpec/required"),
        ("job.get", {"job_id": "a", "wait": 1}, "wait", "#/methods/5/params"),
        ("job.get", {"job_id": 5}, "job_id", "#/components/schemas/Ident/type"),
        ("job.list", {"limit": 501}, "limit", f"{LIMIT}/maximum"),
        ("job.list", {"limit": 2.5}, "limit", f"{LIMIT}/type"),
        ("job.list", {"status": "sleeping"}, "status", "#/components/schemas/Status/enum"),
        ("job.list", {"cursor": ""}, "cursor", f"{CURSOR}/minLength"),
    ],
    ids=[
        "nested-max",
        "array-item-pattern",
        "dependent",
        "unknown-field",
        "missing-field",
        "missing-param",
        "unknown-param",
        "type",
        "limit-max",
        "limit-int",
        "enum",
        "cursor-empty",
    ],
)
async def test_invalid_params_name_the_path_and_the_rule(
    method: str, params: dict[str, Any], path: str, schema_path: str
) -> None:
    reply = await rpc(json.dumps(req(method, params, id="p")))
    err = assert_error(reply, codes.INVALID_PARAMS, "p")
    data = err["data"]
    assert (data["path"], data["schema_path"]) == (path, schema_path), data
    assert isinstance(data["message"], str) and data["message"]
    assert data["errors"][0] == {k: data[k] for k in ("path", "schema_path", "message")}
    assert err["message"].startswith("Invalid params")
    assert calls == []


async def test_every_failure_is_listed() -> None:
    params = {"job": {"script": 1, "script_type": "python", "priority": 9, "retries": -1}}
    err = assert_error(await rpc(json.dumps(req("job.create", params))), codes.INVALID_PARAMS, 1)
    paths = sorted(e["path"] for e in err["data"]["errors"])
    assert paths == ["job.priority", "job.retries", "job.script"]


async def test_invalid_params_never_quote_the_value() -> None:
    params = {
        "job": {
            "script": "x",
            "script_type": "python",
            "env_vars": {"TOKEN": {"nested": SECRET}},
            "group": SECRET,
        }
    }
    reply = await handle_frame(
        json.dumps(req("job.create", params)), Dispatcher(TABLE), CallContext(ANONYMOUS)
    )
    assert reply is not None and "-32602" in reply
    assert SECRET not in reply


async def test_valid_params_reach_the_handler_unchanged() -> None:
    job = {"script": "x", "script_type": "python", "job_id": "j9", "env_vars": {"A": "1"}}
    reply = await rpc(json.dumps(req("job.create", {"job": job})))
    assert reply["result"] == {"job_id": "j9", "status": "created"}
    assert calls == [("job.create", {"job": job})]


# -- errors raised by handlers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_id", "code", "data"),
    [
        ("notfound", -32001, {"job_id": "notfound"}),
        ("state", -32002, {"job_id": "state", "status": "finished"}),
        ("timeout", -32003, {"job_id": "timeout"}),
        ("unauth", -32004, None),
        ("forbidden", -32005, None),
        ("overloaded", -32006, None),
        ("redis", -32007, None),
        ("badparam", -32602, None),
        ("badjob", -32602, [{"field": "script_type", "message": "unknown"}]),
        ("herobase", -32603, None),
        ("custom", -32099, None),
    ],
)
async def test_hero_errors_answer_their_code(job_id: str, code: int, data: Any) -> None:
    err = assert_error(
        await rpc(json.dumps(req("job.get", {"job_id": job_id}, id=job_id))), code, job_id
    )
    raised = _RAISES[job_id]
    if isinstance(raised, errors.HeroError):
        assert code == type(raised).code
        assert err["message"] == raised.message
    assert err.get("data") == data


@pytest.mark.parametrize("job_id", ["boom", "keyerror"])
async def test_internal_errors_leak_nothing(job_id: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "gateway.rpc")
    frame = json.dumps(req("job.get", {"job_id": job_id}, id=1))
    text = await handle_frame(frame, Dispatcher(TABLE), CallContext(ANONYMOUS))
    assert text is not None
    assert json.loads(text) == {
        "jsonrpc": "2.0",
        "error": {"code": -32603, "message": "Internal error"},
        "id": 1,
    }
    assert SECRET not in text
    assert any(r.exc_info for r in caplog.records), "the traceback goes to the log instead"


@pytest.mark.parametrize("job_id", ["set", "object", "nan", "deep-infinity", "circular"])
async def test_unserialisable_result_is_an_internal_error(job_id: str) -> None:
    assert_error(await rpc(json.dumps(req("job.get", {"job_id": job_id}, id=2))), -32603, 2)


async def test_unserialisable_error_data_keeps_the_code() -> None:
    bad = Failure("x", -32005, "Forbidden", {"what": object()})
    assert json.loads(encode_response(bad)) == {
        "jsonrpc": "2.0",
        "error": {"code": -32005, "message": "Forbidden"},
        "id": "x",
    }


async def test_results_checked_against_the_contract_when_asked() -> None:
    frame = json.dumps(req("job.get", {"job_id": "badid"}))
    assert (await rpc(frame))["result"]["status"] == "nonsense"
    assert_error(await rpc(frame, check_results=True), -32603, 1)
    ok = await rpc(json.dumps(req("job.get", {"job_id": "fine"})), check_results=True)
    assert ok["result"]["status"] == "finished"


# -- batches -------------------------------------------------------------------------------


async def test_mixed_batch_answers_every_element_on_its_own() -> None:
    frame = json.dumps(
        [
            req("job.get", {"job_id": "a"}, id=1),
            {"jsonrpc": "2.0", "method": 5, "id": 2},  # invalid request
            note("job.list", {"limit": 2}),  # notification: no answer
            req("job.teleport", id=3),  # unknown method
            req("job.list", {"limit": 0}, id=4),  # bad params
            req("job.get", {"job_id": "boom"}, id=5),  # internal error
            req("job.get", {"job_id": "object"}, id=6),  # unserialisable result
            7,  # not an object
            req("job.get", {"job_id": "notfound"}, id="s"),  # server code
            req("auth.whoami", id=None),
        ]
    )
    reply = await rpc(frame)
    assert isinstance(reply, list)
    assert [r["id"] for r in reply] == [1, 2, 3, 4, 5, 6, None, "s", None]
    assert reply[0]["result"]["id"] == "a"
    assert [r.get("error", {}).get("code") for r in reply] == [
        None,
        -32600,
        -32601,
        -32602,
        -32603,
        -32603,
        -32600,
        -32001,
        None,
    ]
    assert reply[-1]["result"] == {"name": "anonymous", "scope": "anonymous", "caller_id": None}
    assert ("job.list", {"limit": 2}) in calls


async def test_batch_with_one_request_is_still_an_array() -> None:
    reply = await rpc(json.dumps([req("job.list", id=1)]))
    assert isinstance(reply, list) and len(reply) == 1


async def test_batch_elements_run_concurrently() -> None:
    """'waiter' blocks until 'setter' ran: a sequential batch would time out."""
    frame = json.dumps(
        [req("job.get", {"job_id": "waiter"}, id=1), req("job.get", {"job_id": "setter"}, id=2)]
    )
    reply = await asyncio.wait_for(rpc(frame), 5)
    assert [r["result"]["id"] for r in reply] == ["waiter", "setter"]


# -- the three steps, for transports --------------------------------------------------------------


async def test_parse_dispatch_encode_split() -> None:
    frame = parse_frame(json.dumps([req("job.list", id=1), note("job.list"), 3]))
    assert frame.batch and len(frame.elements) == 3
    assert isinstance(frame.elements[0], Request) and not frame.elements[0].notification
    assert isinstance(frame.elements[1], Request) and frame.elements[1].notification
    assert isinstance(frame.elements[2], Failure)
    dispatcher = Dispatcher(TABLE)
    ctx = CallContext(ANONYMOUS)
    responses = [await dispatcher.dispatch(e, ctx) for e in frame.elements]
    assert responses[1] is None
    text = encode_reply(frame, responses)
    assert text is not None and len(json.loads(text)) == 2
    assert encode_reply(frame, [None, None]) is None


def test_a_batch_longer_than_the_cap_is_one_invalid_request() -> None:
    assert len(parse_frame("[" + ",".join(["1"] * 5) + "]", max_batch=5).elements) == 5
    frame = parse_frame("[" + ",".join(["1"] * 6) + "]", max_batch=5)
    assert not frame.batch and frame.elements == (
        Failure(
            None,
            codes.INVALID_REQUEST,
            "Invalid Request",
            {"message": "a batch may hold at most 5 elements", "limit": 5},
        ),
    )


def test_single_frames_are_not_batches() -> None:
    assert not parse_frame("{}").batch
    assert not parse_frame("[]").batch
    assert not parse_frame("{").batch


def test_notification_encoding() -> None:
    text = encode_notification("job.event", {"subscription": "s1", "event": {"id": "1-0"}})
    assert json.loads(text) == {
        "jsonrpc": "2.0",
        "method": "job.event",
        "params": {"subscription": "s1", "event": {"id": "1-0"}},
    }
    assert "id" not in json.loads(text)


# -- layering -------------------------------------------------------------------------------------


def test_rpc_layer_never_imports_redis_or_the_supervisor() -> None:
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "import gateway.rpc.protocol, gateway.rpc.methods, gateway.rpc.dispatch\n"
        "bad = sorted(m for m in sys.modules if m == 'redis' or m.startswith(('redis.', "
        "'gateway.supervisor')))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
