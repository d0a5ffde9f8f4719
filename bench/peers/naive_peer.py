"""The ceiling in Python: a minimal LPUSH/BLPOP loop, no job state at all.

Producer: pipelined LPUSH of ``id|reply_key|payload``. Worker (``--procs``
processes, one job at a time each): BLPOP, then LPUSH ``id|payload`` to the
reply key. Throughput puts every reply on one results list (pending = N minus
its growth); run-and-wait uses a reply list per job and BLPOPs it.
"""

from __future__ import annotations

import sys

import redis
import redis.asyncio as aioredis

from peers.base import Peer, main

QUEUE = "naive:q"
RESULTS = "naive:results"


def worker(url: str) -> None:
    r = redis.Redis.from_url(url, decode_responses=True)
    while True:
        item = r.blpop([QUEUE], timeout=5)
        if item is None:
            continue
        job_id, reply, payload = item[1].split("|", 2)
        r.lpush(reply, f"{job_id}|{payload}")


class Naive(Peer):
    name = "naive"
    concurrency_note = "1 job at a time per process (synchronous BLPOP loop)"

    def worker_argvs(self) -> list[list[str]]:
        return [[sys.executable, "-m", "peers.naive_peer", "--worker", self.url]] * self.procs

    async def setup(self) -> None:
        self.r = aioredis.Redis.from_url(self.url, decode_responses=True)

    async def teardown(self) -> None:
        await self.r.aclose()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        async with self.r.pipeline(transaction=False) as pipe:
            for job_id, payload in items:
                pipe.lpush(QUEUE, f"{job_id}|{RESULTS}|{payload}")
            await pipe.execute()

    async def baseline(self):  # type: ignore[no-untyped-def]
        return await self.r.llen(RESULTS)

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return n - (await self.r.llen(RESULTS) - base)

    async def verify(self, items):  # type: ignore[no-untyped-def]
        got = dict(r.split("|", 1) for r in await self.r.lrange(RESULTS, 0, len(items) - 1))
        return sum(got.get(job_id) != payload for job_id, payload in items)

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        job_id = payload
        reply = f"naive:reply:{job_id}"
        await self.r.lpush(QUEUE, f"{job_id}|{reply}|{payload}")
        _, value = await self.r.blpop([reply], timeout=10)
        return value.split("|", 1)[1]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main(Naive)
