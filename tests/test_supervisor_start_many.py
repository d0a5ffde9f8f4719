"""The starts of one loop turn (a JSON-RPC batch of job.start) are one
``hero_start_many`` call: against a real redis-server, and each job still
answered, written and evented as if it had been started alone."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from gateway.errors import InvalidState, JobNotFound
from gateway.supervisor import Supervisor, keys
from tests.helpers import job


async def _fcalls(rds: aioredis.Redis, monitor: Any) -> list[str]:
    """The commands MONITOR showed until now (a barrier ECHO ends them)."""
    await rds.echo("barrier")
    seen = []
    while (command := (await monitor.next_command())["command"]) != "ECHO barrier":
        seen.append(command)
    return seen


async def test_one_call_answers_each_start_alone_and_one_bad_job_fails_only_itself(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    for job_id in ("s1", "s2"):
        await sup.create(job(script_type="osis", job_id=job_id))
    await rds.set(keys.job("bad"), "not a hash")  # WRONGTYPE inside the call
    async with rds.monitor() as monitor:
        results = await asyncio.gather(
            *(sup.start(j) for j in ("s1", "bad", "missing", "s1", "s2")), return_exceptions=True
        )
        commands = await _fcalls(rds, monitor)
    s1, bad, missing, again, s2 = results
    queue = keys.work_queue("osis")
    assert s1 == {"job_id": "s1", "status": "dispatched", "queue": queue}
    assert s2 == {"job_id": "s2", "status": "dispatched", "queue": queue}
    assert isinstance(bad, ResponseError) and "WRONGTYPE" in str(bad)
    assert isinstance(missing, JobNotFound)
    assert isinstance(again, InvalidState) and again.data["status"] == "dispatched"
    [fcall] = [c for c in commands if c.startswith("FCALL")]
    assert fcall.startswith("FCALL hero_start_many 0 ")
    assert await rds.lrange(queue, 0, -1) == ["s2", "s1"]
    for job_id in ("s1", "s2"):
        kinds = [f["event"] for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == job_id]
        assert kinds == ["created", "dispatched"]
        assert await rds.zscore(keys.index_status("dispatched"), job_id) is not None
        assert await rds.zscore(keys.index_status("created"), job_id) is None
