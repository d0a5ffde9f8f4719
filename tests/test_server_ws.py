"""JSON-RPC over a real WebSocket to a real server: framing, concurrency,
limits, and every method end to end with real actors running the jobs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
import websockets

from gateway import contract
from gateway.actor import python_actor
from gateway.config import Config
from gateway.rpc.methods import HERO_ALIASES
from gateway.supervisor import keys
from tests.helpers import eventually, job
from tests.server_support import (
    MAX_INFLIGHT,
    MAX_MESSAGE_BYTES,
    Rpc,
    RpcError,
    Server,
    http_get,
    req,
    wait_status,
)

# -- framing --------------------------------------------------------------------------


async def test_parse_error_answers_and_keeps_the_socket_open(rpc: Rpc) -> None:
    answer = await rpc.raw("{not json")
    assert answer == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error"},
        "id": None,
    }
    assert (await rpc.call("auth.whoami"))["scope"] == "anonymous"


async def test_invalid_request_and_unknown_method(rpc: Rpc) -> None:
    bad = await rpc.raw(json.dumps({"jsonrpc": "1.0", "method": "auth.whoami", "id": 7}), key=7)
    assert bad["error"]["code"] == -32600
    unknown = await rpc.request("job.frobnicate", {})
    assert unknown["error"] == {
        "code": -32601,
        "message": "Method not found",
        "data": {"method": "job.frobnicate"},
    }


async def test_invalid_params_name_the_path_and_the_contract_rule(rpc: Rpc) -> None:
    with pytest.raises(RpcError) as caught:
        await rpc.call("job.create", {"job": job(priority=9)})
    assert caught.value.code == -32602
    assert caught.value.data["path"] == "job.priority"
    assert caught.value.data["schema_path"].startswith("#/components/schemas/JobSpec")
    assert caught.value.data["schema_path"].endswith("/maximum")
    with pytest.raises(RpcError) as wrong_type:
        await rpc.call("job.get", {"job_id": 5})
    assert wrong_type.value.code == -32602
    assert wrong_type.value.data["path"] == "job_id"


async def test_internal_error_answers_bare_minus_32603(rpc: Rpc, rds: aioredis.Redis) -> None:
    await rds.set(keys.STATS_REPORT, "{this is not json")
    answer = await rpc.request("stats.report")
    assert answer["error"] == {"code": -32603, "message": "Internal error"}
    assert (await rpc.call("auth.whoami"))["scope"] == "anonymous"


async def test_binary_messages_are_utf8_json(rpc: Rpc) -> None:
    answer = await rpc.raw(json.dumps(req("auth.whoami", id="b1")).encode(), key="b1")
    assert answer["result"]["scope"] == "anonymous"


async def test_bad_frames_never_cost_an_in_flight_answer(rpc: Rpc) -> None:
    await rpc.call("job.create", {"job": job(job_id="idle")})
    slow = await rpc.sent("job.output", {"job_id": "idle", "wait": 1.0})
    assert (await rpc.raw("{"))["error"]["code"] == -32700
    assert (await rpc.raw(b"\xff\xfe"))["error"]["code"] == -32700
    assert (await rpc.raw("42"))["error"]["code"] == -32600
    assert (await rpc.request("no.such.method"))["error"]["code"] == -32601
    assert (await rpc.request("job.get", {"job_id": ["x"]}))["error"]["code"] == -32602
    answer = await slow
    assert answer["error"]["code"] == -32003
    assert answer["error"]["data"] == {"job_id": "idle"}


async def test_a_slow_call_does_not_block_a_fast_one(rpc: Rpc) -> None:
    await rpc.call("job.create", {"job": job(job_id="idle")})
    started = time.monotonic()
    slow = await rpc.sent("job.output", {"job_id": "idle", "wait": 1.5})
    assert (await rpc.call("auth.whoami"))["scope"] == "anonymous"
    assert time.monotonic() - started < 1.0
    assert (await slow)["error"]["code"] == -32003
    ids = [m.get("id") for m in rpc.received]
    assert ids.index(3) < ids.index(2)  # whoami (3) answered before the slow output (2)


# -- batches --------------------------------------------------------------------------


async def test_mixed_batch_answers_each_element_and_runs_notifications(rpc: Rpc) -> None:
    answers = await rpc.batch(
        [
            req("job.create", {"job": job(job_id="b-ok")}, id=1),
            {"jsonrpc": "1.0", "method": "auth.whoami", "id": 2},
            req("job.create", {"job": job(job_id="b-note")}),  # notification
            req("no.such.method", {}, id=3),
            req("job.create", {"job": job(priority=-1)}, id=4),
            "not an object",
        ]
    )
    assert len(answers) == 5
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert by_id[1]["result"] == {"job_id": "b-ok", "status": "created"}
    assert by_id[2]["error"]["code"] == -32600
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["error"]["code"] == -32602
    assert [a["error"]["code"] for a in answers if a["id"] is None] == [-32600]
    assert (await rpc.call("job.status", {"job_id": "b-note"}))["status"] == "created"


async def test_empty_batch_is_one_invalid_request(rpc: Rpc) -> None:
    answer = await rpc.raw("[]")
    assert isinstance(answer, dict)
    assert answer["error"]["code"] == -32600
    assert answer["id"] is None


async def test_batch_of_notifications_gets_no_answer(rpc: Rpc) -> None:
    await rpc.ws.send(json.dumps([req("auth.whoami"), req("job.create", {"job": job()})]))
    assert (await rpc.call("auth.whoami"))["scope"] == "anonymous"
    assert [m.get("id") for m in rpc.received] == [1]


# -- limits ---------------------------------------------------------------------------


async def test_in_flight_cap_answers_the_excess_minus_32006(rpc: Rpc) -> None:
    await rpc.call("job.create", {"job": job(job_id="idle")})
    slow = [
        await rpc.sent("job.output", {"job_id": "idle", "wait": 1.0}) for _ in range(MAX_INFLIGHT)
    ]
    started = time.monotonic()
    with pytest.raises(RpcError) as caught:
        await rpc.call("auth.whoami")
    assert caught.value.code == -32006
    assert caught.value.data == {"limit": MAX_INFLIGHT}
    assert time.monotonic() - started < 0.5
    assert [a["error"]["code"] for a in await asyncio.gather(*slow)] == [-32003] * MAX_INFLIGHT
    assert (await rpc.call("auth.whoami"))["scope"] == "anonymous"  # budget came back


async def test_a_batch_over_the_cap_is_answered_element_by_element(rpc: Rpc) -> None:
    n = MAX_INFLIGHT + 3
    answers = await rpc.batch([req("auth.whoami", id=i) for i in range(1, n + 1)])
    codes = sorted(a["error"]["code"] if "error" in a else 0 for a in answers)
    assert codes == [-32006] * 3 + [0] * MAX_INFLIGHT


async def test_message_over_the_limit_closes_1009(server: Server) -> None:
    async with websockets.connect(server.ws, max_size=None) as ws:
        big = json.dumps(req("auth.whoami", {"pad": "x" * MAX_MESSAGE_BYTES}, id=1))
        await ws.send(big)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_frames_are_not_compressed(server: Server) -> None:
    """The client offers permessage-deflate (websockets does by default); the
    server declines it: deflating small JSON-RPC frames costs more CPU than it saves."""
    async with websockets.connect(server.ws) as ws:
        assert ws.response is not None
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        await ws.send(json.dumps(req("auth.whoami", id=1)))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["result"]["scope"] == "anonymous"


async def test_a_message_just_under_the_limit_is_answered(rpc: Rpc) -> None:
    pad = "x" * (MAX_MESSAGE_BYTES - 200)
    answer = await rpc.request("auth.whoami", {"pad": pad})
    assert answer["error"]["code"] == -32602  # answered, not cut off


# -- every method, end to end -----------------------------------------------------------


async def test_job_lifecycle_methods(rpc: Rpc, actors: Any) -> None:
    actors()
    created = await rpc.call("job.create", {"job": job("print('hello')", job_id="life")})
    assert created == {"job_id": "life", "status": "created"}
    started = await rpc.call("job.start", {"job_id": "life"})
    assert started["status"] == "dispatched" and started["queue"]
    result = await rpc.call("job.output", {"job_id": "life", "wait": 20})
    assert result == {"job_id": "life", "status": "finished", "output": "hello\n", "error": None}
    assert await rpc.call("job.status", {"job_id": "life"}) == {
        "job_id": "life",
        "status": "finished",
    }
    got = await rpc.call("job.get", {"job_id": "life"})
    assert got["id"] == "life" and got["status"] == "finished" and got["attempt"] >= 1
    logs = await rpc.call("job.logs", {"job_id": "life"})
    assert logs["job_id"] == "life" and "hello" in logs["logs"]
    listed = await rpc.call("job.list", {"status": "finished", "limit": 10})
    assert [j["id"] for j in listed["jobs"]] == ["life"]
    assert listed["next_cursor"] is None
    with pytest.raises(RpcError) as again:
        await rpc.call("job.start", {"job_id": "life"})
    assert again.value.code == -32002
    assert await rpc.call("job.delete", {"job_id": "life"}) == {"deleted": True}
    with pytest.raises(RpcError) as gone:
        await rpc.call("job.get", {"job_id": "life"})
    assert gone.value.code == -32001
    assert gone.value.data == {"job_id": "life"}


async def test_run_and_a_failed_job_is_a_result_not_an_error(rpc: Rpc, actors: Any) -> None:
    actors()
    ok = await rpc.call("job.run", {"job": job("print(6 * 7)"), "wait": 20})
    assert ok["status"] == "finished" and ok["output"] == "42\n"
    failed = await rpc.call("job.run", {"job": job("raise SystemExit(3)"), "wait": 20})
    assert failed["status"] == "error" and failed["error"]


async def test_a_batch_goes_to_redis_together_and_answers_each_element(rpc: Rpc) -> None:
    """A batch's calls share one pipeline; an element Redis refuses (unknown
    prerequisite, unknown job, wrong state) is answered on its own."""
    await rpc.call("job.create", {"job": job(job_id="bt-done")})
    await rpc.call("job.start", {"job_id": "bt-done"})
    answers = await rpc.batch(
        [
            req("job.create", {"job": job(job_id="bt-1")}, id=1),
            req("job.create", {"job": job(job_id="bt-bad", prerequisites=["bt-none"])}, id=2),
            req("job.create", {"job": job(job_id="bt-3")}, id=3),
            req("job.start", {"job_id": "bt-none"}, id=4),
            req("job.create", {"job": job(job_id="bt-5")}, id=5),
            req("job.start", {"job_id": "bt-done"}, id=6),
            req("job.create", {"job": job(script_type="cobol")}, id=7),
            req("job.create", {"job": job(job_id="bt-8")}, id=8),
        ]
    )
    assert len(answers) == MAX_INFLIGHT
    by_id = {a["id"]: a for a in answers}
    for i in (1, 3, 5, 8):
        assert by_id[i]["result"] == {"job_id": f"bt-{i}", "status": "created"}
    assert by_id[2]["error"]["code"] == -32602
    assert by_id[2]["error"]["data"]["path"] == "job.prerequisites"
    assert by_id[4]["error"]["code"] == -32001
    assert by_id[6]["error"]["code"] == -32002
    assert by_id[7]["error"]["code"] == -32602
    assert by_id[7]["error"]["data"]["path"] == "job.script_type"
    started = await rpc.batch(
        [req("job.start", {"job_id": f"bt-{i}"}, id=100 + i) for i in (1, 3, 5, 8)]
    )
    assert sorted(a["result"]["status"] for a in started) == ["dispatched"] * 4


async def test_a_batch_of_runs_returns_every_result(rpc: Rpc, actors: Any) -> None:
    actors()
    answers = await rpc.batch(
        [req("job.run", {"job": job(f"print({i} * 3)"), "wait": 30}, id=i) for i in range(1, 8)]
        + [req("job.run", {"job": job("raise SystemExit(4)"), "wait": 30}, id=8)],
        within=60,
    )
    by_id = {a["id"]: a["result"] for a in answers}
    assert len(by_id) == MAX_INFLIGHT
    for i in range(1, 8):
        assert by_id[i]["status"] == "finished" and by_id[i]["output"] == f"{i * 3}\n"
    assert by_id[8]["status"] == "error" and by_id[8]["error"]


async def test_stop_a_queued_job(rpc: Rpc) -> None:
    await rpc.call("job.create", {"job": job(script_type="osis", job_id="q1")})
    await rpc.call("job.start", {"job_id": "q1"})  # no osis actor: it stays queued
    assert await rpc.call("job.stop", {"job_id": "q1"}) == {"job_id": "q1", "status": "stopped"}
    with pytest.raises(RpcError) as ended:
        await rpc.call("job.stop", {"job_id": "q1"})
    assert ended.value.code == -32002


async def test_queue_actor_stats_and_discovery_methods(
    rpc: Rpc, actors: Any, server: Server, rds: aioredis.Redis
) -> None:
    actors()
    await rpc.call("job.create", {"job": job(script_type="osis")})
    queued = await rpc.call("job.create", {"job": job(script_type="osis", job_id="wait1")})
    await rpc.call("job.start", {"job_id": queued["job_id"]})
    queues = (await rpc.call("queue.stats", {"script_type": "osis"}))["queues"]
    assert [q["depth"] for q in queues] == [1]
    assert (await rpc.call("queue.stats"))["queues"]

    async def listed() -> bool:
        return bool((await rpc.call("actor.list", {"script_type": "python"}))["actors"])

    await eventually(listed)
    found = (await rpc.call("actor.list", {"script_type": "python"}))["actors"]
    assert found[0]["script_type"] == "python"
    assert await rpc.call("stats.report") is None
    report = {"generated_at": "2025-01-01T00:00:00Z", "queues": []}
    await rds.set(keys.STATS_REPORT, json.dumps(report))
    assert await rpc.call("stats.report") == report
    assert await rpc.call("auth.whoami") == {
        "name": "anonymous",
        "scope": "anonymous",
        "caller_id": None,
    }
    assert (await rpc.call("auth.login", {"key": "anything"}))["scope"] == "anonymous"
    discovered = await rpc.call("rpc.discover")
    # the committed contract with this deployment's script types filled in
    assert discovered == contract.served(Config().script_types)
    assert discovered != contract.document()
    status, body = http_get(f"{server.http}/openrpc.json")
    assert status == 200 and json.loads(body) == discovered


@pytest.mark.parametrize("old", sorted(HERO_ALIASES))
async def test_hero_names_serve_the_same_methods(rpc: Rpc, old: str, actors: Any) -> None:
    actors()
    await rpc.call("create_job", {"job": job("print('h')", job_id="h1")})
    by_method: dict[str, dict[str, Any]] = {
        "create_job": {"job": job(job_id="h2")},
        "start_job": {"job_id": "h1"},
        "run_job": {"job": job("print('r')"), "wait": 20},
        "get_job_status": {"job_id": "h1"},
        "get_job_output": {"job_id": "h1"},
        "get_job_logs": {"job_id": "h1"},
        "list_jobs": {},
        "stop_job": {"job_id": "h1"},
        "delete_job": {"job_id": "h1"},
    }
    params = by_method[old]
    assert await rpc.call(old, params) is not None
    new = await rpc.request(HERO_ALIASES[old], params)
    assert "result" in new or new["error"]["code"] in (-32002,)  # start/stop twice


async def test_dead_letter_queue_list_and_replay(rpc: Rpc, actors: Any, config: Config) -> None:
    actors(python_actor(dataclasses.replace(config, retry_base=0.01, retry_max=0.05)))
    spec = job("raise SystemExit(3)", job_id="dead", retries=1)
    assert (await rpc.call("job.run", {"job": spec, "wait": 20}))["status"] == "dlq"
    entries = (await rpc.call("queue.dlq.list", {"script_type": "python"}))["entries"]
    assert [e["job_id"] for e in entries] == ["dead"]
    replayed = await rpc.call("queue.dlq.replay", {"script_type": "python", "job_ids": ["dead"]})
    assert replayed == {"replayed": ["dead"]}
    assert await wait_status(rpc, "dead", "dlq", "retrying", "dispatched", "started") != ""
