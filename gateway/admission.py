"""Budgets for connections nobody is known on yet: per client, and in all.

A connection costs the gateway a slot of ``HERO_MAX_CONNECTIONS`` from the
moment it opens, but says who is on it only later: when a request's headers
are complete (a key in them, or none needed), or, for a WebSocket opened
without a key while keys exist, when it calls ``auth.login``. Until then
it is *unidentified*, and anyone who can reach the port can open such
connections: without a budget, one client holding a few thousand
half-sent requests (each lives up to ``HERO_HEADER_TIMEOUT``) or unlogged
sockets (``HERO_AUTH_TIMEOUT``), and opening new ones as they expire, keeps
every other client out (503).

``Unidentified`` is that budget. A client that is not slow identifies
itself within one round trip, so a connection counts only once it has been
unidentified for ``STALE_AFTER`` seconds (*stale*): a burst of thousands of
connections from one address (every client behind a proxy reconnecting
after a restart) is never refused for being a burst. A client may hold at
most ``per_client`` stale connections and everyone together ``total``; a
connection that goes stale past either is closed then. So the rest of the
connection slots stay for clients that have said who they are.

No connection is refused as it opens, before it could say who it is: a
client with a key, behind the same address as one at its limit (a NAT, a
proxy), is served. What that leaves open is a client that opens more than
``HERO_MAX_CONNECTIONS`` connections every ``STALE_AFTER`` seconds (plus,
for a WebSocket, the ``protocols.CLOSE_HANDSHAKE`` its close may take), or
keeps that many alive with a request every few seconds (a kept-alive
connection idle between requests is not counted: a proxy's pool comes from
one address): a connection or request *rate*, which a firewall or proxy in
front should limit.

A connection whose time came while the event loop lagged (its timer ran
late by half of ``STALE_AFTER`` or more, so its request may be waiting
unread behind the lag) gets that time again: an overloaded gateway never
refuses its clients for its own slowness, and a client that is slow
itself still counts one round later.

A client is its IPv4 address, or its IPv6 /64 (the block one host is
given: an attacker with one has 2^64 addresses); an IPv4-mapped IPv6
address is its IPv4 one. A connection without an IP peer (a unix socket,
reached only from the host) counts in ``total`` only.

One instance is shared by the HTTP protocol (``protocols.HeaderDeadlineH11``:
headers pending) and the app (``rpc.app``: a WebSocket waiting to log in);
the server builds both around it. Both run on the event loop's one thread,
so plain counters do.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
from collections.abc import Callable

log = logging.getLogger("gateway.admission")

#: Seconds a connection may stay unidentified before it counts (module docstring).
STALE_AFTER = 1.0
#: Seconds between two log lines about connections closed past the budget:
#: the first is told at once, the ones after it in one line per period.
LOG_EVERY = 10.0


def client_of(host: str | None) -> str | None:
    """The client a peer address belongs to (module docstring); None when
    there is no address, or it is not an IP address."""
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # a zone (fe80::1%eth0) aside
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class Ticket:
    """One admitted unidentified connection. ``release`` it once the
    connection is identified or gone (a second release does nothing)."""

    __slots__ = ("_budget", "_client", "_timer", "stale")

    def __init__(self, budget: Unidentified, client: str | None, refuse: Callable[[], None]):
        self._budget: Unidentified | None = budget
        self._client = client
        self.stale = False
        self._timer: asyncio.TimerHandle | None = None
        self._wait(refuse)

    def _wait(self, refuse: Callable[[], None]) -> None:
        assert self._budget is not None
        loop = asyncio.get_running_loop()
        due = loop.time() + self._budget.stale_after
        self._timer = loop.call_at(due, self._go_stale, refuse, due)

    def _go_stale(self, refuse: Callable[[], None], due: float) -> None:
        self._timer = None
        budget = self._budget
        if budget is None:
            return
        if asyncio.get_running_loop().time() - due >= budget.stale_after / 2:
            self._wait(refuse)  # the loop lagged: what the client sent may be unread
            return
        if budget.full(self._client):
            self.release()
            budget._refused(self._client)
            refuse()
            return
        self.stale = True
        budget._count(self._client, 1)

    def release(self) -> None:
        budget, self._budget = self._budget, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if budget is not None and self.stale:
            budget._count(self._client, -1)


class Unidentified:
    """The budget of unidentified connections (module docstring)."""

    def __init__(
        self,
        *,
        per_client: int,
        total: int,
        stale_after: float = STALE_AFTER,
        log_every: float = LOG_EVERY,
    ) -> None:
        self.per_client = per_client
        self.total = total
        self.stale_after = stale_after
        self.log_every = log_every
        #: Connections closed for going stale past the limit.
        self.refused = 0
        #: Stale connections per client (an addressless one counts in the total only).
        self._stale: collections.Counter[str] = collections.Counter()
        self._stale_total = 0
        #: Closings per client since the last log line ("-": no address).
        self._unlogged: collections.Counter[str] = collections.Counter()
        self._summing: asyncio.TimerHandle | None = None

    @property
    def stale(self) -> int:
        """Stale connections held now, by everyone."""
        return self._stale_total

    def full(self, client: str | None) -> bool:
        """Whether ``client`` (or everyone together) holds the most stale ones."""
        if self._stale_total >= self.total:
            return True
        return client is not None and self._stale[client] >= self.per_client

    def admit(self, host: str | None, refuse: Callable[[], None]) -> Ticket:
        """A ticket for a new unidentified connection from ``host``; ``refuse``
        closes the connection should it go stale past the limit."""
        return Ticket(self, client_of(host), refuse)

    def _refused(self, client: str | None) -> None:
        self.refused += 1
        self._unlogged[client or "-"] += 1
        if self._summing is None:
            self._tell()

    def _tell(self) -> None:
        """Log the closings since the last line, if any (how many, from how
        many clients, and the one with most), and sum the next ``log_every``
        seconds' into one line."""
        if not self._unlogged:
            self._summing = None
            return
        ((busiest, _),) = self._unlogged.most_common(1)
        log.warning(
            "closed connections left unidentified past the budget",
            extra={
                "closed": self._unlogged.total(),
                "clients": len(self._unlogged),
                "client": busiest,
            },
        )
        self._unlogged.clear()
        loop = asyncio.get_running_loop()
        self._summing = loop.call_later(self.log_every, self._tell)

    def _count(self, client: str | None, step: int) -> None:
        self._stale_total += step
        if client is None:
            return
        self._stale[client] += step
        if not self._stale[client]:
            del self._stale[client]
