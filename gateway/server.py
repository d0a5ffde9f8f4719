"""``hero-gateway serve`` and ``hero-gateway keys``: where rpc meets the supervisor.

``gateway.rpc`` never imports redis, so something has to build the
supervisor and the key store and hand them to the app: this module, the only
one that imports both sides. It also runs uvicorn with a shutdown that drains
the app before uvicorn drops its WebSockets, and refuses to listen beyond
loopback when no API key exists (unless ``--insecure``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import ipaddress
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from redis.exceptions import RedisError

from gateway import eventloop, logs
from gateway.admission import Unidentified
from gateway.config import Config, add_arguments, resolve
from gateway.errors import BackendUnavailable, InvalidParams
from gateway.metrics import Metrics
from gateway.protocols import GracefulWebSocketProtocol, http_protocol
from gateway.rpc.app import Gateway, Limits, Services
from gateway.supervisor import Supervisor
from gateway.supervisor.auth import SCOPES, KeyStore
from gateway.supervisor.connection import user_of
from gateway.supervisor.wire import Wire

log = logging.getLogger("gateway.server")

#: Exit codes of ``serve`` besides 0.
EXIT_REDIS = 1
EXIT_REFUSED = 2


# -- serve ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def services(
    config: Config, unidentified: Unidentified | None = None
) -> AsyncIterator[Services]:
    """The supervisor, the key store and the metrics (of ``unidentified`` too,
    the app's budget of unidentified connections), for the app's lifespan."""
    sup = await Supervisor.connect(config)
    log.info("connected to redis", extra={"redis_user": user_of(config.redis)})
    try:
        store = KeyStore(sup.wire, config.redis, timeout=config.redis_timeout)
        yield Services(supervisor=sup, keys=store, metrics=Metrics(sup, unidentified))
    finally:
        await sup.close()


def limits(config: Config) -> Limits:
    return Limits(
        max_message_bytes=config.max_message_bytes,
        max_inflight=config.max_inflight,
        max_batch=config.max_batch,
        max_unsent_bytes=config.max_unsent_bytes,
        unsent_grace=config.unsent_grace,
        auth_timeout=config.auth_timeout,
        max_connections=config.max_connections,
        body_timeout=config.header_timeout,
        max_unidentified=config.max_unidentified,
        max_unidentified_per_client=config.max_unidentified_per_client,
        require_keys=not config.insecure and not is_loopback(config.host),
        allowed_origins=frozenset(config.allowed_origins),
        check_results=config.check_results,
        script_types=config.script_types,
        stream_types=config.stream_types,
    )


def build(config: Config) -> Gateway:
    """The app for ``config`` (its supervisor connects when the lifespan starts)."""
    gateway = Gateway(lambda: services(config, gateway.unidentified), limits(config))
    return gateway


class _DenialNoise(logging.Filter):
    """Drops the error uvicorn logs after a refused WebSocket upgrade.

    Refusing an upgrade (401 for a bad key) is a complete answer, but uvicorn's
    sans-I/O WebSocket protocol still logs "ASGI callable returned without
    completing handshake" at error level for it. This app always accepts or
    refuses, so the line carries no information; an operator would read every
    bad key as a server error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "returned without completing handshake" not in record.getMessage()


class DrainingServer(uvicorn.Server):
    """uvicorn, but on shutdown the app drains before uvicorn closes sockets:
    stop accepting, let in-flight calls answer (up to ``grace``), close 1012."""

    def __init__(self, config: uvicorn.Config, gateway: Gateway, grace: float) -> None:
        super().__init__(config)
        self._gateway = gateway
        self._grace = grace

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in getattr(self, "servers", []):
            server.close()  # no new connections while draining
        await self._gateway.drain(self._grace)
        await super().shutdown(sockets)


def uvicorn_config(config: Config, gateway: Gateway) -> uvicorn.Config:
    return uvicorn.Config(
        gateway.app,
        host=config.host,
        port=config.port,
        http=http_protocol(config.header_timeout, gateway.unidentified),
        ws=GracefulWebSocketProtocol,  # uvicorn's "websockets-sansio", closing gracefully
        # JSON-RPC frames are small: compressing each one (permessage-deflate, on
        # by default) cost 10-15% of the gateway's CPU per job in the WebSocket
        # benchmark and saves bytes only on slow links.
        ws_per_message_deflate=False,
        ws_max_size=config.max_message_bytes,
        ws_ping_interval=config.ping_interval or None,
        ws_ping_timeout=config.ping_timeout or None,
        # HTTP requests past the cap get 503 from uvicorn (it counts WebSockets
        # too); WebSocket upgrades are counted and refused by the app.
        limit_concurrency=config.max_connections,
        lifespan="on",
        log_config=None,  # keep gateway.logs' handler (JSON lines)
        timeout_graceful_shutdown=max(1, int(config.shutdown_grace) + 5),
    )


async def preflight(config: Config) -> str | None:
    """Why the server must not start, or None. Checked before binding so the
    operator gets one clear line, not a lifespan traceback."""
    client = Wire(config.redis, "preflight", timeout=config.redis_timeout)
    try:
        try:
            keys_exist = await KeyStore(client, config.redis).exist()
        except (BackendUnavailable, RedisError) as exc:
            return logs.redis_failure(exc, config.redis)
    finally:
        await client.aclose()
    if not keys_exist and not config.insecure and not is_loopback(config.host):
        return (
            f"refusing to listen on {config.host}: no API key exists, so anyone who can "
            "reach it could run jobs. Create one (hero-gateway keys create --name N "
            "--scope admin) or pass --insecure."
        )
    return None


async def serve(config: Config) -> int:
    refused = await preflight(config)
    if refused is not None:
        print(f"hero-gateway serve: {refused}", file=sys.stderr)
        return EXIT_REDIS if refused.startswith("Redis") else EXIT_REFUSED
    gateway = build(config)
    logging.getLogger("uvicorn.error").addFilter(_DenialNoise())
    settle_gc()
    server = DrainingServer(uvicorn_config(config, gateway), gateway, config.shutdown_grace)
    await server.serve()
    return 0 if server.started else EXIT_REDIS


#: Net new container objects between young collections (CPython's default is 700).
GC_YOUNG_THRESHOLD = 10_000


def settle_gc() -> None:
    """Keep the cyclic garbage collector off the job path.

    A JSON-RPC batch of 32 jobs holds a few thousand container objects
    (coroutines, futures, params, replies) until it is answered. At CPython's
    default threshold of 700 a young collection ran several times per batch,
    promoted what was in flight, and so kept the full collections coming:
    about 12 per 20,000 jobs, each walking the ~70,000 objects of the
    imports and the contract's schemas (22 µs of CPU per job in the gateway,
    a sixth of it; ``docs/performance.md``). Everything built so far lives
    as long as the process, so it is frozen out of the collector's walks,
    and a young collection waits for 10,000 net new objects: what is in
    flight comes and goes below that, and a garbage cycle is still found.
    """
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def cmd_serve(args: argparse.Namespace) -> int:
    config = resolve(args)
    return eventloop.run(serve(config), config.event_loop)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only ever means this machine (a name must resolve to
    loopback addresses only; one that does not resolve is not loopback)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


# -- keys ------------------------------------------------------------------------------


async def _keys(config: Config, action: str, args: argparse.Namespace) -> int:
    client = Wire(config.redis, "keys", timeout=config.redis_timeout)
    store = KeyStore(client, config.redis, timeout=config.redis_timeout)
    try:
        if action == "create":
            key = await store.create(args.name, args.scope, args.caller_id)
            print(key)
            print(
                f"API key {args.name!r} ({args.scope}) created. It is shown only now: "
                "store it somewhere safe.",
                file=sys.stderr,
            )
        elif action == "list":
            entries = await store.list_keys()
            if args.json:
                print(json.dumps(entries))
            else:
                for e in entries:
                    print(f"{e['name']}\t{e['scope']}\t{e['caller_id'] or '-'}\t{e['created_at']}")
        else:
            if not await store.revoke(args.name):
                print(f"hero-gateway keys revoke: no API key named {args.name!r}", file=sys.stderr)
                return 1
            print(f"API key {args.name!r} revoked.", file=sys.stderr)
    except InvalidParams as exc:  # Redis's failures are said by gateway.cli, for every command
        print(f"hero-gateway keys {action}: {exc.message}", file=sys.stderr)
        return 1
    finally:
        await client.aclose()
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    return asyncio.run(_keys(resolve(args), args.action, args))


# -- CLI -------------------------------------------------------------------------------


def add_commands(sub: Any) -> None:
    """Register ``serve`` and ``keys`` (called by ``gateway.cli``)."""
    p = sub.add_parser("serve", help="run the JSON-RPC gateway (WebSocket /ws, HTTP /rpc)")
    add_arguments(p, "serve")
    p.set_defaults(func=cmd_serve)

    keys = sub.add_parser("keys", help="create, list and revoke API keys")
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="make a key and print it (once)")
    create.add_argument("--name", required=True, help="unique name, used to revoke it")
    create.add_argument("--scope", required=True, choices=SCOPES, help="user or admin")
    create.add_argument(
        "--caller-id", help="the caller a user key acts as (required for --scope user)"
    )
    add_arguments(create, "keys")
    create.set_defaults(func=cmd_keys)

    listing = actions.add_parser("list", help="list keys (names and scopes, never secrets)")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    add_arguments(listing, "keys")
    listing.set_defaults(func=cmd_keys)

    revoke = actions.add_parser("revoke", help="delete a key by name")
    revoke.add_argument("--name", required=True)
    add_arguments(revoke, "keys")
    revoke.set_defaults(func=cmd_keys)
