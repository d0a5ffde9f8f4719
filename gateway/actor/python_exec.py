"""The ``python`` executor: a job's script in a sandboxed child interpreter.

The job runs ``python -I -B job.py`` in a fresh folder, in its own bubblewrap
namespaces (gateway/actor/sandbox.py, started ahead by gateway/actor/warm.py)
and its own cgroup (gateway/actor/cgroup.py), with an environment built from scratch: the job's
env_vars plus JOB_ID / CALLER_ID / CONTEXT_ID, nothing of the actor's own
environment. stdout is the job's output (its head), the tail of stderr its
error; both go to the job's log. With ``HERO_SANDBOX=off`` only the folder,
the environment and the limits remain. Where its cgroup counts CPU time, the
job's CPU limit is for all its processes together: a timer reads the count
while the job runs and kills the job past it; elsewhere it is RLIMIT_CPU,
per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from gateway.actor import cgroup
from gateway.actor.context import JobContext, JobFailed
from gateway.actor.joblog import JobLog
from gateway.actor.sandbox import JOB_DIR, SCRIPT, Sandbox, check_environment, sandbox_pipes
from gateway.actor.warm import Ready, WarmPool
from gateway.config import Config
from gateway.model import Claimed
from gateway.model.job import as_stored

log = logging.getLogger("gateway.actor")

#: How much of stderr becomes the job's error message.
ERROR_TAIL = 4096
MAX_OPEN_FILES = 256
#: What a limit the kernel (or the CPU watch) enforced is called in the job's error.
LIMIT_NAMES = {"memory": "memory limit", "processes": "process limit", "cpu": "CPU time limit"}
#: A job's folder is ``<TMPDIR>/hero-job-<actor pid>-<random>``.
FOLDER_PREFIX = "hero-job-"
#: What removes a job folder rmtree could not (found once: a job's PATH is not ours).
RM = shutil.which("rm") or "/bin/rm"
#: How often (seconds) the CPU time of a running job is read from its cgroup:
#: a job may overrun its limit by this much times the machine's cores.
CPU_POLL = 0.2


class PythonExecutor:
    """The handler of ``python`` jobs. Made once per actor: it checks that the
    sandbox works here (SandboxUnavailable if not, unless HERO_SANDBOX=off),
    finds the cgroups it may use, and keeps ``warm`` sandboxes ready."""

    def __init__(self, config: Config, warm: int = 1) -> None:
        self.config = config
        self.memory = config.job_memory_mb << 20
        self.sandbox: Sandbox | None = None
        if config.sandbox == "on":
            self.sandbox = Sandbox(config.job_network, config.job_uid, tmp_bytes=self.memory)
            self.sandbox.check()
        self.cgroups = cgroup.detect()
        _keep_inherited_files_from_jobs()
        for folder in orphaned_folders(Path(tempfile.gettempdir())):
            log.info("removing a dead actor's job folder", extra={"folder": str(folder)})
            _remove_now(folder)
        #: CPU time is limited for the whole job (its cgroup counts it), else per process.
        self.cpu_per_job = self.cgroups is not None and self.cgroups.cpu_parent is not None
        self._pool = WarmPool(self._start_sandbox, warm)
        self._removals: set[asyncio.Task[None]] = set()

    def describe(self) -> dict[str, str]:
        """What the start-up log says about how jobs are confined."""
        limits = self.cgroups.describe() if self.cgroups else "rlimits (per process)"
        cpu = self.config.job_cpu_seconds or "the timeout + 5"
        per = "for the whole job (cgroup)" if self.cpu_per_job else "per process (RLIMIT_CPU)"
        return {
            "sandbox": self.sandbox.describe() if self.sandbox else "off",
            "limits": f"{limits}: memory {self.config.job_memory_mb} MiB, "
            f"{self.config.job_max_procs} processes, CPU time {cpu} s {per}",
        }

    async def aclose(self) -> None:
        """Stop the sandboxes kept ready, and finish removing job folders (the
        actor calls this on its way out)."""
        await self._pool.close()
        await asyncio.gather(*self._removals)

    def _new_cgroup(self) -> cgroup.JobCgroup | None:
        if self.cgroups is None:
            return None
        name = secrets.token_hex(8)
        return self.cgroups.create(name, self.memory, self.config.job_max_procs)

    def _rlimits(self) -> list[tuple[int, int]]:
        """(resource, limit) for every process of a job; the cgroup, where
        there is one, bounds memory and processes for all of them together."""
        limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_NOFILE, MAX_OPEN_FILES)]
        if self.cgroups is None:
            limits += [(resource.RLIMIT_AS, self.memory),
                       (resource.RLIMIT_NPROC, self.config.job_max_procs)]  # fmt: skip
        return limits

    async def _start_sandbox(self) -> Ready:
        """A bwrap waiting for its job (gateway/actor/warm.py), in its cgroup."""
        assert self.sandbox is not None
        command = [sys.executable, "-I", "-B", "-u", f"{JOB_DIR}/{SCRIPT}"]  # -u: lines live
        (read, write), (env_read, env_write), rules = sandbox_pipes()
        try:
            argv = self.sandbox.argv(command, read, env_read, rules)
            proc = await asyncio.create_subprocess_exec(
                *argv, env={}, cwd=tempfile.gettempdir(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True, pass_fds=(read, env_read, rules),
            )  # fmt: skip
        except BaseException:
            os.close(write)
            os.close(env_write)
            raise
        finally:
            for fd in (read, env_read, rules):
                os.close(fd)
        ready = Ready(proc, None, write, env_write)
        try:
            for limit, value in self._rlimits():
                resource.prlimit(proc.pid, limit, (value, value))
            ready.cgroup = self._new_cgroup()
            if ready.cgroup is not None:
                ready.cgroup.add(proc.pid)  # it forks nothing before its job arrives
        except BaseException:
            await ready.discard()
            raise
        return ready

    async def _start_unconfined(
        self, workdir: Path, env: dict[str, str], cpu_seconds: int
    ) -> tuple[asyncio.subprocess.Process, cgroup.JobCgroup | None]:
        """HERO_SANDBOX=off: python straight in the job folder, limits set between fork and exec."""
        cg = self._new_cgroup()
        limits = self._rlimits()
        if not self.cpu_per_job:
            limits.append((resource.RLIMIT_CPU, cpu_seconds))

        def preexec() -> None:  # pragma: no cover - runs in the child before exec
            for limit, value in limits:
                resource.setrlimit(limit, (value, value))
            if cg is not None:
                cg.add()

        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-B", "-u", str(workdir / SCRIPT), cwd=workdir, env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True, preexec_fn=preexec,
        )  # fmt: skip
        return proc, cg

    def _cpu(self, timeout: int) -> int:
        return self.config.job_cpu_seconds or timeout + 5

    async def __call__(self, ctx: JobContext) -> str:
        job = ctx.job
        ctx.joblog.open()  # a log that cannot be written fails the job before it runs
        workdir = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
        cg: cgroup.JobCgroup | None = None
        watch: asyncio.Task[None] | None = None
        cpu = self._cpu(job.timeout)
        try:
            (workdir / SCRIPT).write_bytes(as_stored(job.script))
            env = self._environment(job, workdir)
            if self.sandbox:
                ready = await self._pool.take()
                proc, cg = ready.proc, ready.cgroup
                ready.launch(self.sandbox.job_args(workdir), self.sandbox.env_file(env),
                             None if self.cpu_per_job else cpu)  # fmt: skip
            else:
                proc, cg = await self._start_unconfined(workdir, env, cpu)
            if cg is not None and cg.cpu is not None:
                watch = asyncio.create_task(_watch_cpu(cg, cpu))
            code, stdout, stderr = await _wait(proc, ctx.joblog, self.config.job_max_output)
        finally:
            if watch is not None:
                watch.cancel()
            hit = await self._clean_up(workdir, cg, cpu)
        return self._result(code, stdout, stderr, hit, cpu)

    def _environment(self, job: Claimed, workdir: Path) -> dict[str, str]:
        """The job's environment, from scratch; JobFailed saying why if no
        process can have it. Its script is made readable to the job's uid here too."""
        inside = JOB_DIR if self.sandbox else str(workdir)
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
        try:
            check_environment(env)
        except ValueError as exc:
            raise JobFailed(str(exc)) from None
        if self.sandbox:
            self.sandbox.prepare(workdir)
        return env

    async def _clean_up(self, workdir: Path, cg: cgroup.JobCgroup | None, cpu: int) -> str | None:
        """Kill what is left of the job (its cgroup), then remove its folder;
        the limit it hit, if any. The removal is not the job's to cancel: a
        timeout or stop meanwhile left the folder, of any size the job made
        it, on the host for good."""
        hit: str | None = None
        try:
            if cg is not None:
                hit = "cpu" if cg.cpu is not None and cg.cpu_seconds() >= cpu else cg.limit_hit()
                await asyncio.to_thread(cg.remove)
        finally:
            removal = asyncio.ensure_future(_remove(workdir))
            self._removals.add(removal)
            removal.add_done_callback(self._removals.discard)
            await asyncio.shield(removal)
        return hit

    def _result(
        self, code: int, stdout: bytearray, stderr: bytearray, hit: str | None, cpu: int
    ) -> str:
        """The job's output; JobFailed with its stderr's tail (and the limit it
        hit) when it exited non-zero."""
        limit = self.config.job_max_output
        text = stdout[:limit].decode("utf-8", "replace")
        if len(stdout) > limit:
            text += f"\n[output cut at {limit} bytes]"
        if code != 0:  # the output is the stdout, the error the stderr's tail
            tail = stderr.decode("utf-8", "replace").strip()
            if hit:
                cap = {"memory": f"{self.config.job_memory_mb} MiB", "cpu": f"{cpu} s",
                       "processes": str(self.config.job_max_procs)}[hit]  # fmt: skip
                tail = f"{tail}\n{LIMIT_NAMES[hit]} of the job hit ({cap})".strip()
            raise JobFailed(tail or f"exit code {code}", output=text)
        return text


async def _remove(folder: Path) -> None:
    """A job's folder, gone, and off the event loop: what is in it is the
    job's (with the sandbox off, a million files: seconds of unlinks, while
    the actor's heartbeat must go on)."""
    await asyncio.to_thread(_remove_now, folder)


def _remove_now(folder: Path) -> None:
    """``folder`` and all in it; a tree deeper than ``shutil.rmtree`` recurses
    (a RecursionError, and the tree left on disk) goes by ``rm -rf``, at any
    depth."""
    try:
        shutil.rmtree(folder)
        return
    except (OSError, RecursionError):
        pass
    try:
        quiet = subprocess.DEVNULL
        rm = [RM, "-rf", "--one-file-system", "--", str(folder)]
        done = subprocess.run(rm, stdin=quiet, stdout=quiet, stderr=quiet, check=False)
        removed = done.returncode == 0
    except OSError:  # no process to be had (out of files, of processes)
        removed = False
    if not removed:
        log.warning("could not remove a job's folder", extra={"folder": str(folder)})


def orphaned_folders(tmp: Path) -> list[Path]:
    """The job folders in ``tmp`` that no running actor owns: those of this
    uid whose actor's pid (``FOLDER_PREFIX<pid>-``) runs no more. An actor
    killed with SIGKILL, or lost with its machine's power, never removed
    its own. Actors sharing a temp folder share a pid namespace (one host,
    one container), so a pid that is not running is no live actor's; one
    taken by another process since keeps its folders until that ends."""
    found = []
    for folder in tmp.glob(f"{FOLDER_PREFIX}*-*"):
        pid = folder.name[len(FOLDER_PREFIX) :].partition("-")[0]
        try:
            info = folder.lstat()
        except OSError:  # removed meanwhile
            continue
        mine = stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
        if mine and pid.isdigit() and int(pid) > 0 and not _running(int(pid)):
            found.append(folder)
    return found


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _keep_inherited_files_from_jobs() -> None:
    """Mark every file this process was started with (beyond stdin, stdout and
    stderr) close-on-exec. Python opens its own files so, but whatever started
    the actor may have left it more (a shell's ``exec 7>>file``, a pipe), and
    uvloop's subprocesses, unlike asyncio's, do not close them: every job,
    sandboxed or not, would get them, to write to."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own, closed by now
                os.set_inheritable(fd, False)


async def _watch_cpu(cg: cgroup.JobCgroup, seconds: int) -> None:
    """Kill the whole job once all its processes together used ``seconds`` of
    CPU time (cancelled when the job ends first). One small file read per
    CPU_POLL, none before the first: the job's start pays nothing."""
    while True:
        await asyncio.sleep(CPU_POLL)
        if cg.cpu_seconds() >= seconds:
            with contextlib.suppress(RuntimeError):  # remove() after the job retries, and says so
                await asyncio.to_thread(cg.kill)
            return


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
