"""uvicorn's HTTP and WebSocket protocols, with the deadlines and budget they lack.

- Headers: uvicorn's h11 protocol waits forever for a request's headers (its
  keep-alive timeout starts only after a response), so a client that sends
  half a request line holds a connection for good. ``HeaderDeadlineH11``
  closes a connection that has not completed a request's headers within
  ``header_timeout`` seconds of opening or of its last response.
- Reading: a client that reads nothing of what it asked for (a pile of
  pipelined requests of a big document, a tiny receive window) kept its
  connection past every timeout, uvicorn waiting for the socket to drain.
  ``HeaderDeadlineH11`` aborts a connection whose writes have been paused
  (more than the transport's 64 KiB high-water mark unsent, beyond what the
  kernel holds) for ``header_timeout``, and one being closed (keep-alive
  timeout, ``Connection: close``, a refusal) whose last bytes have waited
  as long: asyncio waits for a closing transport to drain for ever.
- Who holds them: each such wait counts in the budget of unidentified
  connections (``admission.Unidentified``), from the moment the connection
  opens, or the first byte of its next request arrives, until the
  request's headers are complete: one that stays unidentified past its
  client's limit is answered 503 and closed. (A kept-alive connection idle
  between requests is not counted: a proxy's pool of upstream connections
  comes from one address, and uvicorn's keep-alive timeout ends them.)
- Closing: when the app is done with a WebSocket whose peer does not read,
  uvicorn closes the transport, and asyncio keeps a closing transport open
  until its write buffer drains, which for that peer is never.
  ``GracefulWebSocketProtocol`` aborts the socket if it is still open
  ``close_timeout`` seconds after the app returned. That is also how long a
  peer gets to answer a close frame (``CLOSE_HANDSHAKE``, not uvicorn's 10 s,
  which let each socket the budget closed keep its slot ten seconds more).
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
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from gateway.admission import Ticket, Unidentified
from gateway.errors import Overloaded

#: What a connection refused by the budget is sent, before it is closed: the
#: app's 503 for too many connections (``rpc.app``), spelled out here since
#: nothing of the request has been read.
_REFUSAL_BODY = (
    b'{"jsonrpc":"2.0","error":{"code":%d,"message":"Too many unidentified connections"},'
    b'"id":null}' % Overloaded.code
)
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"retry-after: 1\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
    % (len(_REFUSAL_BODY), _REFUSAL_BODY)
)


class HeaderDeadlineH11(H11Protocol):
    """h11 with a deadline for each request's headers (``header_timeout``),
    each wait counted in ``unidentified`` (when given)."""

    header_timeout = 10.0
    unidentified: Unidentified | None = None
    _header_timer: asyncio.TimerHandle | None = None
    _stall_timer: asyncio.TimerHandle | None = None
    _drain_timer: asyncio.TimerHandle | None = None
    _ticket: Ticket | None = None
    #: The request being served when the ticket was taken: a new one means
    #: the headers the ticket waited for are complete.
    _ticket_cycle: RequestResponseCycle | None = None

    def connection_made(  # type: ignore[override]  # as uvicorn's own
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._unidentified()
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._ticket is None and self._between_requests():
            self._unidentified()  # the first bytes of a next request
        super().data_received(data)
        if self._ticket is not None and self.cycle is not self._ticket_cycle:
            self._identified()  # a request's headers are complete

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request
        self._arm()
        self._watch_drain()
        if self._between_requests() and self.conn.trailing_data[0]:
            self._unidentified()  # part of a next request waits: counted as it would be

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._identified()  # the app counts a socket that must still log in
        self._unwatch_writes()  # the WebSocket protocol's socket now
        super().handle_websocket_upgrade(event)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.header_timeout, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _watch_drain(self) -> None:
        """Bytes a response left unsent: looked at again in ``header_timeout``."""
        if self._drain_timer is None and self.transport.get_write_buffer_size():
            self._drain_timer = self.loop.call_later(self.header_timeout, self._drained)

    def _drained(self) -> None:
        """A closing connection whose last bytes are still unsent is given up
        on; an open one still holding some is looked at again."""
        self._drain_timer = None
        if self.transport.get_protocol() is not self:
            return
        if self.transport.is_closing() and self.transport.get_write_buffer_size():
            self.transport.abort()
        else:
            self._watch_drain()

    def _unwatch_writes(self) -> None:
        for timer in (self._stall_timer, self._drain_timer):
            if timer is not None:
                timer.cancel()
        self._stall_timer = self._drain_timer = None

    def _stalled(self) -> None:
        """The client has read nothing for ``header_timeout``: given up on."""
        self._stall_timer = None
        if self.transport.get_protocol() is self:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwatch_writes()
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._identified()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return not self.transport.is_closing() and (
            self.cycle is None or self.cycle.response_complete
        )

    def _unidentified(self) -> None:
        """Take a ticket for the headers now awaited."""
        if self.unidentified is None or self._ticket is not None:
            return
        host = self.client[0] if self.client else None
        self._ticket = self.unidentified.admit(host, self._refuse)
        self._ticket_cycle = self.cycle

    def _identified(self) -> None:
        if self._ticket is not None:
            self._ticket.release()
            self._ticket = None

    def _refuse(self) -> None:
        self._ticket = None
        if not self.transport.is_closing():
            self.transport.write(REFUSAL)
            self.transport.close()

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


def http_protocol(
    header_timeout: float, unidentified: Unidentified | None = None
) -> type[HeaderDeadlineH11]:
    """The h11 protocol class with ``header_timeout`` and the budget of
    unidentified connections (uvicorn builds one instance per connection)."""
    settings = {"header_timeout": header_timeout, "unidentified": unidentified}
    return type("HeaderDeadlineH11", (HeaderDeadlineH11,), settings)


#: Seconds a WebSocket peer gets to answer our close frame (or to stop
#: sending, after a failure) before its socket is aborted.
CLOSE_HANDSHAKE = 2.0


class GracefulWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol that lets a close frame arrive and
    never outlives its app by long."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.close_timeout = CLOSE_HANDSHAKE

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
