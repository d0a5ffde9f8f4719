"""admission: the budget of unidentified connections, on a real event loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from gateway.admission import Ticket, Unidentified, client_of

STALE = 0.2


@pytest.mark.parametrize(
    ("host", "client"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("fe80::1%eth0", "fe80::/64"),
        (None, None),
        ("", None),
        ("not-an-address", None),
    ],
)
def test_a_client_is_an_ipv4_address_or_an_ipv6_64(host: str | None, client: str | None) -> None:
    assert client_of(host) == client


class Closed:
    """What ``refuse`` did: the connections it closed."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def hook(self, name: str) -> Callable[[], None]:
        return lambda: self.names.append(name)


def admit(budget: Unidentified, host: str, closed: Closed, name: str) -> Ticket:
    return budget.admit(host, closed.hook(name))


async def test_a_burst_is_admitted_and_only_what_goes_stale_counts() -> None:
    """Fresh connections are never refused; once stale, a client keeps at most
    ``per_client`` and the rest are closed, and so is a new one that stays
    unidentified, while another client's is not."""
    budget = Unidentified(per_client=3, total=100, stale_after=STALE)
    closed = Closed()
    tickets = [admit(budget, "192.0.2.1", closed, f"c{n}") for n in range(10)]
    assert budget.stale == 0
    await asyncio.sleep(STALE * 2)
    assert sorted(closed.names) == sorted(f"c{n}" for n in range(3, 10))
    assert budget.stale == 3 and budget.refused == 7
    admit(budget, "192.0.2.1", closed, "late")
    other = admit(budget, "192.0.2.2", closed, "other")  # another client: its own budget
    await asyncio.sleep(STALE * 2)
    assert closed.names[-1:] == ["late"] and budget.refused == 8
    assert budget.stale == 4  # the first client's 3 and the other's
    tickets[0].release()
    tickets[0].release()  # twice: nothing more
    assert budget.stale == 3
    again = admit(budget, "192.0.2.1", closed, "again")  # room again
    for ticket in [*tickets, other, again]:
        ticket.release()
    assert budget.stale == 0


async def test_identified_in_time_never_counts() -> None:
    budget = Unidentified(per_client=1, total=1, stale_after=STALE)
    closed = Closed()
    for n in range(50):
        admit(budget, "192.0.2.1", closed, f"c{n}").release()
    await asyncio.sleep(STALE * 2)
    assert closed.names == [] and budget.stale == 0 and budget.refused == 0


async def test_the_total_holds_across_clients_and_addressless_peers_count_in_it() -> None:
    budget = Unidentified(per_client=10, total=2, stale_after=STALE)
    closed = Closed()
    admit(budget, "192.0.2.1", closed, "a")
    admit(budget, "", closed, "unix")  # no IP peer: in the total only
    admit(budget, "2001:db8::1", closed, "b")
    await asyncio.sleep(STALE * 2)
    assert len(closed.names) == 1 and budget.stale == 2
    admit(budget, "198.51.100.1", closed, "new")
    await asyncio.sleep(STALE * 2)
    assert closed.names[-1] == "new"


async def test_a_lagging_loop_gives_a_connection_its_time_again() -> None:
    """The loop blocked past a connection's time (its request may be waiting
    unread): it is not closed then, but only once it is stale for real."""
    budget = Unidentified(per_client=1, total=10, stale_after=STALE)
    closed = Closed()
    admit(budget, "192.0.2.1", closed, "first")
    admit(budget, "192.0.2.1", closed, "second")
    time.sleep(STALE * 2)  # noqa: ASYNC251  (blocks the loop on purpose: both timers are late)
    await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    assert closed.names == [] and budget.stale == 0
    await asyncio.sleep(STALE * 2)
    assert len(closed.names) == 1 and budget.stale == 1


async def test_closings_are_logged_at_once_then_summed(caplog: pytest.LogCaptureFixture) -> None:
    """A flood is not a line per connection: the first closing is told at
    once, those after it in one line per ``log_every``."""
    budget = Unidentified(per_client=1, total=100, stale_after=STALE, log_every=STALE * 2)
    closed = Closed()
    with caplog.at_level(logging.WARNING, logger="gateway.admission"):
        for n in range(6):
            admit(budget, "192.0.2.1", closed, f"c{n}")
        admit(budget, "192.0.2.9", closed, "another")
        admit(budget, "192.0.2.9", closed, "and-another")
        await asyncio.sleep(STALE * 1.5)
        told = [(r.closed, r.clients, r.client) for r in caplog.records]  # type: ignore[attr-defined]
        assert told == [(1, 1, told[0][2])]  # the first at once, whoever it was
        await asyncio.sleep(STALE * 2)
        told = [(r.closed, r.clients, r.client) for r in caplog.records]  # type: ignore[attr-defined]
        assert told[1] == (5, 2, "192.0.2.1")  # the rest: 4 + 1, the busiest named
        await asyncio.sleep(STALE * 3)
        assert len(caplog.records) == 2  # nothing more to tell: no more lines
