"""A key-less gateway refuses other sites' pages, over HTTP and WebSocket, on a real server."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from gateway.supervisor.auth import KeyStore
from tests.helpers import job
from tests.server_support import Rpc, Server, http_post, req, running_server

EVIL = "http://evil.example"


def _create(server: Server, job_id: str, headers: dict[str, str]) -> tuple[int, Any]:
    body = json.dumps(req("job.create", {"job": job(job_id=job_id)}, 1))
    status, raw, _ = http_post(f"{server.http}/rpc", body, headers)
    return status, json.loads(raw)


def _post_with_two_origins(server: Server, first: str, second: str) -> int:
    """A POST with two Origin headers (which no browser sends): its status."""
    body = json.dumps(req("job.create", {"job": job(job_id="twice")}, 1)).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest("POST", "/rpc")
        for origin in (first, second):
            conn.putheader("Origin", origin)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


async def test_a_cross_site_post_is_refused_and_creates_nothing(server: Server) -> None:
    # what a hostile page can send without a CORS preflight: a text/plain POST
    status, answer = _create(server, "csrf", {"Origin": EVIL, "Content-Type": "text/plain"})
    assert status == 403
    assert answer["error"]["code"] == -32005
    assert "HERO_ALLOWED_ORIGINS" in answer["error"]["message"]
    async with Rpc.connect(server.ws) as client:  # a program (no Origin) sees no such job
        reply = await client.request("job.status", {"job_id": "csrf"})
    assert reply["error"]["code"] == -32001


async def test_a_rebound_name_is_refused_and_the_console_page_is_served(server: Server) -> None:
    rebound = {
        "Origin": f"http://evil.example:{server.port}",
        "Host": f"evil.example:{server.port}",
    }
    assert _create(server, "rebound", rebound)[0] == 403
    own = {"Origin": f"http://127.0.0.1:{server.port}"}
    assert _post_with_two_origins(server, own["Origin"], EVIL) == 403
    assert _create(server, "own", own) == (
        200, {"jsonrpc": "2.0", "result": {"job_id": "own", "status": "created"}, "id": 1}
    )  # fmt: skip


async def test_a_cross_site_websocket_is_refused(server: Server) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(server.ws, origin=websockets.Origin(EVIL)):
            pass
    assert refused.value.response.status_code == 403
    async with websockets.connect(
        server.ws, origin=websockets.Origin(f"http://127.0.0.1:{server.port}")
    ) as ws:
        await ws.send(json.dumps(req("auth.whoami", id=1)))
        assert json.loads(await ws.recv())["result"]["scope"] == "anonymous"


async def test_a_listed_origin_is_served(redis_url: str, tmp_path: Path) -> None:
    with running_server(redis_url, tmp_path / "serve.log", allowed_origins=EVIL) as server:
        assert _create(server, "listed", {"Origin": EVIL})[0] == 200
        assert _create(server, "other", {"Origin": "http://other.example"})[0] == 403


async def test_with_keys_a_page_needs_a_key_and_nothing_else(
    server: Server, store: KeyStore
) -> None:
    key = await store.create("page", "admin")
    assert _create(server, "nokey", {"Origin": EVIL})[0] == 401
    keyed = {"Origin": EVIL, "Authorization": f"Bearer {key}"}
    assert _create(server, "keyed", keyed)[0] == 200
