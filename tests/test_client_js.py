"""The generated JS client, run in Node against a real gateway, redis-server and actor.

Node 18/20 has no global WebSocket, so the scripts in tests/node inject the
``ws`` package's (installed there by ``npm ci``); Node 22 uses its own. The
browser side of the same module is covered by tests/test_web.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from gateway.actor import Actor
from gateway.supervisor import Supervisor
from gateway.supervisor.auth import KeyStore
from tests.node_support import NODE_DIR, node_or_skip
from tests.server_support import Server

LIFECYCLE = ["created", "dispatched", "started", "finished"]


async def test_js_client_features(
    server: Server, python_actor: Actor, sup: Supervisor, node_modules: Path
) -> None:
    key = await KeyStore(sup.wire, sup.config.redis).create("js-test", "admin")
    proc = await asyncio.create_subprocess_exec(
        node_or_skip(),
        "js_client_features.mjs",
        server.ws,
        key,
        cwd=NODE_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    report = out.decode()
    assert proc.returncode == 0, report
    assert report.count("\nok ") + report.startswith("ok ") == 8, report


class NodeClient:
    """tests/node/js_client_restart.mjs, spoken to over its stdin/stdout."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []

    async def until(self, done: Any, within: float = 30) -> dict[str, Any]:
        """Read lines until one satisfies ``done``; returns it."""
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(within):
                while True:
                    raw = await self.proc.stdout.readline()
                    if not raw:
                        raise AssertionError(f"node exited; last lines: {self.lines[-5:]}")
                    line: dict[str, Any] = json.loads(raw)
                    self.lines.append(line)
                    if done(line):
                        return line
        except TimeoutError:
            raise AssertionError(
                f"node did not say it in time; last lines: {self.lines[-5:]}"
            ) from None

    async def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{command}\n".encode())
        await self.proc.stdin.drain()

    async def run(self, script: str) -> dict[str, Any]:
        await self.send(f"run {script}")
        line = await self.until(lambda x: "result" in x or "error" in x)
        assert "result" in line, line
        result: dict[str, Any] = line["result"]
        return result

    async def finished(self, job_id: str) -> None:
        """Until the job's finished event (which may already have been read)."""

        def done(line: dict[str, Any]) -> bool:
            event = line.get("event", {})
            return bool(event.get("job_id") == job_id and event["event"] == "finished")

        if not any(done(line) for line in self.lines):
            await self.until(done)

    def events(self) -> list[dict[str, Any]]:
        return [line["event"] for line in self.lines if "event" in line]


async def test_js_subscription_survives_a_gateway_restart(
    own_server: Server, python_actor: Actor, sup: Supervisor, node_modules: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        node_or_skip(),
        "js_client_restart.mjs",
        own_server.ws,
        cwd=NODE_DIR,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    node = NodeClient(proc)
    try:
        await node.until(lambda x: x.get("ready"))
        before = await node.run("print('before')")
        await node.finished(before["job_id"])

        # in flight across the restart: run() asks again after the reconnect
        await node.send("bg across import time; time.sleep(2.5); print('slow')")
        await node.until(
            lambda x: (
                x.get("event", {}).get("job_id") == "across" and x["event"]["event"] == "started"
            )
        )
        await asyncio.to_thread(own_server.stop)
        await node.until(lambda x: x.get("status") == "reconnecting")
        down = await sup.run({"script": "print('while down')", "script_type": "python"}, 30)
        assert down["status"] == "finished"
        await asyncio.to_thread(own_server.restart)

        await node.finished(down["job_id"])
        slow = await node.until(lambda x: "bg" in x or "bgError" in x)
        assert slow.get("bg") == {
            "job_id": "across",
            "status": "finished",
            "output": "slow\n",
            "error": None,
        }, slow
        after = await node.run("print('after')")
        await node.finished(after["job_id"])

        await node.send("quit")
        done = await node.until(lambda x: x.get("done"))
        assert done["reconnects"] >= 1
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    events = node.events()
    for job_id in (before["job_id"], down["job_id"], after["job_id"], "across"):
        # "across" printed after its first quarter second: its line is a live log event too
        assert [e["event"] for e in events if e["job_id"] == job_id and e["event"] != "log"] == (
            LIFECYCLE
        )
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
