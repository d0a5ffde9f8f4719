"""Dramatiq with its Redis broker and the Results middleware (Redis backend).
Worker: ``dramatiq peers.dramatiq_peer --processes PROCS --threads N``
(defaults otherwise). Enqueue: ``actor.send`` per message. Pending: the
queue's message hash (a message leaves it when acked, after its result is
stored). Results: ``Message.get_result``. Run-and-wait:
``get_result(block=True)``."""

from __future__ import annotations

import os
import sys

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend

from peers.base import Peer, main, peer_url

URL = peer_url()
backend = RedisBackend(url=URL)
broker = RedisBroker(url=URL)
broker.add_middleware(Results(backend=backend, result_ttl=3_600_000))
dramatiq.set_broker(broker)


@dramatiq.actor(store_results=True, max_retries=0)
def noop(payload):  # type: ignore[no-untyped-def]
    return payload


class Dramatiq(Peer):
    name = "dramatiq"
    concurrency_note = "worker threads per process"

    def worker_argvs(self) -> list[list[str]]:
        exe = os.path.join(os.path.dirname(sys.executable), "dramatiq")
        return [
            [
                exe,
                "peers.dramatiq_peer",
                "--processes",
                str(self.procs),
                "--threads",
                str(self.concurrency),
            ]
        ]

    async def setup(self) -> None:
        self.r = redis.Redis.from_url(self.url)
        self.sent: dict[str, dramatiq.Message] = {}

    async def teardown(self) -> None:
        self.r.close()

    async def enqueue(self, items):  # type: ignore[no-untyped-def]
        for job_id, payload in items:
            self.sent[job_id] = noop.send(payload)

    async def pending(self, n, base):  # type: ignore[no-untyped-def]
        return self.r.hlen("dramatiq:default.msgs")

    async def verify(self, items):  # type: ignore[no-untyped-def]
        wrong = 0
        for job_id, payload in items:
            message = self.sent.pop(job_id)
            try:
                wrong += message.get_result(backend=backend) != payload
            except Exception:
                wrong += 1
        return wrong

    async def run_and_wait(self, payload):  # type: ignore[no-untyped-def]
        return noop.send(payload).get_result(backend=backend, block=True, timeout=10_000)


if __name__ == "__main__":
    main(Dramatiq)
