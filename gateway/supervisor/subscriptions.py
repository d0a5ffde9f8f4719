"""Live job events for subscribers, fed by the shared events reader.

A subscription filters by job ids or script type, and by caller (a user's
subscription sees its own jobs only), and owns a bounded buffer:
a subscriber that cannot keep up is cut off (``overflowed``) instead of
growing memory. ``since`` replays from the stream first, then hands over to
live events without a gap or a duplicate, so a client that reconnects with
the id of the last event it saw misses nothing. Whatever the source, a
subscription hands out events in strictly increasing stream order, each once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping

from redis.exceptions import ResponseError

from gateway.errors import InvalidParams
from gateway.model import LAST_ID, Event, StreamId
from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE, Commands
from gateway.supervisor.replies import entries

_REPLAY_PAGE = 1000


class SubscriptionOverflow(Exception):
    """The subscriber fell further behind than its buffer allows."""


class Subscription:
    def __init__(
        self,
        job_ids: Collection[str] | None,
        script_type: str | None,
        maxsize: int,
        caller_id: str | None = None,
    ) -> None:
        self.id = uuid.uuid4().hex
        self._job_ids = frozenset(job_ids) if job_ids else None
        self._script_type = script_type
        self._caller_id = caller_id
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize)
        self._held: list[Event] | None = None  # live events parked while replaying
        self._replay: asyncio.Task[None] | None = None
        self._floor = StreamId(0, 0)  # events at or before this id were delivered already
        self.overflowed = False
        self.closed = False

    def matches(self, event: Event) -> bool:
        return self.wants(event.job_id, event.caller_id or "", event.script_type)

    def wants_entry(self, fields: Mapping[str, str]) -> bool:
        """``wants``, of a stream entry's fields as Redis sent them (undecoded)."""
        return self.wants(
            fields.get("job_id", ""), fields.get("caller_id", ""), fields.get("script_type", "")
        )

    def wants(self, job_id: str, caller_id: str, script_type: str) -> bool:
        """Whether an event of this job, caller ("" for none) and type is this
        subscription's: asked of a stream entry's fields before it is decoded."""
        if self._job_ids is not None and job_id not in self._job_ids:
            return False
        if self._caller_id is not None and caller_id != self._caller_id:
            return False
        return self._script_type is None or script_type == self._script_type

    def offer(self, event: Event) -> None:
        """A live event: buffered, parked while a replay runs, or the end of a slow subscriber."""
        if self.closed or event.id <= self._floor:
            return
        if self._held is not None and len(self._held) < self._queue.maxsize:
            self._held.append(event)
            return
        try:
            if self._held is not None:
                raise asyncio.QueueFull
            self._queue.put_nowait(event)
            self._floor = event.id
        except asyncio.QueueFull:
            self.overflowed = True
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._replay is not None:
            self._replay.cancel()
        while True:  # make room for the end marker
            try:
                self._queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                self._queue.get_nowait()

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            event = await self._queue.get()
            if event is None:
                if self.overflowed:
                    raise SubscriptionOverflow(self.id)
                return
            yield event


class Subscriptions:
    def __init__(
        self, client: Commands, *, awake: Callable[[], Awaitable[None]], maxsize: int = 1000
    ) -> None:
        """``awake``: the events reader's (``EventReader.awake``), awaited once a
        subscription is in place and before its replay reads the stream."""
        self._client = client
        self._awake = awake
        self._maxsize = maxsize
        self._subs: dict[str, Subscription] = {}
        self._reading = asyncio.Lock()  # one replay page at a time, see _run_replay

        # who may want an event: by job id, by script type, or every event;
        # an event is matched against those few, not against every subscription
        self._by_job: dict[str, dict[str, Subscription]] = {}
        self._by_type: dict[str | None, dict[str, Subscription]] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def _add(self, sub: Subscription) -> None:
        self._subs[sub.id] = sub
        if sub._job_ids is not None:
            for job_id in sub._job_ids:
                self._by_job.setdefault(job_id, {})[sub.id] = sub
        else:
            self._by_type.setdefault(sub._script_type, {})[sub.id] = sub

    def _drop(self, sub: Subscription) -> None:
        self._subs.pop(sub.id, None)
        if sub._job_ids is not None:
            for job_id in sub._job_ids:
                subs = self._by_job.get(job_id)
                if subs is not None:
                    subs.pop(sub.id, None)
                    if not subs:
                        del self._by_job[job_id]
        else:
            subs = self._by_type.get(sub._script_type)
            if subs is not None:
                subs.pop(sub.id, None)
                if not subs:
                    del self._by_type[sub._script_type]

    def on_events(self, events: list[Event]) -> None:
        """Each event goes to the subscriptions indexed under its job id, its
        script type, or none (all events): O(events + deliveries), not
        O(events * subscriptions). Per subscription, events stay in stream order."""
        touched: dict[str, Subscription] = {}
        for event in events:
            for bucket in (
                self._by_job.get(event.job_id),
                self._by_type.get(event.script_type),
                self._by_type.get(None),
            ):
                if not bucket:
                    continue
                for sub in list(bucket.values()):
                    if sub.matches(event):
                        sub.offer(event)
                        touched[sub.id] = sub
        for sub in touched.values():
            if sub.closed:
                self._drop(sub)

    async def subscribe(
        self,
        *,
        job_ids: Collection[str] | None = None,
        script_type: str | None = None,
        caller_id: str | None = None,
        since: str | None = None,
    ) -> Subscription:
        """``caller_id``: only events of that caller's jobs (a user's subscription)."""
        if since is not None:
            try:
                StreamId.parse(since)
            except ValueError:
                raise InvalidParams(
                    "since must be an events stream id like 1700000000000-0"
                ) from None
        sub = Subscription(job_ids, script_type, self._maxsize, caller_id)
        if since is not None:
            sub._held = []  # from the first live event on: the replay goes first
        self._add(sub)
        try:
            await self._awake()
        except BaseException:
            self.unsubscribe(sub.id)
            raise
        if since is None or sub.closed:  # closed: it overflowed while awake() ran
            return sub
        sub._replay = asyncio.create_task(self._run_replay(sub, since), name=f"replay-{sub.id}")
        return sub

    async def _run_replay(self, sub: Subscription, since: str) -> None:
        """Replay runs beside the subscriber and waits for it (backpressure), then
        hands over to the live events parked meanwhile, skipping any already replayed.

        A replay from ``0`` reads the whole stream (100,000 entries by default,
        every caller's): only the entries the subscription wants are decoded,
        and the replays of a gateway read and sift one page at a time each, in
        turn (``_reading``), so many at once cannot hold its CPU for long. A
        replay waiting for its subscriber to read holds no turn."""
        cursor = since
        last = StreamId.parse(since)
        try:
            # after the greatest id there is nothing to read, and Redis refuses
            # the exclusive range that would say so
            while last < LAST_ID:
                async with self._reading:
                    page = entries(
                        await self._client.execute_command(
                            "XRANGE", keys.EVENTS, f"({cursor}", "+", "COUNT", _REPLAY_PAGE
                        )
                    )
                    wanted = [Event.from_entry(i, f) for i, f in page if sub.wants_entry(f)]
                for event in wanted:
                    await sub._queue.put(event)
                if page:
                    last = StreamId.lenient(page[-1][0])
                if len(page) < _REPLAY_PAGE:
                    break
                cursor = page[-1][0]
        except (*UNAVAILABLE, ResponseError):  # a refused read too: never a silent stall
            sub.close()
            return
        held, sub._held = sub._held or [], None
        sub._floor = last  # the reader may still hand over entries the replay sent
        for event in held:
            sub.offer(event)

    def unsubscribe(self, subscription_id: str) -> bool:
        sub = self._subs.get(subscription_id)
        if sub is None:
            return False
        self._drop(sub)
        sub.close()
        return True
