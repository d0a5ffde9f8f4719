"""The sans-I/O JSON-RPC 2.0 core: text in, elements out, answers back to text.

Three steps, so a transport can put its own concurrency in between:

    frame = parse_frame(text)                      # never raises
    responses = await dispatcher.dispatch_many(frame.elements, ctx)
    reply = encode_reply(frame, responses)         # str, or None: send nothing

``handle_frame`` does all three, answering a batch's elements concurrently.

Why the frame is not handed to jsonrpcserver whole: it rejects a whole batch
for one bad element and fails a batch on one unserialisable result. Here each
element is parsed on its own; ``Dispatcher`` hands each valid Request on its
own to jsonrpcserver, which routes it (see ``jsonrpc``); a batch reply is
encoded whole, and element by element only when that fails.

Conformance notes (JSON-RPC 2.0):
- unparseable text (including invalid UTF-8, NaN/Infinity, nesting deeper
  than the parser handles) → one -32700 with id null;
- ``[]`` → one -32600 (not an array); a non-object batch element → -32600;
- a batch of more than ``max_batch`` elements → one -32600 (not an array)
  naming the limit: answered element by element, two bytes of ``1,`` would
  cost a 129-byte answer each, so a 1 MB frame became a 67 MB reply;
- a Request with a wrong ``jsonrpc``, ``method``, ``params`` or ``id`` type, or
  with members the spec does not define, → -32600, echoing its id when the id
  itself is valid, null otherwise;
- a notification (no ``id`` member) is run but never answered, even on error;
  a batch of only notifications gets no reply at all;
- the id is echoed as parsed (numbers keep their JSON value; a number too big
  for a float is not a usable id and is refused);
- invalid Unicode (a lone surrogate from a ``\\ud800`` escape) is refused where
  it appears (see ``wellformed``): in the id, method or a member name, a frame
  that is not a batch is a -32700 and a batch element a -32600 (the others are
  answered); in params, or params nested too deep, it is a -32602 naming the path.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from typing import Any

import orjson

from gateway.config import DEFAULTS
from gateway.rpc import codes, wellformed
from gateway.rpc.context import CallContext
from gateway.rpc.dispatch import Dispatcher
from gateway.rpc.messages import Element, Failure, Frame, Request, RequestId, Response, Success

log = logging.getLogger("gateway.rpc")

_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})
#: What ``params`` may be, as a tuple (``isinstance`` takes it faster than ``dict | list``).
_PARAMS = (dict, list)

#: Most elements of a batch, where the transport does not say: HERO_MAX_BATCH's default.
MAX_BATCH = DEFAULTS.max_batch


def parse_frame(data: str | bytes, max_batch: int = MAX_BATCH) -> Frame:
    """A frame's elements; a parse error, ``[]`` or a batch longer than
    ``max_batch`` is one pre-answered element."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        value = _DECODE(text)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, int limits
        return Frame((Failure(None, codes.PARSE_ERROR, codes.PARSE_ERROR_MESSAGE),), batch=False)
    if isinstance(value, list) and len(value) > max_batch:
        why = f"a batch may hold at most {max_batch} elements"
        detail = {"message": why, "limit": max_batch}
        too_long = Failure(None, codes.INVALID_REQUEST, codes.INVALID_REQUEST_MESSAGE, detail)
        return Frame((too_long,), batch=False)
    unicode = wellformed.may_hold_surrogates(text)
    check = unicode or wellformed.may_be_deep(text)
    if isinstance(value, list):
        if not value:
            return Frame((_invalid(None, "an empty batch is not a request"),), batch=False)
        elements = tuple(parse_element(item, check=check, unicode=unicode) for item in value)
        return Frame(elements, batch=True)
    if unicode and isinstance(value, dict) and not _valid_envelope(value):
        return Frame((Failure(None, codes.PARSE_ERROR, codes.PARSE_ERROR_MESSAGE),), batch=False)
    return Frame((parse_element(value, check=check, unicode=unicode),), batch=False)


def parse_element(value: Any, *, check: bool = True, unicode: bool = True) -> Element:
    """One Request object, checked; what is wrong with it becomes its answer.
    ``check`` False skips the Unicode and depth walk (the text had nothing it
    could find); ``unicode`` False leaves only the depth rule to check (the
    text has no escape and no non-ASCII character)."""
    if not isinstance(value, dict):
        return _invalid(None, "a request must be an object")
    if check and unicode and not _valid_envelope(value):
        echo = value.get("id") if _is_id(value.get("id")) else None
        return _invalid(echo, "the request holds invalid Unicode (a lone surrogate)")
    has_id = "id" in value
    reply_id: RequestId = value["id"] if has_id else None
    id_ok = not has_id or _is_id(reply_id)
    if not id_ok:
        reply_id = None
    if value.get("jsonrpc") != "2.0":
        return _invalid(reply_id, 'jsonrpc must be "2.0"')
    method = value.get("method")
    if not isinstance(method, str):
        return _invalid(reply_id, "method must be a string")
    params = value.get("params")
    if not isinstance(params, _PARAMS) and (params is not None or "params" in value):
        return _invalid(reply_id, "params must be an object or an array")
    if not id_ok:
        return _invalid(None, "id must be a string, a number or null")
    if not value.keys() <= _MEMBERS:
        extra = sorted(str(k) for k in value.keys() - _MEMBERS)
        return _invalid(reply_id, "unexpected members: " + ", ".join(extra[:10]))
    found = None
    if check and (unicode or wellformed.too_deep(params)):
        found = wellformed.problem(params)
    if found is not None:
        path, why = found
        where = f"{path} " if path else ""
        message = f"Invalid params: {where}{why}"
        return Failure(reply_id, codes.INVALID_PARAMS, message, {"path": path, "message": why})
    return Request(method, params, reply_id, not has_id)  # positional: half the time


async def handle_frame(data: str | bytes, dispatcher: Dispatcher, ctx: CallContext) -> str | None:
    """Parse, answer and encode one frame. None means: send nothing."""
    frame = parse_frame(data)
    return encode_reply(frame, await dispatcher.dispatch_many(frame.elements, ctx))


def encode_reply(frame: Frame, responses: Iterable[Response | None]) -> str | None:
    """The text to send for a frame's answers (None entries are notifications)."""
    answered = [r for r in responses if r is not None]
    if not answered:
        return None
    if not frame.batch:
        return encode_response(answered[0])
    batch = [_wire(r) for r in answered]
    text = _fast(batch)
    if text is not None:
        return text
    try:  # the whole batch in one encoder call; per element only when that fails
        text = _ENCODE(batch)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is None or not wellformed.valid_text(text):
        text = "[" + ",".join(encode_response(r) for r in answered) + "]"
    return text


def encode_response(response: Response) -> str:
    """One Response object as JSON. A result (or error data) that is not
    serialisable makes this element a -32603; the batch around it is untouched."""
    wire = _wire(response)
    text = _fast(wire)
    if text is not None:
        return text
    try:
        return _dumps(wire)
    except (TypeError, ValueError, RecursionError):
        log.error("rpc response not serialisable", extra={"response_type": type(response).__name__})
    if isinstance(response, Failure) and response.data is not None:
        return encode_response(Failure(response.id, response.code, response.message))
    return _dumps(_wire(Failure(response.id, codes.INTERNAL_ERROR, codes.INTERNAL_ERROR_MESSAGE)))


def encode_notification(method: str, params: dict[str, Any]) -> str:
    """A server-to-client notification (e.g. ``job.event``)."""
    return _dumps({"jsonrpc": "2.0", "method": method, "params": params})


def _wire(response: Response) -> dict[str, Any]:
    if isinstance(response, Success):
        return {"jsonrpc": "2.0", "result": response.result, "id": response.id}
    error: dict[str, Any] = {"code": response.code, "message": response.message}
    if response.data is not None:
        error["data"] = response.data
    return {"jsonrpc": "2.0", "error": error, "id": response.id}


def _dumps(value: Any) -> str:
    """Compact JSON that always encodes as UTF-8. Nothing invalid gets in any
    more, but a value stored before that rule (a job's env_vars with a lone
    surrogate, kept for its TTL) must still go out: escaped, not as a send that
    fails and leaves the client waiting."""
    text = _ENCODE(value)
    if wellformed.valid_text(text):
        return text
    return _ENCODE_ASCII(value)


def _fast(value: Any) -> str | None:
    """``value`` as orjson encodes it (about a tenth of the standard encoder's
    time: 5 against 68 µs for a batch reply of 32 ``job.start`` results), or
    None where its text could differ from what the standard encoder does with
    it; the caller then encodes with that. orjson refuses what that encoder
    would change or refuse too (a lone surrogate, an int past 64 bits, a key
    that is not a string) and, with the passthrough options, the types that
    encoder does not know (dataclasses, datetimes, subclasses). What it does
    not refuse is NaN and infinity, which it writes as ``null`` where the
    standard encoder fails the element (-32603): so where the text holds a
    ``null`` (a finished job's ``"error": null``, mostly) the value is looked
    through for such a float, and not taken if it has one; and UUIDs and
    Enum members, which it writes as their value where that encoder fails:
    no method's result holds one."""
    try:
        data = orjson.dumps(value, option=_PASSTHROUGH)
    except (TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None
    if b"null" in data and _non_finite(value):
        return None
    return data.decode()


#: What ``_non_finite`` looks into: the containers orjson encodes, and floats.
_MAY_HOLD_NON_FINITE = (dict, list, tuple, float)


def _non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in ``value`` (which orjson has
    just encoded: JSON's shapes only, nested no deeper than its limit). A
    plain loop that steps only into containers and floats: the strings, ints
    and nulls most replies are made of cost one ``isinstance`` each (a
    ``job.run`` result 3.8 → 2.1 µs, ``timeit``, against ``any`` over every
    value; docs/performance.md, gateway step 9)."""
    if isinstance(value, dict):
        values: Iterable[Any] = value.values()
    elif isinstance(value, (list, tuple)):
        values = value
    elif isinstance(value, float):
        return not math.isfinite(value)
    else:
        return False
    for item in values:  # noqa: SIM110  (a loop: any() over a generator costs 1.5x)
        if isinstance(item, _MAY_HOLD_NON_FINITE) and _non_finite(item):
            return True
    return False


def _invalid(reply_id: RequestId, why: str) -> Failure:
    return Failure(reply_id, codes.INVALID_REQUEST, codes.INVALID_REQUEST_MESSAGE, {"message": why})


def _valid_envelope(value: dict[Any, Any]) -> bool:
    """Whether the member names, the method and a string id are valid Unicode
    (params are checked on their own, so the error can name the path)."""
    texts = [*value.keys(), value.get("method"), value.get("id")]
    return all(wellformed.valid_text(t) for t in texts if isinstance(t, str))


def _is_id(value: Any) -> bool:
    if type(value) is int:  # what clients mostly send (a bool is no int here)
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return wellformed.valid_text(value)
    return value is None or isinstance(value, int)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: ``json.dumps``/``json.loads`` with options build a coder on every call: built once here
#: (a text starting with a BOM, which ``json.loads`` refuses, fails to decode here too).
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_ENCODE_ASCII = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode
_DECODE = json.JSONDecoder(parse_constant=_refuse_constant).decode
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
