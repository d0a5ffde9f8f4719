"""The ``python`` executor: a job's script in a sandboxed child interpreter.

The job runs ``python -I -B job.py`` in a fresh folder, in its own bubblewrap
namespaces (gateway/actor/sandbox.py) and its own cgroup
(gateway/actor/cgroup.py), with an environment built from scratch: the job's
env_vars plus JOB_ID / CALLER_ID / CONTEXT_ID, nothing of the actor's own
environment. stdout is the job's output (its head), the tail of stderr its
error; both go to the job's log. With ``HERO_SANDBOX=off`` only the folder,
the environment and the limits remain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from gateway.actor import cgroup
from gateway.actor.context import JobContext, JobFailed
from gateway.actor.joblog import JobLog
from gateway.actor.sandbox import JOB_DIR, Sandbox
from gateway.config import Config

log = logging.getLogger("gateway.actor")

#: How much of stderr becomes the job's error message.
ERROR_TAIL = 4096
MAX_OPEN_FILES = 256
#: What a limit the kernel enforced is called in the job's error.
LIMIT_NAMES = {"memory": "memory limit", "processes": "process limit"}


class PythonExecutor:
    """The handler of ``python`` jobs. Made once per actor: it checks that the
    sandbox works here (SandboxUnavailable if not, unless HERO_SANDBOX=off)
    and finds the cgroups it may use."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.memory = config.job_memory_mb << 20
        self.sandbox: Sandbox | None = None
        if config.sandbox == "on":
            self.sandbox = Sandbox(config.job_network, config.job_uid, tmp_bytes=self.memory)
            self.sandbox.check()
        self.cgroups = cgroup.detect()

    def describe(self) -> dict[str, str]:
        """What the start-up log says about how jobs are confined."""
        limits = self.cgroups.describe() if self.cgroups else "rlimits (per process)"
        return {
            "sandbox": self.sandbox.describe() if self.sandbox else "off",
            "limits": f"{limits}: memory {self.config.job_memory_mb} MiB, "
            f"{self.config.job_max_procs} processes",
        }

    def _preexec(self, timeout: int, cg: cgroup.JobCgroup | None) -> Callable[[], None]:
        cpu = self.config.job_cpu_seconds or timeout + 5
        procs, memory = self.config.job_max_procs, self.memory

        def run() -> None:  # pragma: no cover - runs in the child before exec
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            if cg is not None:
                cg.enter()
            else:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
                resource.setrlimit(resource.RLIMIT_NPROC, (procs, procs))

        return run

    async def __call__(self, ctx: JobContext) -> str:
        job = ctx.job
        workdir = Path(tempfile.mkdtemp(prefix=f"hero-job-{os.getpid()}-"))
        cg: cgroup.JobCgroup | None = None
        hit: str | None = None
        try:
            (workdir / "job.py").write_text(job.script)
            inside = JOB_DIR if self.sandbox else str(workdir)
            argv = [sys.executable, "-I", "-B", f"{inside}/job.py"]
            if self.sandbox:
                self.sandbox.prepare(workdir)
                argv = self.sandbox.argv(workdir, argv)
            if self.cgroups:
                cg = self.cgroups.create(workdir.name, self.memory, self.config.job_max_procs)
            env = {
                "PATH": os.defpath,
                "LANG": "C.UTF-8",
                "HOME": inside,
                "TMPDIR": "/tmp" if self.sandbox else inside,
                **job.env_vars,
                "JOB_ID": job.job_id,
                "CALLER_ID": job.caller_id,
                "CONTEXT_ID": job.context_id,
            }
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=workdir, env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=self._preexec(job.timeout, cg),
            )  # fmt: skip
            code, stdout, stderr = await _wait(proc, ctx.joblog, self.config.job_max_output)
        finally:
            if cg is not None:
                hit = cg.limit_hit()
                await asyncio.to_thread(cg.remove)
            shutil.rmtree(workdir, ignore_errors=True)
        if code != 0:
            tail = stderr.decode("utf-8", "replace").strip()
            if hit:
                limit = self.config.job_memory_mb if hit == "memory" else self.config.job_max_procs
                unit = " MiB" if hit == "memory" else ""
                tail = f"{tail}\n{LIMIT_NAMES[hit]} of the job hit ({limit}{unit})".strip()
            raise JobFailed(tail or f"exit code {code}")
        limit = self.config.job_max_output
        text = stdout[:limit].decode("utf-8", "replace")
        if len(stdout) > limit:
            text += f"\n[output cut at {limit} bytes]"
        return text


async def _wait(
    proc: asyncio.subprocess.Process, joblog: JobLog, max_output: int
) -> tuple[int, bytearray, bytearray]:
    """Pump both pipes into the log until the job ends; on cancellation (stop,
    timeout) kill its session: bwrap, and with it the job's PID namespace."""
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = bytearray(), bytearray()
    try:
        await asyncio.gather(
            _pump(proc.stdout, stdout, joblog, size=max_output + 1, head=True),
            _pump(proc.stderr, stderr, joblog, size=ERROR_TAIL, head=False),
        )
        return await proc.wait(), stdout, stderr
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def _pump(
    stream: asyncio.StreamReader, kept: bytearray, joblog: JobLog, *, size: int, head: bool
) -> None:
    """Copy a pipe to the log, keeping its first (stdout) or last (stderr) ``size`` bytes."""
    while chunk := await stream.read(65536):
        joblog.write(chunk)
        if head:
            kept += chunk[: max(0, size - len(kept))]
        else:
            kept += chunk
            del kept[:-size]
