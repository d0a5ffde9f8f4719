"""Answering one frame under a budget: the in-flight cap shared by both transports.

A WebSocket connection (and each HTTP request) has a budget of requests that
may run at once. Every Request element of a frame takes one unit; an element
that finds none left is answered -32006 on its own, without running (a
notification over budget is dropped, since it cannot be answered). The units
come back when the whole frame's reply has been written (on a WebSocket,
see ``outbox``; an HTTP request's budget ends with it), so a batch is one unit
of work per element for as long as it runs and waits to go out, and a client
that does not read cannot have more than the budget answered and parked.
"""

from __future__ import annotations

from gateway.errors import Overloaded
from gateway.rpc.messages import Element, Failure, Frame

#: An element to answer: a Request to run, a Failure that is its own answer,
#: or None for a notification that was refused (no answer, no run).
Admitted = Element | None

BUSY_MESSAGE = "Too many requests in flight on this connection"
SHUTTING_DOWN_MESSAGE = "Server is shutting down"


class Budget:
    """How many requests may still start (one per connection, or per HTTP request)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.used = 0

    def take(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def give(self, count: int) -> None:
        self.used = max(0, self.used - count)


def admit(frame: Frame, budget: Budget, refuse: str | None = None) -> tuple[list[Admitted], int]:
    """The frame's elements with the ones over budget answered -32006, and the
    number of units taken (to ``give`` back once the frame is answered).
    ``refuse`` refuses every request with that message (e.g. while shutting down)."""
    admitted: list[Admitted] = []
    taken = 0
    for element in frame.elements:
        if isinstance(element, Failure):
            admitted.append(element)
        elif refuse is None and budget.take():
            admitted.append(element)
            taken += 1
        elif element.notification:
            admitted.append(None)
        else:
            data = {"limit": budget.limit} if refuse is None else None
            admitted.append(Failure(element.id, Overloaded.code, refuse or BUSY_MESSAGE, data))
    return admitted, taken
