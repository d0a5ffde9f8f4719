"""A WebSocket client on a plain socket, for clients no library would be.

The tests that play a hostile client need control a library does not give:
never reading (the socket's receive buffer stays small and ``recv`` is never
called while writing), sending a message in fragments, stopping halfway
through the HTTP headers. This speaks just enough RFC 6455 for that: the
upgrade, masked client frames, and parsing what the server sent.
"""

from __future__ import annotations

import base64
import os
import socket
import struct
from dataclasses import dataclass

TEXT, CONTINUATION, CLOSE = 0x1, 0x0, 0x8


def upgrade_request(port: int, headers: dict[str, str] | None = None) -> bytes:
    """The HTTP request that upgrades to a WebSocket on ``/ws``."""
    key = base64.b64encode(os.urandom(16)).decode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\n{extra}\r\n"
    ).encode()


def connect(
    port: int,
    *,
    rcvbuf: int | None = None,
    headers: dict[str, str] | None = None,
    source: str | None = None,
) -> socket.socket:
    """A socket upgraded to a WebSocket on ``/ws`` (the 101 read, nothing more).
    ``rcvbuf`` is set before connecting, so the advertised window stays small;
    ``source``: the loopback address to connect from."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if source is not None:
        sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(upgrade_request(port, headers))
    head = b""
    while b"\r\n\r\n" not in head:  # byte by byte: nothing after the 101 is consumed
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError(f"closed during the upgrade: {head!r}")
        head += byte
    status = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status:
        raise ConnectionError(f"upgrade refused: {status!r}")
    return sock


def frame(payload: bytes, opcode: int = TEXT, *, fin: bool = True) -> bytes:
    """One masked client frame."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


@dataclass
class Received:
    texts: int = 0
    close_code: int | None = None
    close_reason: str = ""


def read_until_close(sock: socket.socket, within: float = 30.0) -> Received:
    """Read and parse server frames until a close frame or EOF."""
    sock.settimeout(within)
    buffer = b""
    got = Received()
    while True:
        while True:  # parse what is complete
            if len(buffer) < 2:
                break
            opcode, n, at = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
            if n == 126:
                if len(buffer) < 4:
                    break
                n, at = struct.unpack("!H", buffer[2:4])[0], 4
            elif n == 127:
                if len(buffer) < 10:
                    break
                n, at = struct.unpack("!Q", buffer[2:10])[0], 10
            if len(buffer) < at + n:
                break
            payload, buffer = buffer[at : at + n], buffer[at + n :]
            if opcode == CLOSE:
                got.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                got.close_reason = payload[2:].decode()
                return got
            if opcode == TEXT:
                got.texts += 1
        chunk = sock.recv(1 << 20)
        if not chunk:
            return got
        buffer += chunk
