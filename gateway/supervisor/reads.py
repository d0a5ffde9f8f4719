"""Reads of one job for a caller: the owner checked in the read itself.

A user key's call names only its own jobs: the read checks the owner in
the same Redis command (or ``MULTI``) that reads what it answers, the one
check (``rpc.access`` looks no named job up first). A job deleted and its id
taken by another caller answers as missing (``JobNotFound``), never with
that caller's status, fields or logs. ``caller_id`` None is an unrestricted read (an
admin's, or a server without keys); the rule is ``model.belongs``.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import JobNotFound
from gateway.model import belongs, decode
from gateway.supervisor import keys
from gateway.supervisor.connection import Commands, wrong_type
from gateway.supervisor.replies import pairs


async def status(wire: Commands, job_id: str, caller_id: str | None) -> dict[str, Any]:
    found, owner = await wire.execute_command("HMGET", keys.job(job_id), "status", "caller_id")
    if found is None or not belongs(owner, caller_id):
        raise JobNotFound(job_id)
    return {"job_id": job_id, "status": found}


async def job(wire: Commands, job_id: str, caller_id: str | None) -> dict[str, Any]:
    raw = pairs(await wire.execute_command("HGETALL", keys.job(job_id)))
    if not raw or not belongs(raw.get("caller_id"), caller_id):
        raise JobNotFound(job_id)
    return decode(raw)


async def logs(wire: Commands, job_id: str, caller_id: str | None) -> dict[str, Any]:
    """The job's log text; its owner read in the same ``MULTI``. A job key of
    another type is no job (as for ``connection.guarded_job``); a logs key of
    another type is Redis's error, as ever."""
    *_, (read, text) = await wire.pipeline(
        [("MULTI",), ("HMGET", keys.job(job_id), "status", "caller_id"),
         ("GET", keys.logs(job_id)), ("EXEC",)]
    )  # fmt: skip
    if isinstance(read, Exception):
        raise JobNotFound(job_id) if wrong_type(read) else read
    if read[0] is None or not belongs(read[1], caller_id):
        raise JobNotFound(job_id)
    if isinstance(text, Exception):
        raise text
    return {"job_id": job_id, "logs": text or ""}
