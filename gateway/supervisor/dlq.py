"""Reading the dead-letter queues: jobs that used up their attempts.

A list-mode type dead-letters into a list of JSON records; a stream-mode
type into a stream whose entries carry the reason and last error. Operators
see both as one list of the contract's DlqEntry, newest first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.model.job import stored_int
from gateway.supervisor import keys, replies
from gateway.supervisor.connection import Commands


async def entries(client: Commands, types: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` dead-lettered jobs of ``types``, newest first: each
    type's dead-letter list and its stream, read in one round trip."""
    commands: list[tuple[str | int, ...]] = []
    for name in types:
        commands.append(("LRANGE", keys.dlq(name), 0, limit - 1))
        commands.append(("XREVRANGE", keys.dlq_stream(name), "+", "-", "COUNT", limit))
    rows = await client.pipeline(commands)
    found = []
    for name, listed, streamed in zip(types, rows[::2], rows[1::2], strict=True):
        found += [dict(json.loads(raw), script_type=name) for raw in listed]
        found += [_stream_entry(name, entry, f) for entry, f in replies.entries(streamed)]
    return sorted(found, key=lambda e: e.get("ts", 0), reverse=True)[:limit]


def _stream_entry(script_type: str, entry: str, fields: dict[str, str]) -> dict[str, Any]:
    """A dead-letter stream entry in the contract's DlqEntry shape."""
    return {
        "id": entry,
        "job_id": fields.get("job_id", ""),
        "script_type": script_type,
        "reason": fields.get("reason", ""),
        "error": fields.get("last_error") or None,
        "attempt": stored_int(fields.get("attempt"), 0, low=0),
        "ts": stored_int(fields.get("dlq_ts"), 0, low=0),
    }
