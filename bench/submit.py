"""Batched submit: many create+start transitions in one pipelined round trip.

A producer that awaits one call per job is bound by its own round trips long
before Redis is; ``Supervisor.submit_many`` (the batch API proposed in
RESULTS.md, "Proposed changes") sends a batch as ``hero_submit_many`` calls
on one pipelined connection, every spec validated exactly as ``create``
validates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.supervisor import Supervisor


async def submit_many(sup: Supervisor, specs: Sequence[Any], *, start: bool = True) -> list[str]:
    """Create (and start) every job of ``specs`` in one pipeline; their statuses."""
    return [str(answer["status"]) for answer in await sup.submit_many(specs, start=start)]
