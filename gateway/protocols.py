"""uvicorn's HTTP and WebSocket protocols, with the two deadlines they lack.

- Headers: uvicorn's h11 protocol waits forever for a request's headers (its
  keep-alive timeout starts only after a response), so a client that sends
  half a request line holds a connection for good. ``HeaderDeadlineH11``
  closes a connection that has not completed a request's headers within
  ``header_timeout`` seconds of opening or of its last response.
- Closing: when the app is done with a WebSocket whose peer does not read,
  uvicorn closes the transport, and asyncio keeps a closing transport open
  until its write buffer drains, which for that peer is never.
  ``GracefulWebSocketProtocol`` aborts the socket if it is still open
  ``close_timeout`` seconds after the app returned.
- Failing: on a protocol error (a message over ``ws_max_size``, typically
  while the client is still sending it) uvicorn writes the close frame and
  closes the socket at once. The kernel answers the data still arriving with
  a reset, which destroys the close frame in the client's buffer: the client
  sees 1006, not 1009. ``GracefulWebSocketProtocol`` half-closes instead
  (close frame, then FIN), reads and discards until the client closes its
  side, and aborts only after ``close_timeout``.

The app (``gateway.rpc``) bounds what it can see; these bound what only the
server sees. Passed to ``uvicorn.Config`` by ``gateway.server``.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol


class HeaderDeadlineH11(H11Protocol):
    """h11 with a deadline for each request's headers (``header_timeout``)."""

    header_timeout = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(  # type: ignore[override]  # as uvicorn's own
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        """One timer per connection, re-armed after each response."""
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout, self._expire, self.cycle)

    def _expire(self, armed: RequestResponseCycle | None) -> None:
        """Close unless a request arrived since ``armed`` (or one is being served,
        or the connection became a WebSocket, or is closing already)."""
        self._header_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return
        if self.cycle is armed and (armed is None or armed.response_complete):
            self.transport.close()


def http_protocol(header_timeout: float) -> type[HeaderDeadlineH11]:
    """The h11 protocol class with ``header_timeout`` (uvicorn builds one per connection)."""
    return type("HeaderDeadlineH11", (HeaderDeadlineH11,), {"header_timeout": header_timeout})


class GracefulWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol that lets a close frame arrive and
    never outlives its app by long."""

    async def run_asgi(self) -> None:
        await super().run_asgi()
        if not self.disconnected:
            self.loop.call_later(self.close_timeout, self._abort)

    def handle_parser_exception(self) -> None:
        if self.close_sent:  # failed already: what still arrives is discarded by the parser
            return
        assert self.conn.close_sent is not None
        close = self.conn.close_sent
        self.queue.put_nowait(
            {"type": "websocket.disconnect", "code": close.code, "reason": close.reason}
        )
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        if self.conn.eof_sent and self.transport.can_write_eof():
            # failed (not just closing, as after invalid UTF-8): the connection
            # parses nothing more, so nothing is written after this FIN
            self.transport.write_eof()
        if self.read_paused:  # keep draining the client's data: unread data means a reset
            self.read_paused = False
            self.transport.resume_reading()
        self.close_timer = self.loop.call_later(self.close_timeout, self._abort)

    def _abort(self) -> None:
        if not self.disconnected:
            self.transport.abort()
