"""Celery with the Redis broker and the Redis result backend. Worker: its
standard prefork pool, ``celery worker -c PROCS`` (PROCS child processes, one
task at a time each; gossip/mingle/heartbeat off). Enqueue: ``apply_async``
per task. Pending: result keys counted with DBSIZE (every run starts from a
known baseline; the broker's own keys are excluded). Results: the backend's
``celery-task-meta-*`` keys. Run-and-wait: ``AsyncResult.get`` (the Redis
backend waits on pub/sub)."""

from __future__ import annotations

import json
import os
import sys

import redis
from celery import Celery

from peers.base import Peer, main, peer_url

URL = peer_url()
app = Celery("bench", broker=URL, backend=URL)
app.conf.update(
    result_expires=3600, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True
)
BROKER_KEYS = [
    "celery",
    "_kombu.binding.celery",
    "_kombu.binding.celery.pidbox",
    "_kombu.binding.celeryev",
    "unacked",
    "unacked_index",
    "unacked_mutex",
]


@app.task(name="noop")
def noop(payload):  # type: ignore[no-untyped-def]
    return payload


class CeleryPeer(Peer):
    name = "celery"
    concurrency_note = "prefork pool: child processes per worker, 1 task at a time each"

    def worker_argvs(self) -> list[list[str]]:
        celery = os.path.join(os.path.dirname(sys.executable), "celery")
        return [
            [
                celery,
                "-A",
                "peers.celery_peer",
                "worker",
                "-c",
                str(self.procs),
                "--pool",
                "prefork",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "warning",
            ]
        ]

    async def setup(self) -> None:
        self.r = redis.Redis.from_url(self.url)
        self._alive: list[object] = []

    async def teardown(self) -> None:
        self.r.close()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        for job_id, payload in items:
            noop.apply_async((payload,), task_id=job_id)

    def _results(self) -> int:
        with self.r.pipeline(transaction=False) as pipe:
            pipe.dbsize()
            pipe.exists(*BROKER_KEYS)
            size, broker = pipe.execute()
        return int(size) - int(broker)

    async def baseline(self):  # type: ignore[no-untyped-def]
        return self._results()

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return n - (self._results() - base)

    async def verify(self, items):  # type: ignore[no-untyped-def]
        wrong = 0
        for start in range(0, len(items), 2000):
            chunk = items[start : start + 2000]
            raws = self.r.mget([f"celery-task-meta-{j}" for j, _ in chunk])
            for (_, payload), raw in zip(chunk, raws, strict=True):
                meta = json.loads(raw) if raw else {}
                wrong += meta.get("status") != "SUCCESS" or meta.get("result") != payload
        return wrong

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        result = noop.delay(payload)
        # Keep every AsyncResult alive: one collected while the next call subscribes
        # unsubscribes on the same PubSub from __del__ and deadlocks (celery's
        # redis backend, seen with celery 5.6.3 / redis-py 5.3).
        self._alive.append(result)
        return result.get(timeout=10)


if __name__ == "__main__":
    main(CeleryPeer)
