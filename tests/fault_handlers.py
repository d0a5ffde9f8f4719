"""SDK handlers loaded by actor subprocesses in the fault tests (``--handler``)."""

from __future__ import annotations

import asyncio
import os
import random

from gateway.actor import JobContext, JobFailed


async def sleepy(ctx: JobContext) -> str:
    await asyncio.sleep(random.uniform(0.05, 0.15))
    return ctx.job.script


def deadly(ctx: JobContext) -> str:
    """A poison job: the script ``die`` takes its actor down with it; ``fail``
    fails; ``chatty`` logs and reports progress; any script is its own output."""
    if ctx.job.script == "die":
        os._exit(1)
    if ctx.job.script == "fail":
        raise JobFailed("failed on purpose")
    if ctx.job.script == "chatty":
        ctx.log("a line of log")
        ctx.progress(0.5, "half way")
    return ctx.job.script
