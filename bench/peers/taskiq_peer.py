"""taskiq with taskiq-redis: ``ListQueueBroker`` and ``RedisAsyncResultBackend``.
Worker: ``taskiq worker peers.taskiq_peer:broker --workers PROCS
--max-async-tasks N``. Enqueue: ``task.kiq`` per task, 500 at a time
concurrently. Pending: result keys counted with DBSIZE (the broker's list
excluded). Results: the result backend. Run-and-wait: ``wait_result`` with a
1 ms check interval (its default polls every 0.2 s)."""

from __future__ import annotations

import asyncio
import os
import sys

import redis.asyncio as aioredis
from taskiq_redis import ListQueueBroker, RedisAsyncResultBackend

from peers.base import Peer, main, peer_url

URL = peer_url()
result_backend = RedisAsyncResultBackend(URL, result_ex_time=3600)
broker = ListQueueBroker(URL).with_result_backend(result_backend)


# taskiq lives in the peers' venv only, so mypy sees its decorator as untyped
@broker.task(task_name="noop")  # type: ignore[untyped-decorator]
async def noop(payload: str) -> str:
    return payload


class Taskiq(Peer):
    name = "taskiq"
    concurrency_note = "max async tasks per process"

    def worker_argvs(self) -> list[list[str]]:
        exe = os.path.join(os.path.dirname(sys.executable), "taskiq")
        return [
            [
                exe,
                "worker",
                "peers.taskiq_peer:broker",
                "--workers",
                str(self.procs),
                "--max-async-tasks",
                str(self.concurrency),
                "--log-level",
                "WARNING",
            ]
        ]

    async def setup(self) -> None:
        await broker.startup()
        self.r = aioredis.Redis.from_url(self.url)

    async def teardown(self) -> None:
        await broker.shutdown()
        await self.r.aclose()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        await asyncio.gather(*(noop.kicker().with_task_id(j).kiq(p) for j, p in items))

    async def _results(self) -> int:
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.dbsize()
            pipe.exists(broker.queue_name)
            size, queued = await pipe.execute()
        return int(size) - int(queued)

    async def baseline(self):  # type: ignore[no-untyped-def]
        return await self._results()

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return n - (await self._results() - base)

    async def verify(self, items):  # type: ignore[no-untyped-def]
        wrong = 0
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            results = await asyncio.gather(
                *(result_backend.get_result(j) for j, _ in chunk), return_exceptions=True
            )
            for (_, payload), res in zip(chunk, results, strict=True):
                wrong += isinstance(res, BaseException) or res.is_err or res.return_value != payload
        return wrong

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        task = await noop.kiq(payload)
        res = await task.wait_result(check_interval=0.001, timeout=10)
        return res.return_value


if __name__ == "__main__":
    main(Taskiq)
