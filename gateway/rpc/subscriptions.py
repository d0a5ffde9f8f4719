"""One connection's subscriptions: supervisor feeds pumped out as ``job.event``.

The supervisor owns the events reader and each feed's bounded buffer; this
module only moves events from a feed to the socket, one task per
subscription, and shapes each event as the contract's Event. Sending is
awaited (backpressure), so a client that does not read makes its feed's
buffer fill up; the supervisor then cuts the feed off and the connection is
closed with a clear reason instead of buffering without bound.

The supervisor's feed already holds to the caller (a user-scope subscription
gets only events carrying its caller_id) and to the order (strictly
increasing stream ids, each once, across a ``since`` replay's hand-over).
One rule lives here, because only the transport knows when a reply is out:
a subscription's first ``job.event`` is sent only after the answer to its
  ``job.subscribe`` has been sent, so a client never sees events for a
  subscription id it has not been given yet. The transport opens that gate:
  it sets ``reply_sent`` (a context variable, so the handler needs no extra
  argument) to an event it fires once the frame's reply is out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from contextvars import ContextVar

from gateway.errors import Overloaded
from gateway.rpc.backends import EventFeed, EventSource
from gateway.rpc.context import Notify

log = logging.getLogger("gateway.rpc.subscriptions")

#: The notification that carries events (``x-notifications`` in the contract).
EVENT_METHOD = "job.event"
#: Each subscription may buffer up to the supervisor's limit, so the count is capped too.
MAX_SUBSCRIPTIONS = 64

#: Set by the transport around a frame's handlers; fired once the frame's reply
#: has been sent. Unset (None): events may flow at once.
reply_sent: ContextVar[asyncio.Event | None] = ContextVar("reply_sent", default=None)

#: Why a feed ended without being unsubscribed: the connection gets closed with this.
Lost = Callable[[str], Awaitable[None]]


class ConnectionSubscriptions:
    """``context.Subscriptions`` for one WebSocket connection."""

    def __init__(self, source: EventSource, notify: Notify, lost: Lost) -> None:
        self._source = source
        self._notify = notify
        self._lost = lost
        self._feeds: dict[str, tuple[EventFeed, asyncio.Task[None]]] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._feeds)

    async def subscribe(
        self,
        *,
        job_ids: Collection[str] | None,
        script_type: str | None,
        caller_id: str | None,
        since: str | None,
    ) -> str:
        if len(self._feeds) >= MAX_SUBSCRIPTIONS:
            raise Overloaded(
                f"At most {MAX_SUBSCRIPTIONS} subscriptions per connection",
                {"limit": MAX_SUBSCRIPTIONS},
            )
        feed = await self._source.subscribe(
            job_ids=list(job_ids) if job_ids else None,
            script_type=script_type,
            caller_id=caller_id,
            since=since,
        )
        if self._closed:  # the connection ended while the supervisor answered
            self._source.unsubscribe(feed.id)
            return feed.id
        gate = reply_sent.get()
        task = asyncio.create_task(self._pump(feed, gate), name=f"sub-{feed.id}")
        self._feeds[feed.id] = (feed, task)
        return feed.id

    async def unsubscribe(self, subscription: str) -> bool:
        entry = self._feeds.pop(subscription, None)
        if entry is None:
            return False
        feed, task = entry
        self._source.unsubscribe(feed.id)
        task.cancel()  # no event of it may follow the answer to unsubscribe
        return True

    async def close(self) -> None:
        """End every subscription (the connection is gone)."""
        self._closed = True
        entries = list(self._feeds.values())
        self._feeds.clear()
        for feed, task in entries:
            self._source.unsubscribe(feed.id)
            task.cancel()
        for _, task in entries:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _pump(self, feed: EventFeed, gate: asyncio.Event | None) -> None:
        try:
            if gate is not None:
                await gate.wait()
            async for event in feed:
                await self._notify(
                    EVENT_METHOD, {"subscription": feed.id, "event": event.to_contract()}
                )
                if feed.overflowed:  # cut off while we waited on the socket: stop now
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            if not feed.overflowed:
                log.exception("subscription failed", extra={"subscription": feed.id})
        if self._feeds.pop(feed.id, None) is None:
            return  # unsubscribed or closed meanwhile: nothing was lost
        self._source.unsubscribe(feed.id)
        if feed.overflowed:
            log.warning("subscriber too slow, closing", extra={"subscription": feed.id})
            await self._lost("subscriber too slow")
        else:
            # e.g. Redis went away during a replay: the client must resubscribe with since
            await self._lost("subscription lost, resubscribe with since")
