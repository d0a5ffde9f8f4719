"""The archive's view of the events stream, read and acknowledged raw for speed.

The archive takes the entries' ids and flat field lists as columns straight
from the unparsed ``XREADGROUP`` reply (no per-entry dicts or copies), so it
reads the reply shapes of RESP2 and RESP3 here. ``GroupLink`` sends its
commands packed by hiredis, and may send a read ahead of taking its reply.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import hiredis
import redis
from redis.connection import ConnectionInterface

from gateway.supervisor import keys

Entries = tuple[list[str], list[list[str] | None]]

log = logging.getLogger("gateway.pipeline.archive")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def raw_entries(reply: Any) -> Entries:
    """The ids and flat field lists (None: trimmed) of an unparsed one-stream
    XREADGROUP reply (RESP2 or RESP3)."""
    if not reply:
        return [], []
    if isinstance(reply, dict):
        streams = list(reply.values())
        entries = streams[0] if streams else []
    else:
        entries = reply[0][1]
    if not entries:
        return [], []
    ids = [entry[0] for entry in entries]
    flats = [entry[1] or None for entry in entries]
    if isinstance(ids[0], bytes):  # a client without decode_responses
        return [_text(i) for i in ids], [[_text(x) for x in f] if f else None for f in flats]
    return ids, flats


def _pack(*args: Any) -> bytes:
    """One command in RESP, packed by hiredis (its stubs type the tuple as one item)."""
    packed: bytes = hiredis.pack_command(args)
    return packed


class GroupLink:
    """One consumer's group on the events stream: its ``XREADGROUP`` and
    ``XACK``, made and looked at.

    Why not redis-py's commands: it packs a command by a Python call per
    argument, about 2 µs per id of an ``XACK`` of 10,000 ids, a fifth of the
    archive's time; hiredis packs the same command in C. And a read may be
    sent ahead (``send_read``) and its reply taken later (``read``), so Redis
    builds the next batch while the archive writes the last one. The
    connections are the client's pool's, so its settings (URL, TLS, timeouts,
    RESP version) apply.
    """

    def __init__(self, client: redis.Redis, group: str, consumer: str) -> None:
        self._client = client
        self._pool = client.connection_pool
        self._group = group
        self._consumer = consumer
        #: The connection a read was sent on, until its reply is taken.
        self._reading: ConnectionInterface | None = None
        #: Whether a read may be sent ahead: it holds a connection while the
        #: acks (and the client's other commands) take another.
        self.reads_ahead = getattr(self._pool, "max_connections", 2) > 1

    def ensure_group(self) -> None:
        """Create the consumer group (and the stream) if missing, from the stream's start."""
        try:
            self._client.xgroup_create(keys.EVENTS, self._group, id="0", mkstream=True)
            log.info("archive group created", extra={"group": self._group})
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def lag(self) -> tuple[int | None, int] | None:
        """The group's lag (None: Redis cannot count it) and pending count
        (``XINFO GROUPS``); None without the stream or the group."""
        try:
            groups = self._client.xinfo_groups(keys.EVENTS)
        except redis.ResponseError:
            return None
        for info in groups:
            if info.get("name") in (self._group, self._group.encode()):
                lag = info.get("lag")
                return (int(lag) if lag is not None else None), int(info.get("pending") or 0)
        return None

    @property
    def in_flight(self) -> bool:
        """A read was sent and its reply not yet taken."""
        return self._reading is not None

    def send_read(self, start: str, count: int, block_ms: int | None) -> None:
        """Send ``XREADGROUP`` from ``start`` (``>``: new entries; an id: this
        consumer's pending ones after it); ``read`` takes the reply."""
        args: list[Any] = ["XREADGROUP", "GROUP", self._group, self._consumer, "COUNT", count]
        if block_ms is not None:
            args += ["BLOCK", block_ms]
        args += ["STREAMS", keys.EVENTS, start]
        self._reading = self._send(_pack(*args))

    def read(self) -> Entries:
        """The reply of the read in flight (see ``raw_entries``)."""
        conn, self._reading = self._reading, None
        if conn is None:
            raise RuntimeError("no read in flight")
        return raw_entries(self._reply(conn))

    def abandon(self) -> None:
        """Drop a read in flight with its connection (after an error elsewhere):
        what it delivered stays pending, for a restart or a claim to take."""
        conn, self._reading = self._reading, None
        if conn is not None:
            conn.disconnect()
            self._pool.release(conn)

    def ack(self, ids: Sequence[str]) -> None:
        """``XACK`` these ids (one command: callers keep it to about 10,000)."""
        self._reply(self._send(_pack("XACK", keys.EVENTS, self._group, *ids)))

    def _send(self, packed: bytes) -> ConnectionInterface:
        """A pool connection with ``packed`` sent on it (back in the pool, closed,
        when the send failed)."""
        conn = self._pool.get_connection()
        try:
            conn.send_packed_command([packed])
        except BaseException:
            conn.disconnect()
            self._pool.release(conn)
            raise
        return conn

    def _reply(self, conn: ConnectionInterface) -> Any:
        """One reply, the connection back to the pool: kept after an error reply,
        closed after anything else went wrong (its stream is out of step)."""
        try:
            return conn.read_response()
        except redis.ResponseError:
            raise
        except BaseException:
            conn.disconnect()
            raise
        finally:
            self._pool.release(conn)
