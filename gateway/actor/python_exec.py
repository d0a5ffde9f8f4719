"""The ``python`` executor: a job's script in an isolated child interpreter.

Isolation: ``python -I`` (no user site, no PYTHON* variables, no cwd on the
path) in a fresh temporary folder, a new session (so a stop or timeout kills
the whole process group), an environment built from scratch (the job's
env_vars plus JOB_ID / CALLER_ID / CONTEXT_ID; nothing of the actor's own
environment, so no secrets leak in) and resource limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import IO

from gateway.actor.context import JobContext, JobFailed

#: Output beyond this is cut (and says so); the job still succeeds.
MAX_OUTPUT = 1 << 20
#: How much of stderr becomes the job's error message.
ERROR_TAIL = 4096
MEMORY_LIMIT = 1 << 30
MAX_OPEN_FILES = 256


def _limits(cpu_seconds: int) -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


async def _pump(stream: asyncio.StreamReader, keep: bytearray, log: IO[bytes], head: bool) -> None:
    """Copy a pipe to the log file, keeping the head (stdout) or the tail (stderr)."""
    while chunk := await stream.read(65536):
        log.write(chunk)
        if head:
            keep += chunk[: max(0, MAX_OUTPUT + 1 - len(keep))]
        else:
            keep += chunk
            del keep[:-ERROR_TAIL]


async def run_python(ctx: JobContext) -> str:
    job = ctx.job
    workdir = Path(tempfile.mkdtemp(prefix="hero-job-"))
    try:
        script = workdir / "job.py"
        script.write_text(job.script)
        env = {
            "PATH": os.defpath,
            "LANG": "C.UTF-8",
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            **job.env_vars,
            "JOB_ID": job.job_id,
            "CALLER_ID": job.caller_id,
            "CONTEXT_ID": job.context_id,
        }
        stdout, stderr = bytearray(), bytearray()
        with ctx.log_path.open("ab", buffering=0) as log:  # live: LiveLog reads it
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-B", "-u", str(script),
                cwd=workdir, env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=lambda: _limits(job.timeout + 5),
            )  # fmt: skip
            assert proc.stdout is not None and proc.stderr is not None
            try:
                await asyncio.gather(
                    _pump(proc.stdout, stdout, log, head=True),
                    _pump(proc.stderr, stderr, log, head=False),
                )
                code = await proc.wait()
            finally:
                if proc.returncode is None:  # cancelled: stop or timeout
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    await proc.wait()
        ctx.log_text = ctx.log_path.read_bytes()[-ctx.log_tail :].decode("utf-8", "replace")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = stdout[:MAX_OUTPUT].decode("utf-8", "replace")
    if len(stdout) > MAX_OUTPUT:
        text += f"\n[output cut at {MAX_OUTPUT} bytes]"
    if code != 0:  # the output is the stdout, the error the stderr's tail
        tail = stderr.decode("utf-8", "replace").strip()
        raise JobFailed(tail or f"exit code {code}", output=text)
    return text
