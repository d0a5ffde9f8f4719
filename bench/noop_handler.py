"""The SDK handler our actor runs in the benchmarks: a no-op that echoes the
script, so every job's output can be checked against what was submitted."""

from __future__ import annotations

from gateway.actor import JobContext


def noop(ctx: JobContext) -> str:
    return ctx.job.script
