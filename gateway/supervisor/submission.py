"""Submitting jobs: ``hero_submit_many`` calls and what their replies mean.

The submits issued in one turn of the event loop (the elements of a JSON-RPC
batch) reach ``submit_jobs`` together (see ``batching``) and go out as one
pipeline of Function calls. Each job's reply then becomes either an answer
or, for a single submit, the error its caller raises.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.config import Config
from gateway.errors import Forbidden, InvalidJob
from gateway.supervisor import library
from gateway.supervisor.job import JobSpec
from gateway.supervisor.wire import Wire

#: Jobs per hero_submit_many call: ~5 ms of Redis time, so a big batch
#: never holds Redis for long (the rest of a batch goes in the same pipeline).
SUBMIT_BATCH = 100


async def submit_jobs(
    wire: Wire, config: Config, jobs: Sequence[tuple[JobSpec, bool]]
) -> list[Any]:
    """Each job's ``hero_submit`` reply (or the error of its call), in order:
    one ``hero_submit_many`` per ``SUBMIT_BATCH`` jobs of the same start
    flag, all in one pipeline."""
    size = SUBMIT_BATCH
    calls: list[list[int]] = []  # per call: the positions of its jobs
    for start in (True, False):
        chosen = [i for i, (_, s) in enumerate(jobs) if s is start]
        calls += [chosen[i : i + size] for i in range(0, len(chosen), size)]
    commands = []
    for positions in calls:
        args = ["1" if jobs[positions[0]][1] else "0"]
        for i in positions:
            job = jobs[i][0]
            prerequisites = json.dumps(list(job.prerequisites))
            args += [job.job_id, prerequisites, json.dumps(job.hash_fields())]
        commands.append(("FCALL", "hero_submit_many", 0, *library.head(config), *args))
    replies = await wire.pipeline(commands, errors_in_place=True)
    if any(library.lost_library(r) for r in replies):  # nothing ran: load it, then once more
        await library.load(wire)
        replies = await wire.pipeline(commands, errors_in_place=True)
    answers: list[Any] = [None] * len(jobs)
    for positions, reply in zip(calls, replies, strict=True):
        for n, i in enumerate(positions):
            answers[i] = reply if isinstance(reply, Exception) else reply[n]
    return answers


def accepted(spec: JobSpec, reply: Any) -> list[str]:
    """A single submit's reply, or the error that refuses it: ``Forbidden``
    when another caller holds the id, ``InvalidJob`` for an unknown
    prerequisite."""
    if reply[0] == "taken":
        raise Forbidden("Job id taken", {"job_id": spec.job_id})
    if reply[0] == "bad_prerequisite":
        raise InvalidJob(
            f"Invalid job: prerequisite {reply[1]} is unknown or the job itself",
            data=[
                {
                    "field": "prerequisites",
                    "message": f"unknown job {reply[1]}",
                    "schema_path": "",
                }
            ],
        )
    return [str(x) for x in reply]


def answer(job: JobSpec, reply: Any) -> dict[str, Any]:
    """One job's answer in a producer's batch (``Supervisor.submit_many``):
    ``create``'s or ``start``'s shape, or status ``invalid`` with the reason
    in ``error`` instead of failing the batch."""
    kind = str(reply[0])
    if kind == "bad_prerequisite":
        return {
            "job_id": job.job_id,
            "status": "invalid",
            "error": f"prerequisite {reply[1]} is unknown or the job itself",
        }
    if kind == "taken":
        return {"job_id": job.job_id, "status": "invalid", "error": "id taken"}
    if kind == "exists":
        return {"job_id": job.job_id, "status": str(reply[1])}
    return {
        "job_id": job.job_id,
        "status": kind,
        "queue": (str(reply[1]) or None) if len(reply) > 1 else None,
    }
