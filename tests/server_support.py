"""The one real-gateway harness: servers, WebSocket clients, and their fixtures.

A server here is ``python -m gateway.cli serve`` in a subprocess on a free
loopback port (uvicorn, the real lifespan, the real supervisor), with the
dispatcher's ``check_results`` on, so every result is also checked against
the contract. Its log goes to a file, shown when a test fails to start it.
A stopped server starts again on the same port (``restart``), which is how
client tests take the gateway away under a live subscription.

The client is the ``websockets`` library; ``Rpc`` adds what tests need on
top: ids, answers routed to their callers, notifications queued in order.

tests/conftest.py registers this module as a plugin, so its fixtures
(``shared_server``, ``server``, ``own_server``, ``rpc``)
reach every test module without an import. ``wait_until`` is the one way a
test waits for something another process does: a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from gateway import contract
from gateway.embedded_redis import EmbeddedRedis, free_port
from gateway.supervisor.auth import KeyStore
from gateway.supervisor.wire import Wire
from tests.conftest import ROOT

#: Limits of the shared test server: small, so tests can reach them cheaply.
MAX_MESSAGE_BYTES = 64 * 1024
MAX_INFLIGHT = 8


@dataclass
class Server:
    """One ``hero-gateway serve`` child process."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self) -> None:
        """Return once /healthz answers 200; raise with the log if the server exits or stalls."""
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}):\n{self.log()[-3000:]}")
            with contextlib.suppress(OSError):
                if http_get(f"{self.http}/healthz")[0] == 200:
                    return
            if time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"server not ready:\n{self.log()[-3000:]}")
            time.sleep(0.05)  # poll interval of the readiness probe

    def restart(self) -> None:
        """Start the stopped server again, same port and settings."""
        assert self.proc.poll() is not None, "restart of a running server"
        self.proc = spawn(self.log_path, self.env)
        self.wait_ready()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def server_env(redis_url: str, **settings: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERO_")}
    env.update(
        HERO_REDIS_URL=redis_url,
        HERO_CHECK_RESULTS="1",
        HERO_LOG_LEVEL="info",
        HERO_LOG_FORMAT="json",
        HERO_WATCH_INTERVAL="0.05",
        HERO_MAX_MESSAGE_BYTES=str(MAX_MESSAGE_BYTES),
        HERO_MAX_INFLIGHT=str(MAX_INFLIGHT),
        HERO_SHUTDOWN_GRACE="5",
        PYTHONPATH=str(ROOT),
    )
    env.update({f"HERO_{k.upper()}": str(v) for k, v in settings.items()})
    return env


def spawn(log_path: Path, env: Mapping[str, str], *args: str) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", *args],
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )


def start_server(redis_url: str, log_path: Path, **settings: Any) -> Server:
    """Start a server and wait until /healthz answers 200."""
    port = free_port()
    env = server_env(redis_url, port=port, **settings)
    server = Server(spawn(log_path, env), port, log_path, env)
    server.wait_ready()
    return server


@contextlib.contextmanager
def running_server(redis_url: str, log_path: Path, **settings: Any) -> Iterator[Server]:
    server = start_server(redis_url, log_path, **settings)
    try:
        yield server
    finally:
        server.stop()


#: Logged by the dispatcher when a result does not fit the contract (check_results).
CONTRACT_BREACH = "rpc result breaks the contract"


@pytest.fixture(scope="session")
def shared_server(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One server for the session (session Redis; each test's ``redis_url`` flushes it)."""
    log_path = tmp_path_factory.mktemp("gateway") / "serve.log"
    server = start_server(redis_server.url, log_path)
    yield server
    server.stop()


@pytest.fixture
def server(shared_server: Server, redis_url: str) -> Iterator[Server]:
    """The shared server on a freshly flushed Redis (no API keys: open mode).

    After the test, the server's log must show no result that broke the contract."""
    if shared_server.proc.poll() is not None:
        raise RuntimeError(f"shared server died:\n{shared_server.log()[-3000:]}")
    start = len(shared_server.log())
    yield shared_server
    breaches = [
        line for line in shared_server.log()[start:].splitlines() if CONTRACT_BREACH in line
    ]
    assert not breaches, "results that break the contract:\n" + "\n".join(breaches)


@pytest.fixture
async def admin_key(redis_url: str) -> AsyncIterator[str]:
    """An admin key on the test's Redis: with it, keys exist, and a client
    without one must log in."""
    client = Wire(redis_url, "test-keys")
    try:
        yield await KeyStore(client, redis_url).create("root", "admin")
    finally:
        await client.aclose()


@pytest.fixture
def own_server(redis_url: str, tmp_path: Path) -> Iterator[Server]:
    """A server of the test's own, which it may stop and ``restart`` (short drain)."""
    with running_server(redis_url, tmp_path / "serve.log", shutdown_grace=1) as server:
        yield server


@pytest.fixture
async def rpc(server: Server) -> AsyncIterator[Rpc]:
    async with Rpc.connect(server.ws) as client:
        yield client


# -- HTTP ------------------------------------------------------------------------------


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def http_post(
    url: str, body: bytes | str, headers: Mapping[str, str] | None = None, timeout: float = 10.0
) -> tuple[int, bytes, dict[str, str]]:
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), _lower(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), _lower(exc.headers)


async def fetch(
    url: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (names in lower case) and body of a GET."""

    def get() -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(url, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            answer = exc.code, exc.headers, exc.read()
        status, found, body = answer
        return status, {name.lower(): value for name, value in found.items()}, body

    return await asyncio.to_thread(get)


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


async def post(url: str, body: Any, headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """POST a JSON-RPC frame (text sent as is) off the event loop: (status, JSON or None)."""
    text = body if isinstance(body, str | bytes) else json.dumps(body)
    status, raw, _ = await asyncio.to_thread(http_post, url, text, headers)
    return status, json.loads(raw) if raw else None


# -- WebSocket -------------------------------------------------------------------------


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error['code']}: {error['message']}")
        self.code: int = error["code"]
        self.message: str = error["message"]
        self.data: Any = error.get("data")


class Rpc:
    """A JSON-RPC client on one real WebSocket.

    Answers go to the caller that sent the request (by id); notifications are
    queued in arrival order in ``notifications``; ``received`` keeps every
    message in arrival order, for ordering assertions."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.received: list[Any] = []
        self.close_frame: Any = None
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url: str, **kwargs: Any) -> AsyncIterator[Rpc]:
        async with websockets.connect(url, **{"open_timeout": 10, **kwargs}) as ws:
            client = cls(ws)
            try:
                yield client
            finally:
                client._reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await client._reader

    async def _read(self) -> None:
        try:
            async for text in self.ws:
                message = json.loads(text)
                self.received.append(message)
                if isinstance(message, dict) and "method" in message:
                    self.notifications.put_nowait(message)
                    continue
                key = _batch_key(message) if isinstance(message, list) else message.get("id")
                future = self._waiting.pop(key, None)
                if future is not None and not future.done():
                    future.set_result(message)
        except websockets.ConnectionClosed as exc:
            self.close_frame = exc.rcvd
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("socket closed"))

    async def request(
        self, method: str, params: Any = None, *, within: float = 15.0
    ) -> dict[str, Any]:
        """The whole Response object."""
        return await asyncio.wait_for(await self._send(method, params), within)

    async def sent(
        self, method: str, params: Any = None, *, within: float = 15.0
    ) -> asyncio.Task[dict[str, Any]]:
        """Put a request on the socket now; the task is its whole Response.
        The server reads a socket's frames in order, so every frame sent after
        this returns finds the request read (and in flight): a barrier, not a sleep."""
        future = await self._send(method, params)
        return asyncio.create_task(asyncio.wait_for(future, within))

    async def _send(self, method: str, params: Any) -> asyncio.Future[dict[str, Any]]:
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        await self.ws.send(json.dumps(message))
        return future

    async def call(self, method: str, params: Any = None, *, within: float = 15.0) -> Any:
        """The result, or RpcError."""
        response = await self.request(method, params, within=within)
        if "error" in response:
            raise RpcError(response["error"])
        return response["result"]

    async def batch(self, elements: list[Any], *, within: float = 15.0) -> list[dict[str, Any]]:
        """Send a batch; the answer array (its first id names it)."""
        ids = [e["id"] for e in elements if isinstance(e, dict) and "id" in e]
        future = asyncio.get_running_loop().create_future()
        self._waiting[("batch", ids[0] if ids else None)] = future
        await self.ws.send(json.dumps(elements))
        return await asyncio.wait_for(future, within)

    async def raw(self, text: str | bytes, *, key: Any = None, within: float = 15.0) -> Any:
        """Send any text; wait for the answer with id ``key`` (None: null id)."""
        future = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        await self.ws.send(text)
        return await asyncio.wait_for(future, within)

    async def closed(self, within: float = 15.0) -> tuple[int, str]:
        """Wait for the server to close the socket: its (code, reason)."""
        await asyncio.wait_for(asyncio.shield(self._reader), within)
        assert self.close_frame is not None, "closed without a close frame"
        return self.close_frame.code, self.close_frame.reason

    async def event(self, within: float = 15.0) -> dict[str, Any]:
        """The next notification's params."""
        message = await asyncio.wait_for(self.notifications.get(), within)
        assert message["method"] == "job.event"
        return message["params"]  # type: ignore[no-any-return]


def _batch_key(answers: list[Any]) -> Any:
    ids = [a.get("id") for a in answers if isinstance(a, dict) and a.get("id") is not None]
    return ("batch", ids[0] if ids else None)


def req(method: str, params: Any = None, id: Any = None) -> dict[str, Any]:
    """A request object (a notification when ``id`` is None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id is not None:
        message["id"] = id
    return message


def assert_event_shape(event: dict[str, Any]) -> None:
    """A ``job.event``'s event must be the contract's Event."""
    problems = contract.schema_validator("Event").problems(event)
    assert not problems, problems


async def wait_status(rpc: Rpc, job_id: str, *statuses: str, within: float = 15.0) -> str:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        status: str = (await rpc.call("job.status", {"job_id": job_id}))["status"]
        if status in statuses:
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"job {job_id} is {status}, not {statuses}")
        await asyncio.sleep(0.05)


def private_redis(path: Path) -> EmbeddedRedis:
    """A redis-server only one test uses (so the test may stop it)."""
    return EmbeddedRedis(path, appendonly=False).start()
