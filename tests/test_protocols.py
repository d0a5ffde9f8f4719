"""The h11 protocol's deadlines (``gateway.protocols``) under a real uvicorn,
where only a small send buffer shows them: on loopback the kernel holds
megabytes of what a client does not read, a WAN peer's socket a few KB.

The server runs in this process, on a listening socket whose send buffer is
8 KB (its connections inherit it), so a 46 KB answer its client never reads
leaves most of itself in the transport, below the 64 KB at which asyncio
pauses writes.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.admission import Unidentified
from gateway.protocols import http_protocol
from tests.helpers import eventually

DEADLINE = 1.0
ANSWER = 46_000


async def big(request: Request) -> Response:
    return Response(b"x" * ANSWER, media_type="application/json")


async def test_a_closing_connection_whose_answer_is_never_read_is_let_go() -> None:
    """Clients that ask once and read nothing: uvicorn's keep-alive timeout
    closes each connection, and asyncio would then wait for its last bytes
    to drain for ever, the connection keeping its slot; they are aborted
    DEADLINE after their answer was left unsent."""
    app = Starlette(routes=[Route("/big", big)])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    config = uvicorn.Config(
        app,
        http=http_protocol(DEADLINE, Unidentified(per_client=32, total=1024)),
        lifespan="off",
        log_config=None,
        timeout_keep_alive=1,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    loop = asyncio.get_running_loop()
    clients: list[socket.socket] = []
    try:

        async def started() -> bool:
            return server.started

        await eventually(started, within=10)
        for _ in range(5):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.setblocking(False)
            await loop.sock_connect(client, listener.getsockname())
            await loop.sock_sendall(client, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(client)
        await asyncio.sleep(0.5)
        held = server.server_state.connections
        assert len(held) == 5
        assert all(p.transport.get_write_buffer_size() for p in held)
        deadline = loop.time() + 1 + DEADLINE + 3  # keep-alive, the deadline, slack
        while server.server_state.connections:
            assert loop.time() < deadline, [
                (p.transport.is_closing(), p.transport.get_write_buffer_size())
                for p in server.server_state.connections
            ]
            await asyncio.sleep(0.1)
    finally:
        for client in clients:
            client.close()
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
        listener.close()
