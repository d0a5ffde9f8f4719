"""The model core against the Lua it describes, and the opacity of a reply.

- the fields ``emit`` (and ``hero_log``) XADD to the events stream are the
  fields of ``Event``, read from hero.lua's source;
- a real job's life on a real Redis, a real Supervisor and our actor, every
  entry of the events stream decoded strictly (unknown or missing fields fail);
- a Function's raw ``Reply`` cannot be indexed outside the decoders: mypy
  strict says so, and passes the decoders' way of reading it.
"""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from mypy import api as mypy_api

from gateway.actor import Actor, JobContext
from gateway.config import Config
from gateway.model import Event, StreamId, UnknownFields, library
from gateway.model.claim import CLAIM_FIELDS
from gateway.model.event import COMMON_FIELDS, ENTRY_FIELDS, OPTIONAL_FIELDS
from gateway.model.job import compact_json
from gateway.supervisor import Supervisor, keys
from tests.helpers import eventually, job, started

ROOT = Path(__file__).resolve().parent.parent
LUA = (ROOT / "gateway" / "supervisor" / "lua" / "hero.lua").read_text()


def _function(name: str) -> str:
    """The body of one ``local function`` of hero.lua."""
    start = LUA.index(f"local function {name}(")
    end = LUA.index("\nend\n", start)
    return LUA[start:end]


def _names(flat: str) -> list[str]:
    """The field names of a flat Lua list ``'name', value, 'name', value ...``."""
    return re.findall(r"'([a-z_]+)',\s*[^,]+", flat)


def test_emit_writes_the_fields_of_event() -> None:
    body = _function("emit")
    xadd = body[body.index("'XADD', EVENTS") : body.index("unpack(more))")]
    written = _names(xadd.split("'*',", 1)[1])
    assert tuple(written) == COMMON_FIELDS
    # what `more` adds: ctx.tag (take's sandbox tag) and a terminal output
    take = _function("take")
    tag = re.search(r"\{'(\w+)', 'off'\}", take)
    assert tag is not None and "ctx.tag = off" in take
    assert "'output', out" in body
    extra = {tag.group(1), "output"}
    log = _function("hero_log")
    common = log[log.index("local common = {") : log.index("}", log.index("local common = {"))]
    assert tuple(_names(common.split("{", 1)[1] + ",")) == COMMON_FIELDS
    extra |= set(re.findall(r"add\('\w+', '(\w+)'", log))
    extra |= set(re.findall(r"add\('progress', 'progress', progress, '(\w+)'", log))
    assert extra == set(OPTIONAL_FIELDS)
    assert set(ENTRY_FIELDS) == set(COMMON_FIELDS) | set(OPTIONAL_FIELDS)


def test_every_xadd_to_the_events_streams_is_emits_or_hero_logs() -> None:
    """No other writer of an event, so the two above are all there is."""
    writers = [m.start() for m in re.finditer(r"'XADD', (EVENTS|ENDED)", LUA)]
    emit, log = LUA.index("local function emit("), LUA.index("local function hero_log(")
    inside = [w for w in writers if emit < w < LUA.index("\nend\n", emit)]
    inside += [w for w in writers if log < w < LUA.index("\nend\n", log)]
    assert len(writers) == len(inside) == 3


def test_claim_fields_are_hero_luas() -> None:
    """A claimed row is ``[id, *CLAIM_FIELDS, entry, run]``: Lua's CLAIM_FIELDS
    but its last, ``legacy``, which ``take`` removes before replying."""
    found = re.search(r"local CLAIM_FIELDS = \{([^}]*)\}", LUA)
    assert found is not None
    lua = re.findall(r"'(\w+)'", found.group(1))
    assert (tuple(lua[:-1]), lua[-1]) == (CLAIM_FIELDS, "legacy")
    assert "remove(rec)" in _function("take")
    # a dispatch reads them in the same HMGET as the rest (spelled again there)
    found = re.search(r"local DISPATCH_FIELDS = \{([^}]*)\}", LUA)
    assert found is not None
    assert re.findall(r"'(\w+)'", found.group(1))[: len(lua)] == lua


def test_the_codec_round_trips_and_a_strict_decode_refuses_strangers() -> None:
    wire = {name: "" for name in COMMON_FIELDS} | {"job_id": "j", "attempt": "2", "ts": "5"}
    wire |= {"status": "finished", "event": "finished", "output": ""}
    event = Event.from_entry("5-1", wire, strict=True)
    assert (event.id, event.attempt, event.output, event.group) == (StreamId(5, 1), 2, "", None)
    assert event.to_wire() == wire
    with pytest.raises(UnknownFields):
        Event.from_entry("5-1", wire | {"surprise": "x"}, strict=True)
    with pytest.raises(UnknownFields):
        Event.from_entry("5-1", {"job_id": "j"}, strict=True)


def test_stream_ids_parse_and_order() -> None:
    assert StreamId.parse("12") == StreamId(12, 0) < StreamId.parse("12-1")
    assert StreamId.parse("13-0") > StreamId.parse("12-99") > StreamId(12, 98)
    assert str(StreamId.parse("7-3")) == "7-3"
    # "\u0661\u0662": digits of another script, which str.isdigit and int take too
    for junk in ("", "x", "1-", "-1", "1-x", "1 ", "\u0661\u0662-0", "1-\u0663"):
        with pytest.raises(ValueError):
            StreamId.parse(junk)
    assert StreamId.lenient("junk") < StreamId(0, 0)
    top = 2**64 - 1  # each half is an unsigned 64-bit number in Redis
    assert StreamId.parse(f"{top}-{top}") == StreamId(top, top)
    for too_big in (f"{top + 1}-0", f"0-{top + 1}", f"{top + 1}"):
        with pytest.raises(ValueError):
            StreamId.parse(too_big)


@pytest.mark.timeout(60)
async def test_a_jobs_life_decodes_strictly_entry_by_entry(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """Created, dispatched, started, log, progress, finished; a failure retried
    once, then dead-lettered; a stop: every entry of both streams is one the
    model knows."""
    actor = Actor(config, concurrency=2)

    @actor.handler("osis")
    async def work(ctx: JobContext) -> str:
        if ctx.job.script == "fail":
            raise RuntimeError("failed on purpose")
        if ctx.job.script == "hang":
            await asyncio.sleep(60)
        ctx.log("a line")
        ctx.progress(0.5, "half")
        await asyncio.sleep(0.6)  # the live log reports a few times a second
        return "done"

    serving = asyncio.create_task(actor.serve())
    try:
        done = await sup.run(job("ok", script_type="osis"), wait=20)
        failed = await sup.run(job("fail", script_type="osis", retries=1), wait=20)
        hanging = await sup.create(job("hang", script_type="osis"))
        await sup.start(hanging["job_id"])
        await eventually(lambda: started(sup, hanging["job_id"]))  # stopped while it runs
        await sup.stop(hanging["job_id"])
    finally:
        actor.stop()
        await asyncio.wait_for(serving, 30)
    assert (done["status"], failed["status"]) == ("finished", "dlq")
    events = [Event.from_entry(i, f, strict=True) for i, f in await rds.xrange(keys.EVENTS)]
    names = {e.event for e in events if e.job_id == done["job_id"]}
    assert {"created", "dispatched", "started", "log", "progress", "finished"} <= names
    assert {"retrying", "dlq"} <= {e.event for e in events if e.job_id == failed["job_id"]}
    assert "stopped" in {e.status for e in events if e.job_id == hanging["job_id"]}
    assert [e.id for e in events] == sorted(e.id for e in events)
    ended: list[tuple[str, dict[str, Any]]] = await rds.xrange(keys.ENDED)
    assert ended and all(set(f) <= set(ENTRY_FIELDS) for _, f in ended)
    by_id = {str(e.id): e for e in events}
    for entry_id, fields in ended:  # a copy of the terminal event, under its id
        assert by_id[entry_id].status == fields["status"]


BAD = """
from gateway.model.library import Reply

def first(reply: Reply) -> object:
    return reply[0]
"""

GOOD = """
from gateway.model import library
from gateway.model.library import Refused, Reply, Transition

def decoded(reply: Reply) -> list[Transition | Refused]:
    return library.start_many([("j", None)]).decode(reply)
"""


@pytest.mark.timeout(120)
def test_mypy_refuses_to_index_a_reply(tmp_path: Path) -> None:
    found = []
    for name, source in (("bad", BAD), ("good", GOOD)):
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        out, _, status = mypy_api.run(
            ["--strict", "--no-incremental", "--cache-dir=/dev/null", str(path)]
        )
        found.append((name, status, out))
    (_, bad_status, bad_out), (_, good_status, good_out) = found
    assert bad_status == 1 and 'Value of type "Reply" is not indexable' in bad_out, bad_out
    assert good_status == 0, good_out


def test_function_arguments_carry_every_string_as_it_was() -> None:
    """orjson's text where it can, the standard encoder's where it refuses a
    string (a lone surrogate): either way JSON gives back the same strings."""
    strings = ["plain", "é ü 中", 'quote " and \\ back', "line\nbreak \u2028", "\x00", ""]
    assert json.loads(library.strings_json(strings)) == strings
    assert library.strings_json(strings) != compact_json(strings)  # orjson's: raw UTF-8
    lone = ["a\ud800b"]
    assert library.strings_json(lone) == compact_json(lone) == '["a\\ud800b"]'
