"""Archive the events stream (``keys.EVENTS``) into Parquet through a consumer group.

Delivery is at-least-once and nothing is acknowledged before it is durable:

1. On start, and after a lost connection, the consumer re-reads its own
   pending entries (``XREADGROUP`` from id ``0``: delivered before a crash,
   or to a read whose connection was lost, never acknowledged), then claims
   entries other consumers left idle for ``claim_idle`` seconds (``XAUTOCLAIM``),
   then reads new entries (``>``).
2. Entries are buffered until ``batch`` of them or ``flush_interval`` seconds
   have gone by, then written (``store.write_events``: temp file, fsync,
   rename, fsync of the folder) and only then ``XACK``-ed. The read of the
   next batch is sent before a batch is written, so Redis builds it
   meanwhile (not with a client whose pool allows one connection); its
   entries are pending from then on, like any read's.

A crash between the write and the ack re-archives those entries (and the
batch read ahead) on restart: duplicates, removed downstream by event id.
Pending entries the stream has trimmed (``MAXLEN``) cannot be archived;
they are acked, counted as ``lost`` and logged as a warning.

Progress (events, files, rate) and the group's lag (``XINFO GROUPS``) are
logged after every flush on the ``gateway.pipeline.archive`` logger.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import redis

from gateway.config import DEFAULTS
from gateway.errors import BackendUnavailable
from gateway.pipeline.events import EventColumns
from gateway.pipeline.store import write_events
from gateway.pipeline.stream_entries import Entries, GroupLink
from gateway.supervisor import keys

log = logging.getLogger("gateway.pipeline.archive")

_UNAVAILABLE = (redis.ConnectionError, redis.TimeoutError)


def default_consumer() -> str:
    """Stable across restarts on one host, so a restart finds its own pending entries."""
    return socket.gethostname() or "archive"


@dataclass(frozen=True)
class ArchiveOptions:
    out: Path
    # the defaults are those of ``hero-gateway archive`` (gateway/config/pipeline.py)
    group: str = DEFAULTS.archive_group
    consumer: str = field(default_factory=default_consumer)
    #: Most entries per flush (and per file, for one hour's worth).
    batch: int = DEFAULTS.archive_batch
    #: Flush a partial batch once its oldest entry has waited this long (s).
    flush_interval: float = DEFAULTS.archive_flush_interval
    #: Longest single blocking read (ms); bounds how late a stop is noticed.
    block_ms: int = 1000
    #: Claim other consumers' pending entries idle this long (s); 0 turns it off.
    claim_idle: float = DEFAULTS.archive_claim_idle

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise ValueError("batch must be at least 1")
        if self.flush_interval < 0:
            raise ValueError("flush interval must be >= 0")
        if not self.group or not self.consumer:
            raise ValueError("group and consumer names must not be empty")


@dataclass
class ArchiveStats:
    events: int = 0
    files: int = 0
    flushes: int = 0
    #: Entries found pending at start or claimed from idle consumers.
    recovered: int = 0
    #: Pending entries whose data was already trimmed from the stream.
    lost: int = 0
    lag: int | None = None
    pending: int | None = None
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


class Archiver:
    """One archive consumer. Not thread-safe; ``stop`` may be set from anywhere."""

    def __init__(self, client: redis.Redis, options: ArchiveOptions) -> None:
        self.client = client
        self._link = GroupLink(client, options.group, options.consumer)
        self.options = options
        self.stats = ArchiveStats()
        self._buffer = EventColumns()
        self._buffer_ids: list[str] = []
        self._buffer_since = 0.0
        self._unacked: list[str] = []
        #: Ids already counted lost (XAUTOCLAIM reports deleted entries it meets again).
        self._lost_ids: set[str] = set()
        self._last_claim = 0.0
        self._started = time.monotonic()

    # -- redis ---------------------------------------------------------------

    def _read(self, start: str, block_ms: int | None) -> Entries:
        """The read in flight (sent ahead by ``_step``), else a new one."""
        if not self._link.in_flight:
            count = max(1, self.options.batch - len(self._buffer))
            self._link.send_read(start, count, block_ms)
        try:
            return self._link.read()
        except redis.ResponseError as exc:
            # NOGROUP: the group was destroyed; UNBLOCKED: the stream was
            # deleted (with its group) while the read waited on it
            if "NOGROUP" not in str(exc) and "UNBLOCKED" not in str(exc):
                raise
            log.warning("archive group gone; made again", extra={"group": self.options.group})
            self._link.ensure_group()
            return [], []

    def _ack(self) -> None:
        while self._unacked:
            chunk = self._unacked[:10_000]
            self._link.ack(chunk)
            del self._unacked[: len(chunk)]

    # -- buffering -----------------------------------------------------------

    def _take(self, ids: list[str], flats: list[list[str] | None]) -> None:
        """Buffer entries (ids and flat field lists) in one go; the trimmed ones
        (no fields) are counted lost and acked."""
        if not all(flats):
            lost = [i for i, flat in zip(ids, flats, strict=True) if not flat]
            ids = [i for i, flat in zip(ids, flats, strict=True) if flat]
            flats = [flat for flat in flats if flat]
            self._count_lost(lost)
            self._unacked.extend(lost)
        if not ids:
            return
        if not self._buffer_ids:
            self._buffer_since = time.monotonic()
        self._buffer.extend_flat(ids, cast(list[list[str]], flats))
        self._buffer_ids += ids

    def _count_lost(self, lost: list[str]) -> None:
        """Pending entries whose data the stream trimmed before they were archived."""
        self._lost_ids.update(lost)
        self.stats.lost += len(lost)
        log.warning(
            "%d pending events were trimmed from the stream before they were archived",
            len(lost),
            extra={"lost": len(lost), "first": lost[0], "last": lost[-1]},
        )

    def _due(self, final: bool) -> bool:
        if not self._buffer_ids:
            return False
        if final or len(self._buffer_ids) >= self.options.batch:
            return True
        return time.monotonic() - self._buffer_since >= self.options.flush_interval

    def flush(self) -> None:
        """Write the buffer durably, then acknowledge it (and anything still unacked)."""
        if self._buffer_ids:
            files = write_events(self.options.out, self._buffer)
            self.stats.events += len(self._buffer_ids)
            self.stats.files += len(files)
            self.stats.flushes += 1
            self._unacked.extend(self._buffer_ids)
            self._buffer = EventColumns()
            self._buffer_ids = []
            self._ack()
            lag = self._link.lag()
            if lag is not None:
                self.stats.lag, self.stats.pending = lag
            log.info(
                "archived events: %d in %d files, lag %s, pending %s, %.0f events/s",
                self.stats.events,
                self.stats.files,
                self.stats.lag,
                self.stats.pending,
                self._rate(),
                extra={
                    "events": self.stats.events,
                    "files": self.stats.files,
                    "batch_files": len(files),
                    "lag": self.stats.lag,
                    "pending": self.stats.pending,
                    "rate": round(self._rate(), 1),
                },
            )
        else:
            self._ack()

    def _rate(self) -> float:
        elapsed = time.monotonic() - self._started
        return self.stats.events / elapsed if elapsed > 0 else 0.0

    # -- phases --------------------------------------------------------------

    def _recover_own(self) -> None:
        """Re-read this consumer's pending entries (delivered, never acked): at
        start, and after a lost connection, whose read in flight may have
        delivered a batch nobody took. Those in hand (buffered, or written
        and not acked yet) are not taken twice."""
        in_hand = set(self._buffer_ids).union(self._unacked)
        position = "0"
        while True:
            ids, flats = self._read(position, None)
            if not ids:
                return
            position = ids[-1]
            if in_hand:
                new = [k for k, i in enumerate(ids) if i not in in_hand]
                ids, flats = [ids[k] for k in new], [flats[k] for k in new]
            self.stats.recovered += len(ids)
            self._take(ids, flats)
            if self._due(False):
                self.flush()

    def _claim_idle(self) -> None:
        """Take over entries other consumers left pending for ``claim_idle`` seconds."""
        if self.options.claim_idle <= 0:
            return
        self._last_claim = time.monotonic()
        start = "0-0"
        min_idle = int(self.options.claim_idle * 1000)
        while True:
            count = max(1, self.options.batch - len(self._buffer))
            try:
                reply = self.client.xautoclaim(
                    keys.EVENTS,
                    self.options.group,
                    self.options.consumer,
                    min_idle,
                    start,
                    count=count,
                )
            except redis.ResponseError as exc:
                if "NOGROUP" in str(exc):
                    return
                raise
            start, claimed = str(reply[0]), list(reply[1])
            deleted = [
                str(i) for i in (reply[2] if len(reply) > 2 else []) if str(i) not in self._lost_ids
            ]
            if claimed:
                self.stats.recovered += len(claimed)
                log.info(
                    "claimed %d idle pending events", len(claimed), extra={"claimed": len(claimed)}
                )
                self._take(
                    [str(entry[0]) for entry in claimed],
                    [
                        [x for pair in entry[1].items() for x in pair] if entry[1] else None
                        for entry in claimed
                    ],
                )
            if deleted:
                self._count_lost(deleted)
            if self._due(False):
                self.flush()
            if start in ("0-0", "0"):
                return

    def run(
        self,
        *,
        once: bool = False,
        max_seconds: float | None = None,
        stop: threading.Event | None = None,
    ) -> ArchiveStats:
        """Archive until ``stop`` is set, ``max_seconds`` pass, or (``once``) the stream is drained.

        Redis going away is retried with backoff, except with ``once`` where it
        raises ``BackendUnavailable``. Whatever is buffered is flushed on the way out.
        """
        self._started = time.monotonic()
        deadline = None if max_seconds is None else self._started + max_seconds
        stop = stop or threading.Event()
        delay = 0.1
        recovered = resumed = False  # resumed: started once already
        try:
            while not stop.is_set():
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                try:
                    if not recovered:
                        self._start(resumed)
                        recovered = resumed = True
                    if self._step(now, deadline, once):
                        break
                    delay = 0.1
                except _UNAVAILABLE as exc:
                    self._link.abandon()  # what its read delivered is pending: taken back
                    recovered = False
                    if once:
                        raise BackendUnavailable("Redis is unavailable") from exc
                    log.warning(
                        "archive lost redis; retrying",
                        extra={"error": type(exc).__name__, "retry_in": round(delay, 2)},
                    )
                    stop.wait(delay)
                    delay = min(delay * 2, 5.0)
            try:
                if self._link.in_flight:  # a read sent ahead: archived, not left pending
                    self._take(*self._read(">", None))
                self.flush()
            except _UNAVAILABLE as exc:
                raise BackendUnavailable("Redis is unavailable") from exc
        finally:
            self._link.abandon()
            self.stats.seconds = time.monotonic() - self._started
        self._log_stopped()
        return self.stats

    def _start(self, resumed: bool) -> None:
        """Make sure the group exists, then take back what was left pending
        (``resumed``: after a lost connection)."""
        self._link.ensure_group()
        self._recover_own()
        self._claim_idle()
        log.info(
            "archive %s: group %s, consumer %s, %d pending recovered",
            "resumed" if resumed else "started",
            self.options.group,
            self.options.consumer,
            self.stats.recovered,
            extra={
                "group": self.options.group,
                "consumer": self.options.consumer,
                "out": str(self.options.out),
                "recovered": self.stats.recovered,
            },
        )

    def _step(self, now: float, deadline: float | None, once: bool) -> bool:
        """One read of new entries (and the acks and claims that are due);
        True when ``once`` found the stream drained."""
        if self._unacked:
            self._ack()
        if self.options.claim_idle > 0 and now - self._last_claim >= self.options.claim_idle:
            self._claim_idle()
        ids, flats = self._read(">", None if once else self._block(now, deadline))
        self._take(ids, flats)
        drained = once and not ids
        if self._due(drained):
            # Redis builds the next batch while this one is written (on a
            # connection of its own: not with a pool of one)
            if not drained and self._link.reads_ahead:
                block = None if once else self._block(now, deadline, buffered=False)
                self._link.send_read(">", self.options.batch, block)
            self.flush()
        return drained

    def _log_stopped(self) -> None:
        log.info(
            "archive stopped: %d events in %d files, %d recovered, %d lost, lag %s",
            self.stats.events,
            self.stats.files,
            self.stats.recovered,
            self.stats.lost,
            self.stats.lag,
            extra={
                "events": self.stats.events,
                "files": self.stats.files,
                "recovered": self.stats.recovered,
                "lost": self.stats.lost,
                "lag": self.stats.lag,
                "seconds": round(self.stats.seconds, 3),
            },
        )

    def _block(self, now: float, deadline: float | None, *, buffered: bool = True) -> int:
        """Until the buffer's flush is due (not with ``buffered=False``: a read
        sent ahead of a flush), the deadline, or ``block_ms``."""
        wait = self.options.block_ms / 1000
        if buffered and self._buffer_ids:
            wait = min(wait, self._buffer_since + self.options.flush_interval - now)
        if deadline is not None:
            wait = min(wait, deadline - now)
        return max(1, int(wait * 1000))
