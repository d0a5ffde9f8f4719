"""The bubblewrap command line a python job runs under.

Namespaces: its own PID namespace (when the job's main process ends, the
kernel kills everything it started, daemons included), its own network
namespace with only loopback (unless the actor allows network), its own mount
namespace (system folders and the interpreter read-only; ``/job``, ``/tmp``
and ``/dev/shm``, in memory, the only writable places; a ``/proc`` showing only the
job), its own IPC and UTS namespaces. ``/job`` is a tmpfs of its own with
the script bound read-only into it from the host's job folder: what a job
writes is charged to its memory limit (the cgroup counts tmpfs pages) and
never reaches the host's disk, where a job once wrote 3 GiB into a bound
host folder. ``--die-with-parent``: an
actor killed with SIGKILL takes its jobs with it. A seccomp filter
(``seccomp``) keeps the job from making namespaces of its own and from the
kernel interfaces no job needs.

The job runs as a real unprivileged uid on the host. An actor running as
root makes the namespaces without a user namespace and drops to ``job_uid``
inside (``setpriv``: no groups, no capabilities, no new privileges), so
rlimits and file permissions apply as to any unprivileged process. An
unprivileged actor gets a user namespace from bwrap and the job keeps the
actor's own uid (bwrap drops every capability).

**The job's environment is set after the privileges are dropped.** Its
variables are the caller's (``env_vars``), and every program that starts
with them honours some: the dynamic loader of a program run as root loads
an ``LD_PRELOAD`` library before ``main``. Set by bwrap, they reached
``setpriv``, still root, so a job could run its own code as root on the
host. Now bwrap and ``setpriv`` start with an empty environment; the
variables come down a pipe into a read-only file (``ENV_FILE``), and a shell
already running as the job's uid reads them and execs ``env -i`` with them
before the job (``LOAD_ENV``). The shell never assigns them itself: some
names are its own (``OPTIND`` must be a number), and as arguments to ``env``
none is anything but a string.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.actor import seccomp
from gateway.model.job import as_stored

#: Where the job folder appears inside the sandbox.
JOB_DIR = "/job"
#: The script's file name, in the host's job folder and in JOB_DIR.
SCRIPT = "job.py"
#: The job's environment inside the sandbox: ``set -- 'NAME=value' ... "$@"``.
ENV_FILE = "/run/hero/job.env"
#: Run (as ``sh -c LOAD_ENV sh COMMAND...``) by the job's uid: ENV_FILE puts
#: the job's ``NAME=value`` words before the command's (``set --``), and
#: ``env -i`` makes them the environment of the command it execs (after
#: ``--``, a word starting with ``-`` is no option). ``"$@"`` is never split.
LOAD_ENV = f'. {ENV_FILE} && exec /usr/bin/env -i -- "$@"'
SHELL = "/bin/sh"
#: Linux's most bytes of one ``NAME=value`` string an exec passes on (MAX_ARG_STRLEN).
MAX_VARIABLE_BYTES = 128 * 1024 - 1
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")

HOW_TO_FIX = (
    "Install bubblewrap (Debian: apt-get install bubblewrap). In a container, the runtime "
    "must let it create namespaces: see the README (Deployment) for Docker and Kubernetes. "
    "Or set HERO_SANDBOX=off to run python jobs without a sandbox (trusted scripts only)."
)


class SandboxUnavailable(Exception):
    """bwrap is missing or cannot create namespaces here."""


def check_environment(env: Mapping[str, str]) -> None:
    """ValueError, saying why, for an environment no process can be given: a
    name that is empty or holds ``=`` (the contract's ``env_vars`` pattern is
    stricter, but an outside producer's hash need not follow it, and names
    such as ``my-var`` are a process's to have), a NUL anywhere, or a variable
    past Linux's limit for one (``MAX_VARIABLE_BYTES``: exec refuses it)."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"env_vars: {name[:64]!r} cannot be a variable name")
        if "\0" in value:
            raise ValueError(f"env_vars: {name[:64]} may not contain NUL characters")
        if len(as_stored(f"{name}={value}")) > MAX_VARIABLE_BYTES:
            raise ValueError(
                f"env_vars: {name[:64]} is longer than the 128 KiB a variable may hold"
            )


def pipes(count: int) -> list[tuple[int, int]]:
    """``count`` pipes (read end, write end); none left open if one fails."""
    made: list[tuple[int, int]] = []
    try:
        for _ in range(count):
            made.append(os.pipe())
    except BaseException:
        for read, write in made:
            os.close(read)
            os.close(write)
        raise
    return made


def sandbox_pipes() -> tuple[tuple[int, int], tuple[int, int], int]:
    """The pipes a sandbox starts with: its job's options and its environment
    (read end, write end: written once the job is known), and the read end of
    one holding the seccomp program, written and closed (a few hundred bytes:
    the write never blocks). None left open if one fails."""
    (args_read, args_write), (env_read, env_write), (rules, rules_write) = pipes(3)
    try:
        os.write(rules_write, seccomp.program())
    except BaseException:
        for fd in (args_read, args_write, env_read, env_write, rules):
            os.close(fd)
        raise
    finally:
        os.close(rules_write)
    return (args_read, args_write), (env_read, env_write), rules


def python_paths() -> list[str]:
    """What the actor's interpreter needs outside the system folders: its
    venv and its base installation (both mounted read-only)."""
    found: list[str] = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        for path in (prefix, os.path.realpath(prefix)):
            if path != "/usr" and not path.startswith("/usr/") and path not in found:
                found.append(path)
    return found


@dataclass(frozen=True)
class Sandbox:
    network: bool = False
    job_uid: int = 65534
    tmp_bytes: int = 64 << 20
    bwrap: str = "bwrap"
    setpriv: str = "setpriv"

    @property
    def privileged(self) -> bool:
        """Root makes the namespaces itself; anyone else through a user namespace."""
        return os.geteuid() == 0

    def describe(self) -> str:
        uid = f"uid {self.job_uid}" if self.privileged else f"uid {os.geteuid()} in a userns"
        net = "network allowed" if self.network else "no network"
        spaces = "own pid, mount, ipc and uts namespaces"
        return f"bwrap: {spaces}, {net}, {uid}, seccomp: no namespaces of its own"

    def argv(self, command: Sequence[str], args_fd: int, env_fd: int, filter_fd: int) -> list[str]:
        """bwrap to run ``command`` (paths as seen inside), once it has read the
        job's own options (``job_args``) from ``args_fd``: until then it waits,
        so it can be started before the job is known (gateway/actor/warm.py).
        Without them it stops at the ``--chdir`` into a JOB_DIR that is not there.
        Then it copies ``env_fd`` (``env_file``) to ENV_FILE, read-only, and
        runs the job under the seccomp program it reads from ``filter_fd``
        (``sandbox_pipes``)."""
        args = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--die-with-parent", "--new-session", "--seccomp", str(filter_fd)]  # fmt: skip
        if not self.network:
            args.append("--unshare-net")
        if not self.privileged:
            args += ["--unshare-user", "--disable-userns"]
        # the private /tmp first: a later bind inside it (an interpreter or a
        # venv under /tmp, as a checkout there has) is mounted on top of it,
        # where a tmpfs mounted last would hide it
        # /dev/shm too: bwrap's /dev has it root's 0755, where the job's uid
        # could make no semaphore (multiprocessing's locks) nor shared memory
        tmpfs = ("--perms", "1777", "--size", str(self.tmp_bytes), "--tmpfs")
        args += ["--proc", "/proc", "--dev", "/dev", *tmpfs, "/dev/shm", *tmpfs, "/tmp"]
        for path in SYSTEM:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        made: set[Path] = set()
        for path in python_paths():
            # folders bwrap makes on the way to a mount point are 0700 (root's):
            # make them 0755 first, so the job's uid can reach the interpreter
            for parent in reversed(Path(path).parents[:-1]):
                if parent not in made:
                    made.add(parent)
                    args += ["--dir", str(parent)]
            args += ["--ro-bind", path, path]
        args += ["--perms", "0444", "--ro-bind-data", str(env_fd), ENV_FILE,
                 "--chdir", JOB_DIR, "--args", str(args_fd), "--"]  # fmt: skip
        if self.privileged:
            uid = str(self.job_uid)
            args += [shutil.which(self.setpriv) or self.setpriv, "--reuid", uid, "--regid", uid,
                     "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                     "--no-new-privs", "--"]  # fmt: skip
        return [*args, SHELL, "-c", LOAD_ENV, "sh", *command]

    def job_args(self, workdir: Path) -> bytes:
        """The options that make a waiting sandbox one job's: a JOB_DIR of its
        own in memory (a tmpfs of ``tmp_bytes``, as ``/tmp``), the script of
        the host's ``workdir`` bound read-only into it, and nothing of the
        actor's environment."""
        script = str(workdir / SCRIPT)
        args = ("--perms", "1777", "--size", str(self.tmp_bytes), "--tmpfs", JOB_DIR,
                "--ro-bind", script, f"{JOB_DIR}/{SCRIPT}", "--clearenv")  # fmt: skip
        return b"".join(as_stored(arg) + b"\0" for arg in args)

    @staticmethod
    def env_file(env: Mapping[str, str]) -> bytes:
        """ENV_FILE's text: ``set -- 'NAME=value' ... "$@"``, each word of a
        checked environment (``check_environment``) quoted whole (``shlex``)."""
        words = "".join(" " + shlex.quote(f"{k}={v}") for k, v in env.items())
        return as_stored(f'set --{words} "$@"\n')

    @staticmethod
    def prepare(workdir: Path) -> None:
        """Let the job's uid read its script (whatever the actor's umask)."""
        (workdir / SCRIPT).chmod(0o444)

    def check(self) -> None:
        """Run a trivial job in the sandbox; SandboxUnavailable with what to change if it fails."""
        for tool in (self.bwrap, self.setpriv) if self.privileged else (self.bwrap,):
            if shutil.which(tool) is None:
                raise SandboxUnavailable(f"{tool} not found. {HOW_TO_FIX}")
        try:
            seccomp.program()
        except seccomp.FilterUnavailable as exc:
            raise SandboxUnavailable(f"{exc}. {HOW_TO_FIX}") from None
        with tempfile.TemporaryDirectory(prefix="hero-sandbox-check-") as tmp:
            (Path(tmp) / SCRIPT).write_bytes(b"")
            self.prepare(Path(tmp))
            (read, write), (env_read, env_write), rules = sandbox_pipes()
            try:
                proc = subprocess.Popen(
                    self.argv([sys.executable, "-I", "-c", "pass"], read, env_read, rules),
                    pass_fds=(read, env_read, rules),
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                )  # fmt: skip
                with contextlib.suppress(BrokenPipeError):  # exited already: see below
                    os.write(write, self.job_args(Path(tmp)))  # each fits in its pipe
                    os.write(env_write, self.env_file({"PATH": os.defpath}))
            except OSError as exc:
                raise SandboxUnavailable(f"bwrap failed: {exc}. {HOW_TO_FIX}") from None
            finally:
                for fd in (read, write, env_read, env_write, rules):
                    os.close(fd)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise SandboxUnavailable(f"bwrap hung on a trivial job. {HOW_TO_FIX}") from None
        if proc.returncode != 0:
            why = err.strip()[-500:] or f"exit code {proc.returncode}"
            raise SandboxUnavailable(f"bwrap cannot make the job sandbox here: {why}. {HOW_TO_FIX}")
