"""RQ: its standard ``rq worker`` (forks a work horse per job), ``--procs``
worker processes, one job at a time each. Enqueue: ``Queue.enqueue_many``
(one pipeline per 500). Pending: the finished-job registry. Results:
``Job.return_value``. Run-and-wait: ``Job.latest_result(timeout=...)``
(blocks on the results stream)."""

from __future__ import annotations

import os
import sys

import redis
from rq import Queue
from rq.job import Job

from peers.base import Peer, main

FUNC = "peers.rq_tasks.noop"


class Rq(Peer):
    name = "rq"
    concurrency_note = "1 job at a time per worker process (fork per job)"

    def worker_argvs(self) -> list[list[str]]:
        rq = os.path.join(os.path.dirname(sys.executable), "rq")
        return [[rq, "worker", "--url", self.url, "--quiet", "default"]] * self.procs

    async def setup(self) -> None:
        self.r = redis.Redis.from_url(self.url)
        self.q = Queue("default", connection=self.r)

    async def teardown(self) -> None:
        self.r.close()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        self.q.enqueue_many(
            [Queue.prepare_data(FUNC, args=(p,), job_id=j, result_ttl=3600) for j, p in items]
        )

    async def baseline(self):  # type: ignore[no-untyped-def]
        return self.r.zcard(self.q.finished_job_registry.key)

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return n - (self.r.zcard(self.q.finished_job_registry.key) - base)

    async def verify(self, items):  # type: ignore[no-untyped-def]
        wrong = 0
        for start in range(0, len(items), 1000):
            chunk = items[start : start + 1000]
            jobs = Job.fetch_many([j for j, _ in chunk], connection=self.r)
            for (_, payload), job in zip(chunk, jobs, strict=True):
                wrong += job is None or job.return_value() != payload
        return wrong

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        job = self.q.enqueue(FUNC, payload, result_ttl=3600)
        result = job.latest_result(timeout=10)
        return None if result is None else result.return_value


if __name__ == "__main__":
    main(Rq)
