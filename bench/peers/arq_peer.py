"""arq: asyncio jobs on Redis. Worker: ``arq peers.arq_peer.WorkerSettings``
(``--procs`` processes, ``max_jobs`` = concurrency each, poll_delay 10 ms
instead of arq's 0.5 s so the worker does not sit idle between polls).
Enqueue: ``ArqRedis.enqueue_job`` (one call per job, 500 at a time
concurrently). Pending: the queue sorted set (arq removes a job from it when
it completes). Results: arq's result keys. Run-and-wait: ``Job.result`` with a
1 ms poll (its default polls every 0.5 s)."""

from __future__ import annotations

import asyncio
import os
import sys

from arq import create_pool
from arq.connections import RedisSettings
from arq.constants import default_queue_name, result_key_prefix
from arq.jobs import deserialize_result

from peers.base import CONCURRENCY, Peer, main, peer_url

URL = peer_url()


async def noop(ctx, payload):  # type: ignore[no-untyped-def]
    return payload


class WorkerSettings:
    functions = (noop,)
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = int(os.environ.get("BENCH_CONCURRENCY", CONCURRENCY))
    poll_delay = 0.01
    keep_result = 3600
    log_results = False


class Arq(Peer):
    name = "arq"
    concurrency_note = "max_jobs per process"

    def worker_argvs(self) -> list[list[str]]:
        os.environ["BENCH_CONCURRENCY"] = str(self.concurrency)
        arq = os.path.join(os.path.dirname(sys.executable), "arq")
        return [[arq, "peers.arq_peer.WorkerSettings"]] * self.procs

    async def setup(self) -> None:
        self.pool = await create_pool(RedisSettings.from_dsn(self.url))

    async def teardown(self) -> None:
        await self.pool.aclose()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        await asyncio.gather(*(self.pool.enqueue_job("noop", p, _job_id=j) for j, p in items))

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return await self.pool.zcard(default_queue_name)

    async def verify(self, items):  # type: ignore[no-untyped-def]
        wrong = 0
        for start in range(0, len(items), 2000):
            chunk = items[start : start + 2000]
            raws = await self.pool.mget([result_key_prefix + j for j, _ in chunk])
            for (_, payload), raw in zip(chunk, raws, strict=True):
                res = deserialize_result(raw) if raw else None
                wrong += res is None or not res.success or res.result != payload
        return wrong

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        job = await self.pool.enqueue_job("noop", payload)
        return await job.result(timeout=10, poll_delay=0.001)


if __name__ == "__main__":
    main(Arq)
