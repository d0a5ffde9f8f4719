"""SAQ: asyncio jobs on Redis. Worker: ``saq peers.saq_peer.settings
--workers PROCS`` (concurrency N per process). Enqueue: ``Queue.enqueue`` per
job, 500 at a time concurrently. Pending: the queue's ``incomplete`` sorted
set (SAQ removes a job when it completes). Results: ``Queue.job``.
Run-and-wait: ``Queue.apply`` with a 1 ms poll (its default polls every
0.5 s)."""

from __future__ import annotations

import asyncio
import os
import sys

from saq import Queue

from peers.base import CONCURRENCY, Peer, main, peer_url

URL = peer_url()


async def noop(ctx, *, payload):  # type: ignore[no-untyped-def]
    return payload


queue = Queue.from_url(URL)
settings = {
    "queue": queue,
    "functions": [noop],
    "concurrency": int(os.environ.get("BENCH_CONCURRENCY", CONCURRENCY)),
}


class Saq(Peer):
    name = "saq"
    concurrency_note = "concurrency per process"

    def worker_argvs(self) -> list[list[str]]:
        os.environ["BENCH_CONCURRENCY"] = str(self.concurrency)
        exe = os.path.join(os.path.dirname(sys.executable), "saq")
        return [[exe, "peers.saq_peer.settings", "--workers", str(self.procs), "--quiet"]]

    async def setup(self) -> None:
        self.q = Queue.from_url(self.url)
        await self.q.connect()

    async def teardown(self) -> None:
        await self.q.disconnect()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        await asyncio.gather(
            *(self.q.enqueue("noop", key=j, payload=p, ttl=3600) for j, p in items)
        )

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return await self.q.count("incomplete")

    async def verify(self, items):  # type: ignore[no-untyped-def]
        wrong = 0
        for start in range(0, len(items), 2000):
            chunk = items[start : start + 2000]
            jobs = await self.q.jobs([j for j, _ in chunk])
            for (_, payload), job in zip(chunk, jobs, strict=True):
                wrong += job is None or job.status != "complete" or job.result != payload
        return wrong

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        return await self.q.apply("noop", timeout=10, poll_interval=0.001, payload=payload)


if __name__ == "__main__":
    main(Saq)
