"""The ASGI app: JSON-RPC over WebSocket and HTTP POST, the contract, health.

    /ws             JSON-RPC 2.0 over WebSocket (subscriptions need it)
    /rpc            JSON-RPC 2.0 over HTTP POST (one frame per request)
    /openrpc.json   the contract (also ``rpc.discover``)
    /healthz        200 {"status": "ok", "redis": true}, else 503

``GET /`` and a few static files are the web page (``gateway.web``). The
app never builds the supervisor itself (this package does not import redis):
``open_services`` is an async context manager handed in by the caller
(``gateway.server``), entered in the lifespan, so the supervisor lives
exactly as long as the app.

Shutdown is two-step because uvicorn closes WebSockets at once (1012 without
waiting for anything): the server calls ``Gateway.drain`` first, which lets
every in-flight call answer and then closes each socket with 1012 itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from gateway import contract
from gateway.admission import Unidentified
from gateway.config import DEFAULTS
from gateway.errors import BackendUnavailable, Forbidden, HeroError, Overloaded, Unauthenticated
from gateway.rpc import origins
from gateway.rpc.backends import KeyStore, MetricsSink, ServedSupervisor
from gateway.rpc.context import CallContext
from gateway.rpc.credentials import Authenticator, Mode
from gateway.rpc.frames import SHUTTING_DOWN_MESSAGE, Budget, admit
from gateway.rpc.messages import Failure
from gateway.rpc.protocol import encode_reply, encode_response, parse_frame
from gateway.rpc.revocation import Revoker
from gateway.rpc.websocket import Connection
from gateway.web import web_routes

log = logging.getLogger("gateway.rpc.app")

#: Seconds /healthz waits for Redis before calling it down.
HEALTH_TIMEOUT = 2.0
#: ``Retry-After`` (seconds) on a 503: Redis unavailable, or too many connections.
RETRY_AFTER = "1"


@dataclass(frozen=True, slots=True)
class Limits:
    """What the transport enforces (``server.limits`` fills it from the
    config; the defaults are the config's, for an app built without one)."""

    max_message_bytes: int = DEFAULTS.max_message_bytes
    max_inflight: int = DEFAULTS.max_inflight
    #: Most elements of one batch; a longer one is answered with one -32600.
    max_batch: int = DEFAULTS.max_batch
    #: Reply bytes a WebSocket may leave unread before the gateway stops reading it.
    max_unsent_bytes: int = DEFAULTS.max_unsent_bytes
    #: Seconds a WebSocket over ``max_unsent_bytes`` gets to read before it is closed 1008.
    unsent_grace: float = DEFAULTS.unsent_grace
    #: Seconds a WebSocket opened without an identity gets to ``auth.login``.
    auth_timeout: float = DEFAULTS.auth_timeout
    #: WebSockets this process serves at once; past it an upgrade is answered 503.
    max_connections: int = DEFAULTS.max_connections
    #: Seconds a POST to /rpc gets to send its body once its headers are in.
    body_timeout: float = DEFAULTS.header_timeout
    #: Stale unidentified connections (``admission``): in all, and per client.
    max_unidentified: int = DEFAULTS.max_unidentified
    max_unidentified_per_client: int = DEFAULTS.max_unidentified_per_client
    #: Never serve unauthenticated clients, even with no keys (non-loopback listeners).
    require_keys: bool = False
    #: Browser origins whose pages may use the gateway while it has no key (rpc/origins.py).
    allowed_origins: frozenset[str] = frozenset()
    #: Validate results against the contract (tests).
    check_results: bool = False
    #: The configured script types, enumerated in the served contract.
    script_types: tuple[str, ...] = ()
    #: Those in stream mode: a JobSpec for one may not ask for routing or priority.
    stream_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Services:
    """What the app calls: the supervisor, and the key store (None: no auth at all)."""

    supervisor: ServedSupervisor
    keys: KeyStore | None = None
    metrics: MetricsSink | None = None


OpenServices = Callable[[], AbstractAsyncContextManager[Services]]


class Gateway:
    """The app and its live state (connections, draining)."""

    def __init__(self, open_services: OpenServices, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        #: Shared with the server's HTTP protocol, which counts headers pending.
        self.unidentified = Unidentified(
            per_client=self.limits.max_unidentified_per_client,
            total=self.limits.max_unidentified,
        )
        self._open_services = open_services
        self._services: Services | None = None
        self._auth: Authenticator | None = None
        self._connections: set[Connection] = set()
        self._upgrading = 0
        self.draining = False
        #: The served contract, encoded once (46 KB of JSON took about a
        #: millisecond to encode, for every request of a client asking for it
        #: hundreds of times over one connection).
        self._contract_body = bytes(JSONResponse(contract.served(self.limits.script_types)).body)
        self.app = Starlette(
            routes=[
                WebSocketRoute("/ws", self._websocket),
                Route("/rpc", self._http_rpc, methods=["POST"]),
                Route("/openrpc.json", self._openrpc, methods=["GET"]),
                Route("/healthz", self._healthz, methods=["GET"]),
                Route("/metrics", self._metrics, methods=["GET"]),
                *web_routes(),  # GET / : the page (gateway/web)
            ],
            lifespan=self._lifespan,
        )

    @property
    def connections(self) -> int:
        return len(self._connections)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self._open_services() as services:
            self._services = services
            self._auth = Authenticator(
                services.supervisor,
                services.keys,
                require_keys=self.limits.require_keys,
                check_results=self.limits.check_results,
                script_types=self.limits.script_types,
                stream_types=self.limits.stream_types,
                observe=services.metrics.observe_call if services.metrics else None,
            )
            await self._auth.keys_required()  # learn whether keys exist before the first client
            revoker = Revoker(services.keys, lambda: self._connections) if services.keys else None
            if revoker is not None:
                revoker.start()
            try:
                yield
            finally:
                if revoker is not None:
                    await revoker.stop()
                await self.drain(0)
                self._auth = None
                self._services = None

    async def drain(self, grace: float) -> None:
        """Stop taking new calls, give in-flight ones ``grace`` seconds, close with 1012."""
        self.draining = True
        connections = list(self._connections)
        if connections:
            log.info("draining connections", extra={"connections": len(connections)})
            await asyncio.gather(*(c.drain(grace) for c in connections))

    def _ready(self) -> tuple[Services, Authenticator]:
        if self._services is None or self._auth is None:
            raise RuntimeError("the gateway app runs only inside its lifespan")
        return self._services, self._auth

    # -- WebSocket -----------------------------------------------------------------

    async def _websocket(self, ws: WebSocket) -> None:
        services, auth = self._ready()
        if len(self._connections) + self._upgrading >= self.limits.max_connections:
            limit = {"limit": self.limits.max_connections}
            response = _json_error(503, Overloaded.code, "Too many connections", limit)
            response.headers["Retry-After"] = RETRY_AFTER
            await ws.send_denial_response(response)
            return
        self._upgrading += 1  # counted while the key is checked, so a burst cannot overshoot
        try:
            mode = await auth.mode(ws.headers.get("authorization"))
        except HeroError as exc:
            await ws.send_denial_response(_http_error(exc))
            return
        finally:
            self._upgrading -= 1
        if not self._page_may_use(mode, ws.headers, ws.url.scheme):
            await ws.send_denial_response(_json_error(403, Forbidden.code, origins.REFUSED))
            return
        connection = Connection(
            ws,
            mode,
            auth,
            services.supervisor,
            max_message_bytes=self.limits.max_message_bytes,
            max_inflight=self.limits.max_inflight,
            max_batch=self.limits.max_batch,
            max_unsent_bytes=self.limits.max_unsent_bytes,
            unsent_grace=self.limits.unsent_grace,
            auth_timeout=self.limits.auth_timeout,
            draining=lambda: self.draining,
        )
        if mode.identity is None:  # it must log in: unidentified until it has
            host = ws.client.host if ws.client else None
            connection.unidentified = self.unidentified.admit(host, connection.crowded_out)
        self._connections.add(connection)
        try:
            await ws.accept()  # raises for a peer gone already: then serve() never runs
            await connection.serve()
        finally:
            connection.identified()  # its ticket, were it never to log in
            self._connections.discard(connection)

    # -- HTTP ------------------------------------------------------------------------

    async def _http_rpc(self, request: Request) -> Response:
        """One frame per POST. Answers are 200 with the JSON-RPC reply (errors
        included), 204 when the frame held only notifications; a bad
        Authorization header, or none while keys exist, is 401 and a body over
        the size limit 413, each with a JSON-RPC error object as body. A
        single request answered -32007 (Redis unavailable) is a 503 with
        ``Retry-After``, like a refused key check.

        Who is asking is settled before the body is read: while keys exist, a
        POST without a valid one is refused whole (even a lone public
        ``rpc.discover``: the contract is at ``GET /openrpc.json``, and HTTP
        has no session to ``auth.login`` on), so a frame no one may send
        costs nothing to parse or answer."""
        _, auth = self._ready()
        try:
            mode = await auth.mode(request.headers.get("authorization"))
        except HeroError as exc:
            return _http_error(exc)
        if mode.identity is None:
            return _http_error(Unauthenticated("Authenticate first: Authorization header"))
        if not self._page_may_use(mode, request.headers, request.url.scheme):
            return _json_error(403, Forbidden.code, origins.REFUSED)
        try:  # a body that never comes would hold the connection for good
            async with asyncio.timeout(self.limits.body_timeout):
                body = await _read_body(request, self.limits.max_message_bytes)
        except TimeoutError:
            limit = {"limit_seconds": self.limits.body_timeout}
            response = _json_error(408, -32600, "Request body not sent in time", limit)
            response.headers["Connection"] = "close"
            return response
        if body is None:
            return _json_error(
                413, -32600, "Request too large", {"limit": self.limits.max_message_bytes}
            )
        frame = parse_frame(body, self.limits.max_batch)
        refuse = SHUTTING_DOWN_MESSAGE if self.draining else None
        elements, _ = admit(frame, Budget(self.limits.max_inflight), refuse)
        responses = await mode.dispatcher.dispatch_many(elements, CallContext(mode.identity))
        text = encode_reply(frame, responses)
        if text is None:
            return Response(status_code=204)
        first = responses[0]
        if not frame.batch and isinstance(first, Failure) and first.code == BackendUnavailable.code:
            return Response(text, 503, {"Retry-After": RETRY_AFTER}, media_type="application/json")
        return Response(text, media_type="application/json")

    def _page_may_use(self, mode: Mode, headers: Headers, scheme: str) -> bool:
        """Whether a browser page may be served in ``mode`` (only the key-less
        open mode is checked: rpc/origins.py says why)."""
        if mode.authenticated:
            return True
        named = headers.getlist("origin")
        if len(named) > 1:  # no browser sends two: not a page to let in by the first
            return False
        origin = named[0] if named else None
        return origins.may_use_keyless(
            origin, headers.get("host"), scheme, self.limits.allowed_origins
        )

    async def _openrpc(self, request: Request) -> Response:
        return Response(self._contract_body, media_type="application/json")

    async def _metrics(self, request: Request) -> Response:
        """Prometheus exposition; open like /healthz, so scrapers need no key."""
        services, _ = self._ready()
        if services.metrics is None:
            return PlainTextResponse("metrics are not enabled\n", status_code=404)
        try:
            body = await services.metrics.render()
        except HeroError as exc:  # Redis away: say so, as /healthz does
            return PlainTextResponse(f"{exc.message}\n", status_code=503)
        return Response(body, media_type=services.metrics.content_type)

    async def _healthz(self, request: Request) -> Response:
        services, _ = self._ready()
        try:
            ok = await asyncio.wait_for(services.supervisor.ping(), HEALTH_TIMEOUT)
        except TimeoutError:
            ok = False
        body = {"status": "ok" if ok else "unavailable", "redis": ok}
        return JSONResponse(body, status_code=200 if ok else 503)


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None once it is known to exceed ``limit`` (never read past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _http_error(exc: HeroError) -> Response:
    """A refused connection or request: 401 for a bad key, 503 when Redis is down."""
    status = 401 if isinstance(exc, Unauthenticated) else 503
    response = _json_error(status, exc.code, exc.message)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="hero-gateway"'
    else:
        response.headers["Retry-After"] = RETRY_AFTER
    return response


def _json_error(status: int, code: int, message: str, data: Any = None) -> Response:
    text = encode_response(Failure(None, code, message, data))
    return Response(text, status_code=status, media_type="application/json")
