"""What the RPC layer needs from the layers below, as typed protocols.

The handlers depend on these shapes, not on ``gateway.supervisor`` itself, so
this package never imports redis and its tests need no Redis. Every method
raises ``gateway.errors`` classes for failures a client should see. Methods
are declared as returning ``Awaitable`` (not ``async def``) so decorated
coroutine functions (e.g. the supervisor's ``@guarded``) fit too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.model import Event, JobSpec

JsonObject = dict[str, Any]
#: Shorthands for the JSON shapes the protocol passes around.
JsonObjects = list[JsonObject]
JobIds = list[str]


class Supervisor(Protocol):
    """The supervisor's public API (``gateway.supervisor.Supervisor``)."""

    def create(self, spec: JobSpec) -> Awaitable[JsonObject]:
        """``{"job_id", "status"}``."""
        ...

    def start(self, job_id: str, caller_id: str | None = None) -> Awaitable[JsonObject]:
        """``{"job_id", "status", "queue"}``; ``caller_id`` as for ``status``."""
        ...

    def run(self, spec: JobSpec, wait: float | None = None) -> Awaitable[JsonObject]:
        """A JobResult once the job ended; ``WaitTimeout`` if it did not in time."""
        ...

    def output(
        self, job_id: str, wait: float | None = None, caller_id: str | None = None
    ) -> Awaitable[JsonObject]:
        """A JobResult; waits for the end when ``wait`` is given. ``caller_id``:
        only a job of that caller's (a user's) answers, to the wait's end."""
        ...

    def status(self, job_id: str, caller_id: str | None = None) -> Awaitable[JsonObject]:
        """``{"job_id", "status"}``. ``caller_id``, here and in ``get``, ``stop``,
        ``delete`` and ``logs``: only a job of that caller's (a user's) answers,
        checked in the same read or Function as what it answers."""
        ...

    def get(self, job_id: str, caller_id: str | None = None) -> Awaitable[JsonObject]:
        """The contract's Job."""
        ...

    def list_jobs(
        self,
        status: str | None = None,
        script_type: str | None = None,
        caller_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Awaitable[JsonObject]:
        """``{"jobs": [Job], "next_cursor": str | None}``."""
        ...

    def stop(self, job_id: str, caller_id: str | None = None) -> Awaitable[JsonObject]:
        """``{"job_id", "status"}``."""
        ...

    def delete(self, job_id: str, caller_id: str | None = None) -> Awaitable[JsonObject]:
        """``{"deleted": bool}``."""
        ...

    def logs(self, job_id: str, caller_id: str | None = None) -> Awaitable[JsonObject]:
        """``{"job_id", "logs"}``."""
        ...

    def queue_stats(self, script_type: str | None = None) -> Awaitable[JsonObjects]:
        """One QueueStats per work queue."""
        ...

    def actors(self, script_type: str | None = None) -> Awaitable[JsonObjects]:
        """One Actor per live presence key."""
        ...

    def report(self) -> Awaitable[JsonObject | None]:
        """The latest pipeline report, None before the first."""
        ...

    def dlq_list(self, script_type: str | None = None, limit: int = 50) -> Awaitable[JsonObjects]:
        """DlqEntry objects, oldest first."""
        ...

    def dlq_replay(self, script_type: str, job_ids: JobIds | None = None) -> Awaitable[JobIds]:
        """The ids of the jobs put back on their work queue."""
        ...

    def purge(self, status: str = "finished", older_than: float = 0.0) -> Awaitable[JsonObject]:
        """``{"deleted": n}``: ended jobs of ``status`` removed."""
        ...


class KeyVerifier(Protocol):
    """Checks an API key (the key store lives below this layer)."""

    def verify(self, key: str) -> Awaitable[Mapping[str, Any] | None]:
        """``{"name", "scope", "caller_id", "key_id"}`` for a valid key, else None."""
        ...


class KeyStore(KeyVerifier, Protocol):
    """What the server needs of the key store: verify a key, whether any key
    exists (a server with keys requires every client to authenticate), and
    which keys are revoked (their connections end)."""

    def exist(self) -> Awaitable[bool]:
        """True once at least one API key exists."""
        ...

    def revoked(self, key_ids: Collection[str]) -> Awaitable[frozenset[str]]:
        """Which of these key ids no longer name a key."""
        ...

    def watch_revocations(
        self, on_revoked: Callable[[frozenset[str] | None], None]
    ) -> Awaitable[None]:
        """Until cancelled: ``on_revoked(key_ids)`` as keys are revoked, and
        ``on_revoked(None)`` whenever revocations may have gone unheard."""
        ...


class EventFeed(Protocol):
    """One subscription held by the supervisor (``gateway.supervisor.Subscription``).

    Iterating yields matching events in stream order and ends when the feed is
    closed; it raises when the subscriber fell behind its bounded buffer, and
    then ``overflowed`` is true (the exception class lives below this layer)."""

    @property
    def id(self) -> str: ...

    @property
    def overflowed(self) -> bool: ...

    def __aiter__(self) -> AsyncIterator[Event]: ...

    def close(self) -> None: ...


class EventSource(Protocol):
    """Live job events, fed by the supervisor's one events reader per process."""

    def subscribe(
        self,
        *,
        job_ids: JobIds | None = None,
        script_type: str | None = None,
        caller_id: str | None = None,
        since: str | None = None,
    ) -> Awaitable[EventFeed]:
        """A new feed, of ``caller_id``'s jobs only when given, in stream order,
        each event once; ``since`` (a stream id) replays what came after it first."""
        ...

    def unsubscribe(self, subscription_id: str) -> bool:
        """Close a feed; false if there is none with that id."""
        ...


class MetricsSink(Protocol):
    """Where call latencies go and ``GET /metrics`` comes from (gateway/metrics.py)."""

    content_type: str

    def observe_call(self, method: str, seconds: float, error_code: int | None) -> None: ...

    async def render(self) -> bytes: ...


class ServedSupervisor(Supervisor, EventSource, Protocol):
    """Everything the running server asks of the supervisor."""

    def ping(self) -> Awaitable[bool]:
        """Whether Redis answers (never raises)."""
        ...


@dataclass(frozen=True, slots=True)
class Backends:
    """Everything the method handlers call. ``keys`` is None when the server
    runs without API keys: then every connection is anonymous."""

    supervisor: Supervisor
    keys: KeyVerifier | None = None
    #: The configured script types, enumerated in the served contract (rpc.discover).
    script_types: tuple[str, ...] = ()
    #: Those of them in stream mode (``HERO_STREAM_TYPES``), which a JobSpec must suit.
    stream_types: tuple[str, ...] = ()

    def job_spec(self, data: JsonObject) -> JobSpec:
        """The JobSpec of a ``job`` param the contract already checked: only what
        a schema cannot know (the configured types, stream mode) is checked here."""
        return JobSpec.from_valid(data, self.script_types, self.stream_types)
