"""Submitting and starting jobs: ``hero_submit_many`` and ``hero_start_jobs``
calls and what their replies mean.

The submits issued in one turn of the event loop (the elements of a JSON-RPC
batch) reach ``submit_jobs`` together (see ``batching``) and go out as one
pipeline of Function calls; the starts likewise reach ``start_jobs``. Each
job's reply then becomes either an answer or, for a single submit, the error
its caller raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from gateway.config import Config
from gateway.errors import Forbidden, InvalidJob
from gateway.model import JobSpec, Transition, Verdict
from gateway.model import library as functions
from gateway.model.library import Refused, Start
from gateway.supervisor import keys, library
from gateway.supervisor.wire import Wire

#: Jobs per hero_submit_many (and hero_start_jobs) call: ~5 ms of Redis time,
#: so a big batch never holds Redis for long (the rest of a batch goes in the
#: same pipeline).
SUBMIT_BATCH = 100


async def submit_jobs(
    wire: Wire, config: Config, jobs: Sequence[tuple[JobSpec, bool]]
) -> list[Transition | Exception]:
    """Each job's ``submit`` reply (or the error of its call, or of its own
    part of it), in order: one ``hero_submit_many`` per ``SUBMIT_BATCH`` jobs
    of the same start flag, all in one pipeline."""
    size = SUBMIT_BATCH
    groups: list[list[int]] = []  # per call: the positions of its jobs
    for start in (True, False):
        chosen = [i for i, (_, s) in enumerate(jobs) if s is start]
        groups += [chosen[i : i + size] for i in range(0, len(chosen), size)]
    calls = [
        functions.submit_many(
            jobs[positions[0]][1],
            [(jobs[i][0], keys.dispatch_queue(jobs[i][0])) for i in positions],
        )
        for positions in groups
    ]
    replies = await library.pipeline(wire, config, calls)
    answers: dict[int, Transition | Exception] = {}
    for positions, reply in zip(groups, replies, strict=True):
        for n, i in enumerate(positions):
            answers[i] = reply if isinstance(reply, Exception) else _own(reply[n])
    return [answers[i] for i in range(len(jobs))]


async def start_jobs(
    wire: Wire, config: Config, starts: Sequence[Start]
) -> list[Transition | Exception]:
    """Each job's start (or its error), in order: one ``hero_start_jobs`` per
    ``SUBMIT_BATCH`` ids, all in one pipeline. A job Redis refused inside the
    call answers with that error, a ``ResponseError`` as its own call's was."""
    size = SUBMIT_BATCH
    batches = [starts[i : i + size] for i in range(0, len(starts), size)]
    calls = [functions.start_many(batch) for batch in batches]
    replies = await library.pipeline(wire, config, calls)
    answers: list[Transition | Exception] = []
    for batch, reply in zip(batches, replies, strict=True):
        if isinstance(reply, Exception):
            answers += [reply] * len(batch)
        else:
            answers += [_own(r) for r in reply]
    return answers


class JobRefused(ResponseError):  # type: ignore[misc]  # redis-py's class is untyped
    """Redis refused this job's part of a many-job call (the others went on):
    a ``ResponseError``, as the job's own call's would have been."""


def _own(reply: Transition | Refused) -> Transition | Exception:
    return JobRefused(str(reply)) if isinstance(reply, Refused) else reply


def accepted(spec: JobSpec, reply: Transition) -> Transition:
    """A single submit's reply, or the error that refuses it: ``Forbidden``
    when another caller holds the id, ``InvalidJob`` for an unknown
    prerequisite."""
    if reply.verdict is Verdict.TAKEN:
        raise Forbidden("Job id taken", {"job_id": spec.job_id})
    if reply.verdict is Verdict.BAD_PREREQUISITE:
        raise InvalidJob(
            f"Invalid job: prerequisite {reply.prerequisite} is unknown or the job itself",
            data=[
                {
                    "field": "prerequisites",
                    "message": f"unknown job {reply.prerequisite}",
                    "schema_path": "",
                }
            ],
        )
    return reply


def answer(job: JobSpec, reply: Transition | Exception) -> dict[str, Any]:
    """One job's answer in a producer's batch (``Supervisor.submit_many``):
    ``create``'s or ``start``'s shape, or status ``invalid`` with the reason
    in ``error`` instead of failing the batch. An error of the whole call is
    raised."""
    if isinstance(reply, JobRefused):
        return {"job_id": job.job_id, "status": "invalid", "error": f"redis refused it: {reply}"}
    if isinstance(reply, Exception):
        raise reply
    if reply.verdict is Verdict.BAD_PREREQUISITE:
        return {
            "job_id": job.job_id,
            "status": "invalid",
            "error": f"prerequisite {reply.prerequisite} is unknown or the job itself",
        }
    if reply.verdict is Verdict.TAKEN:
        return {"job_id": job.job_id, "status": "invalid", "error": "id taken"}
    if reply.verdict is Verdict.EXISTS:
        return {"job_id": job.job_id, "status": reply.status}
    return {"job_id": job.job_id, "status": reply.status, "queue": reply.queue}
