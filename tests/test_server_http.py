"""JSON-RPC over HTTP POST, /healthz, /openrpc.json, against a real server."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import job
from tests.server_support import (
    MAX_INFLIGHT,
    MAX_MESSAGE_BYTES,
    Server,
    http_get,
    http_post,
    post,
    req,
)


def test_health_reports_redis(server: Server) -> None:
    status, body = http_get(f"{server.http}/healthz")
    assert status == 200
    assert json.loads(body) == {"status": "ok", "redis": True}


def test_rpc_wants_post_and_unknown_paths_are_404(server: Server) -> None:
    assert http_get(f"{server.http}/rpc")[0] == 405
    assert http_get(f"{server.http}/no-such-page")[0] == 404


async def test_single_call(server: Server) -> None:
    status, answer = await post(
        f"{server.http}/rpc", req("job.create", {"job": job(job_id="h")}, 1)
    )
    assert status == 200
    assert answer == {"jsonrpc": "2.0", "result": {"job_id": "h", "status": "created"}, "id": 1}


async def test_mixed_batch_and_notifications(server: Server) -> None:
    status, answers = await post(
        f"{server.http}/rpc",
        [
            req("auth.whoami", id="a"),
            req("job.create", {"job": job(job_id="note")}),
            {"jsonrpc": "2.0", "id": "b"},
            req("job.status", {"job_id": "missing"}, id="c"),
        ],
    )
    assert status == 200
    by_id = {a["id"]: a for a in answers}
    assert set(by_id) == {"a", "b", "c"}
    assert by_id["a"]["result"]["scope"] == "anonymous"
    assert by_id["b"]["error"]["code"] == -32600
    assert by_id["c"]["error"] == {
        "code": -32001,
        "message": "Job not found: missing",
        "data": {"job_id": "missing"},
    }
    _, status_answer = await post(f"{server.http}/rpc", req("job.status", {"job_id": "note"}, 1))
    assert status_answer["result"]["status"] == "created"


async def test_purge_clears_ended_jobs_of_one_status(server: Server) -> None:
    for calls in (
        [req("job.create", {"job": job(job_id=f"p{n}")}, n) for n in range(3)],
        [req("job.stop", {"job_id": f"p{n}"}, n) for n in range(2)],
    ):
        status, answers = await post(f"{server.http}/rpc", calls)
        assert status == 200 and all("result" in a for a in answers), answers
    _, answer = await post(f"{server.http}/rpc", req("job.purge", {"status": "stopped"}, 1))
    assert answer["result"] == {"deleted": 2}
    calls = [req("job.status", {"job_id": f"p{n}"}, n) for n in range(3)]
    _, answers = await post(f"{server.http}/rpc", calls)
    by_id = {a["id"]: a for a in answers}
    assert [by_id[n].get("error", {}).get("code") for n in range(2)] == [-32001, -32001]
    assert by_id[2]["result"]["status"] == "created"  # not ended: untouched


async def test_only_notifications_is_204(server: Server) -> None:
    status, answer = await post(f"{server.http}/rpc", [req("auth.whoami"), req("auth.whoami")])
    assert (status, answer) == (204, None)


async def test_parse_error_and_empty_batch(server: Server) -> None:
    status, answer = await post(f"{server.http}/rpc", "{oops")
    assert status == 200 and answer["error"]["code"] == -32700 and answer["id"] is None
    status, answer = await post(f"{server.http}/rpc", "[]")
    assert status == 200 and answer["error"]["code"] == -32600 and isinstance(answer, dict)


async def test_subscribe_needs_a_websocket(server: Server) -> None:
    _, answer = await post(f"{server.http}/rpc", req("job.subscribe", {}, 1))
    assert answer["error"]["code"] == -32002


async def test_a_batch_over_the_cap_is_answered_element_by_element(server: Server) -> None:
    n = MAX_INFLIGHT + 2
    _, answers = await post(f"{server.http}/rpc", [req("auth.whoami", id=i) for i in range(n)])
    codes = sorted(a["error"]["code"] if "error" in a else 0 for a in answers)
    assert codes == [-32006] * 2 + [0] * MAX_INFLIGHT


def test_body_over_the_limit_is_413(server: Server) -> None:
    body = json.dumps(req("auth.whoami", {"pad": "x" * MAX_MESSAGE_BYTES}, 1))
    status, raw, _ = http_post(f"{server.http}/rpc", body)
    assert status == 413
    assert json.loads(raw)["error"]["code"] == -32600


async def test_discover_over_http_is_the_served_document(server: Server) -> None:
    _, answer = await post(f"{server.http}/rpc", req("rpc.discover", id=1))
    status, body = http_get(f"{server.http}/openrpc.json")
    assert status == 200
    assert answer["result"] == json.loads(body)
    assert {m["name"] for m in answer["result"]["methods"]} >= {"job.create", "rpc.discover"}


def test_the_app_layer_never_imports_redis_or_the_supervisor() -> None:
    """The app gets its supervisor injected; gateway.server is the only wiring."""
    code = (
        "import sys\n"
        "import gateway.rpc.app, gateway.rpc.websocket, gateway.rpc.subscriptions\n"
        "import gateway.rpc.credentials, gateway.rpc.frames\n"
        "bad = sorted(m for m in sys.modules if m == 'redis' or m.startswith(('redis.', "
        "'gateway.supervisor')))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_metrics_endpoint_serves_queue_depth_and_rpc_latency(server: Server) -> None:
    await post(f"{server.http}/rpc", req("job.create", {"job": job(job_id="m1")}, 1))
    await post(f"{server.http}/rpc", req("job.start", {"job_id": "m1"}, 2))
    await post(f"{server.http}/rpc", req("job.get", {"job_id": "nope"}, 3))
    status, body = http_get(f"{server.http}/metrics")
    text = body.decode() if isinstance(body, bytes) else body
    assert status == 200
    depth = (
        'hero_queue_depth{group="",instance="",priority="1",'
        'queue="hero:q:work:type:python",script_type="python"} 1.0'
    )
    assert depth in text
    assert 'hero_jobs{status="dispatched"} 1.0' in text
    assert 'hero_rpc_duration_seconds_count{method="job.create",outcome="ok"}' in text
    assert 'hero_rpc_duration_seconds_count{method="job.get",outcome="-32001"}' in text
