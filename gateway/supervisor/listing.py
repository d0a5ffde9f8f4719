"""``job.list``: cursor-paged reads of the sorted-set indexes, newest first.

The most selective index for the filters is walked (caller, then status,
then type, then all); the other filters are applied to the hashes. The
cursor is the (score, id) of the last job returned, so pages stay stable
while jobs are added.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gateway.errors import InvalidParams
from gateway.model.job import as_hex, decode, from_hex
from gateway.supervisor import keys
from gateway.supervisor.connection import Commands, lenient
from gateway.supervisor.replies import pairs, scored

_BATCH = 200


def _index(status: str | None, script_type: str | None, caller_id: str | None) -> str:
    if caller_id:
        return keys.index_caller(caller_id)
    if status:
        return keys.index_status(status)
    if script_type:
        return keys.index_type(script_type)
    return keys.INDEX_ALL


def _encode_cursor(score: float, job_id: str) -> str:
    """``score:id``; an id that is not an identifier (an outside producer's,
    which may even hold bytes that are not UTF-8) as ``.`` and the hex of its
    bytes, so the cursor is always plain text a client can send back."""
    if re.fullmatch(keys.IDENT_PATTERN, job_id):
        return f"{score!r}:{job_id}"
    return f"{score!r}:.{as_hex(job_id)}"


def _decode_cursor(cursor: str) -> tuple[float, str]:
    """(score, job id) of a cursor this server returned; anything else is
    InvalidParams. The score must be finite (Redis refuses ``nan`` as a range
    bound) and the id one ``_encode_cursor`` writes, so a forged cursor never
    reaches Redis as anything but a well-formed range."""
    score, sep, job_id = cursor.partition(":")
    try:
        value = float(score)
        if job_id.startswith("."):
            job_id = from_hex(job_id[1:])
        if not sep or not math.isfinite(value) or _encode_cursor(value, job_id) != cursor:
            raise ValueError
        return value, job_id
    except ValueError:
        raise InvalidParams("cursor is not one this server returned") from None


async def page(
    client: Commands,
    *,
    status: str | None,
    script_type: str | None,
    caller_id: str | None,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    index = _index(status, script_type, caller_id)
    want = {"status": status, "script_type": script_type, "caller_id": caller_id}
    after = _decode_cursor(cursor) if cursor else None
    top: float | str = after[0] if after else "+inf"
    offset = 0
    jobs: list[dict[str, Any]] = []
    last: tuple[float, str] | None = None
    while len(jobs) <= limit:
        batch = scored(
            await client.execute_command(
                "ZREVRANGEBYSCORE", index, top, "-inf", "WITHSCORES", "LIMIT", offset, _BATCH
            )
        )
        if not batch:
            break
        offset += len(batch)
        # Same-score members come in descending id order: skip those already returned.
        fresh = [(m, s) for m, s in batch if after is None or s < after[0] or m < after[1]]
        rows = await lenient(client, [("HGETALL", keys.job(member)) for member, _ in fresh])
        for (member, score), raw in zip(fresh, map(pairs, rows), strict=True):
            if not raw or any(v and raw.get(k) != v for k, v in want.items()):
                continue
            if len(jobs) == limit:
                return {"jobs": jobs, "next_cursor": _encode_cursor(*last) if last else None}
            jobs.append(decode(raw))
            last = (score, member)
        if len(batch) < _BATCH:
            break
    return {"jobs": jobs, "next_cursor": None}
