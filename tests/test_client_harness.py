"""A real gateway for the client, page and ecosystem tests, and its own check.

``RunningGateway`` runs ``hero-gateway serve``'s app (same ``build`` and
``DrainingServer`` as the command) on uvicorn inside the test's event loop,
on a free loopback port, against the session's real redis-server. It can be
stopped and started again on the same port, which is how the client tests
take the gateway away under a live subscription. The client test modules
import the ``gateway`` and ``python_actor`` fixtures from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import websockets

from gateway.actor import Actor
from gateway.config import Config
from gateway.server import DrainingServer, build, uvicorn_config

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "tests" / "node"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _PytestSignals(DrainingServer):
    """Ctrl-C and SIGTERM stay pytest's: the server must not take over signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class RunningGateway:
    """The gateway app on uvicorn in this event loop; ``stop``/``start`` keep the port."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._server: DrainingServer | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.config.port}/ws"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.config.port}"

    async def start(self) -> None:
        gateway = build(self.config)
        server = _PytestSignals(
            uvicorn_config(self.config, gateway), gateway, self.config.shutdown_grace
        )
        self._server = server
        self._task = asyncio.create_task(server.serve())
        async with asyncio.timeout(15):
            while not server.started:
                if self._task.done():
                    self._task.result()
                    raise RuntimeError("the gateway did not start")
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        async with asyncio.timeout(20):
            await self._task
        self._server = None
        self._task = None


@pytest.fixture
async def gateway(config: Config) -> AsyncIterator[RunningGateway]:
    cfg = dataclasses.replace(
        config,
        port=free_port(),
        shutdown_grace=1.0,
        log_level="warning",
    )
    running = RunningGateway(cfg)
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def python_actor(actors: Callable[..., Actor]) -> Actor:
    """One real python actor (subprocess per job), stopped at teardown."""
    return actors()


# -- Node ------------------------------------------------------------------------------------


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make test-system-deps installs it): JS checks skipped")
    return node


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """tests/node/node_modules, installed once with ``npm ci`` from the committed lock."""
    node_or_skip()
    target = NODE_DIR / "node_modules"
    if not (target / ".package-lock.json").is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the OpenRPC ecosystem checks need it")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            check=True,
            timeout=300,
        )
    return target


# -- the harness itself ------------------------------------------------------------------------


async def test_gateway_restarts_on_the_same_port(gateway: RunningGateway) -> None:
    """What the reconnect tests rely on: a stop closes the sockets, a start serves again."""
    async with websockets.connect(gateway.ws_url) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth.whoami"}))
        assert json.loads(await ws.recv())["result"]["scope"] == "anonymous"
        await gateway.stop()
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    with pytest.raises(OSError):
        async with websockets.connect(gateway.ws_url, open_timeout=2):
            pass
    await gateway.start()
    async with websockets.connect(gateway.ws_url) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "auth.whoami"}))
        assert json.loads(await ws.recv())["id"] == 2
