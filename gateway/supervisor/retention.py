"""What an actor asks Redis before it removes a job's files: is the job still there.

Part of the supervisor's API for actors (``actor/logfiles.py`` uses it): the
actor names job ids, this module knows their keys. A lookup opens its own
connection at the first question and closes it when the sweep is done, so an
actor holds no extra connection between sweeps.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config import Config
from gateway.supervisor import keys
from gateway.supervisor.wire import Wire


class JobLookup:
    """Which of a batch of jobs Redis still has, for one sweep."""

    def __init__(self, config: Config) -> None:
        self._wire = Wire(config.redis, "actor-log-sweep", timeout=config.redis_timeout)

    async def present(self, job_ids: Sequence[str]) -> set[str]:
        """The ids among ``job_ids`` whose job key Redis still has, in one
        pipeline (EXISTS: a key of any type counts, and none fails the sweep)."""
        if not job_ids:
            return set()
        replies = await self._wire.pipeline([("EXISTS", keys.job(j)) for j in job_ids])
        return {j for j, n in zip(job_ids, replies, strict=True) if n}

    async def aclose(self) -> None:
        await self._wire.aclose()
