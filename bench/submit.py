"""Batched submit: many create+start transitions in one pipelined round trip.

The supervisor has no batch API yet (``Supervisor.create``/``start``/``run``
each cost one round trip), and a producer that awaits one call per job is
bound by its own round trips long before Redis is. This is the bench's
version of the batch API proposed for the supervisor (see RESULTS.md,
"Proposed changes"): the same ``hero_submit`` Function call that
``Supervisor.run`` makes (create and start in one transition), sent
``batch`` at a time on one pipelined connection, every spec validated by
``Supervisor.parse`` exactly as ``create`` validates it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.supervisor import Supervisor, library


async def submit_many(sup: Supervisor, specs: Sequence[Any], *, start: bool = True) -> list[str]:
    """Create (and start) every job of ``specs`` in one pipeline; their statuses.

    Uses ``Supervisor.submit_many`` when the supervisor has it (the proposed
    batch API); else the same thing built here from ``hero_submit`` calls."""
    native = getattr(sup, "submit_many", None)
    if native is not None:
        return [str(answer["status"]) for answer in await native(specs, start=start)]
    head = library.head(sup.config)
    flag = "1" if start else "0"
    calls = []
    for raw in specs:
        spec = sup.parse(raw)
        prerequisites = json.dumps(list(spec.prerequisites))
        calls.append(
            (
                "FCALL",
                "hero_submit",
                0,
                *head,
                spec.job_id,
                flag,
                prerequisites,
                *spec.hash_fields(),
            )
        )
    replies = await sup.wire.pipeline(calls)
    return [str(r[1] if r[0] == "exists" else r[0]) for r in replies]
