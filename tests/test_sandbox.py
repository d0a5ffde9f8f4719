"""The python job sandbox, attacked as a hostile job would: real actors, real
jobs, real bwrap and cgroups. Each test fails if the wall it checks is gone."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import python_actor, seccomp, warm
from gateway.actor.cgroup import PREFIX, detect
from gateway.actor.joblog import JobLog
from gateway.actor.python_exec import FOLDER_PREFIX
from gateway.actor.sandbox import (
    ENV_FILE,
    JOB_DIR,
    LOAD_ENV,
    SHELL,
    Sandbox,
    SandboxUnavailable,
    check_environment,
    python_paths,
)
from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.supervisor import JobSpec, Supervisor, keys
from tests.conftest import ROOT
from tests.helpers import (
    eventually,
    host_pids,
    job,
    marked_gone,
    marked_running,
    sleeper,
    spawn_actor,
)

CONNECT = (
    "import socket, sys\n"
    "for host, port in {targets!r}:\n"
    "    try:\n"
    "        socket.create_connection((host, port), timeout=2).close()\n"
    "        print(host, 'open')\n"
    "    except OSError as exc:\n"
    "        print(host, 'closed', type(exc).__name__)\n"
)


def host_address() -> str:
    """One of this machine's own non-loopback IPv4 addresses."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"],
                         capture_output=True, text=True, check=False).stdout  # fmt: skip
    found = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
    if not found:
        pytest.skip("no non-loopback IPv4 address on this machine")
    return str(found[0])


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port open on every interface of the host."""
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))
    sock.listen()
    yield sock
    sock.close()


async def test_redis_and_the_hosts_addresses_are_unreachable(
    sup: Supervisor, actors: Any, redis_server: EmbeddedRedis, listener: socket.socket
) -> None:
    actors()
    address, port = host_address(), listener.getsockname()[1]
    targets = [("127.0.0.1", redis_server.port), (address, port)]
    # positive control: outside the sandbox both answer
    for target in targets:
        socket.create_connection(target, timeout=2).close()
    result = await sup.run(job(CONNECT.format(targets=targets)), wait=30)
    assert result["output"] == (
        f"127.0.0.1 closed ConnectionRefusedError\n{address} closed OSError\n"
    ), result


async def test_the_actor_and_other_jobs_are_invisible(sup: Supervisor, config: Config) -> None:
    actor = python_actor(config, concurrency=2)
    serving = asyncio.create_task(actor.serve())
    marker = f"hero-test-{uuid.uuid4().hex}"
    try:
        spec = job(sleeper(marker, 30), job_id="other", timeout=30)
        other = asyncio.ensure_future(sup.run(spec, wait=40))
        await eventually(lambda: marked_running(marker), within=20)
        other_pid = host_pids(marker)[0]
        script = (
            "import os\n"
            "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
            f"for path in ['/proc/{os.getpid()}/environ', '/proc/{other_pid}/cwd/job.py']:\n"
            "    try:\n"
            "        open(path).read()\n"
            "        print('read', path)\n"
            "    except OSError as exc:\n"
            "        print(type(exc).__name__)\n"
        )
        result = await sup.run(job(script), wait=30)
        assert result["output"] == "[1, 2]\nFileNotFoundError\nFileNotFoundError\n", result
        await sup.stop("other")
        assert (await other)["status"] == "stopped"
    finally:
        actor.stop()
        await serving


async def test_the_job_runs_as_an_unprivileged_uid_with_no_capabilities(
    sup: Supervisor, actors: Any
) -> None:
    actors()
    script = (
        "import os, subprocess\n"
        "print(subprocess.run(['id'], capture_output=True, text=True).stdout.strip())\n"
        "for line in open('/proc/self/status'):\n"
        "    if line.startswith(('CapEff', 'CapBnd', 'NoNewPrivs', 'NSpid')):\n"
        "        print(line.split()[0], line.split()[1:])\n"
    )
    result = await sup.run(job(script), wait=30)
    assert result["output"] == (
        "uid=65534(nobody) gid=65534(nogroup) groups=65534(nogroup)\n"
        "NSpid: ['2']\n"
        "CapEff: ['0000000000000000']\n"
        "CapBnd: ['0000000000000000']\n"
        "NoNewPrivs: ['1']\n"
    ), result


#: A job that tries what the seccomp filter refuses (x86-64 syscall numbers),
#: then what every job does. A clone that got through would print "made".
ESCAPES = """
import asyncio, ctypes, multiprocessing, os, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def said(r):
    return 'ok' if r >= 0 else os.strerror(ctypes.get_errno())
print('unshare user', said(libc.unshare(0x10000000)))
print('unshare mount', said(libc.unshare(0x00020000)))
for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
             0x40000000):
    pid = libc.syscall(56, flag | 17, 0, 0, 0, 0)  # clone(flag | SIGCHLD)
    if pid == 0:
        os._exit(0)
    print(hex(flag), 'made' if pid > 0 else said(pid))
for name, nr in (('setns', 308), ('keyctl', 250), ('add_key', 248), ('bpf', 321),
                 ('perf_event_open', 298), ('userfaultfd', 323), ('clone3', 435),
                 ('io_uring_setup', 425)):
    print(name, said(libc.syscall(nr, 0, 0, 0, 0, 0)))
# unshare(CLONE_NEWUSER) through int 0x80, the i386 entry: mov eax, 310; mov ebx, flag
i386 = ("import ctypes, mmap; m = mmap.mmap(-1, 4096, prot=7); "
        "m.write(bytes([0xb8, 54, 1, 0, 0, 0xbb, 0, 0, 0, 16, 0xcd, 0x80, 0xc3])); "
        "ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()")
print('i386 unshare: exit', subprocess.run([sys.executable, '-c', i386]).returncode)
t = threading.Thread(target=print, args=('a thread',))
t.start(); t.join()
print(subprocess.run(['echo', 'a program'], capture_output=True, text=True).stdout.strip())
with multiprocessing.get_context('fork').Pool(2) as pool:
    print('a pool', pool.map(abs, [-1, -2]))
async def spawned():
    proc = await asyncio.create_subprocess_exec('true')
    return await proc.wait()
print('asyncio subprocess', asyncio.run(spawned()))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 syscall numbers")
async def test_the_job_makes_no_namespace_and_reaches_no_keyring_or_io_uring(
    sup: Supervisor, actors: Any
) -> None:
    """The seccomp filter: a job (of a root actor too, whose bwrap makes no
    user namespace) cannot make a namespace of its own, in which it would
    hold every capability, nor reach the kernel interfaces no job needs; a
    32-bit call kills its process. Threads, forks, pools and programs still
    work (clone3 says ENOSYS, and the C library falls back to clone)."""
    actors()
    result = await sup.run(job(ESCAPES), wait=60)
    eperm, enosys = "Operation not permitted", "Function not implemented"
    denied = ("setns", "keyctl", "add_key", "bpf", "perf_event_open", "userfaultfd")
    flags = ["0x20000", "0x2000000", "0x4000000", "0x8000000", "0x10000000", "0x20000000",
             "0x40000000"]  # fmt: skip
    assert result["output"].splitlines() == [
        f"unshare user {eperm}",
        f"unshare mount {eperm}",
        *(f"{flag} {eperm}" for flag in flags),
        *(f"{name} {eperm}" for name in denied),
        f"clone3 {enosys}",
        f"io_uring_setup {enosys}",
        "i386 unshare: exit -31",  # SIGSYS
        "a thread",
        "a program",
        "a pool [1, 2]",
        "asyncio subprocess 0",
    ], result


async def test_no_write_outside_the_job_folder(
    sup: Supervisor, actors: Any, session_tmp: Path
) -> None:
    actors()
    name = f"hero-test-{uuid.uuid4().hex}"
    outside = [ROOT / name, Path(sys.prefix) / name, session_tmp / name]
    private = [f"/tmp/{name}", "mine"]  # its own /tmp and its own folder
    script = (
        "for path in " + repr([str(p) for p in outside] + private) + ":\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print('wrote')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    result = await sup.run(job(script), wait=30)
    lines = result["output"].splitlines()
    assert lines[-2:] == ["wrote", "wrote"] and "wrote" not in lines[:-2], lines
    assert not any(path.exists() for path in [*outside, Path("/tmp", name)])


async def test_the_callers_environment_reaches_no_program_run_as_root(
    sup: Supervisor, actors: Any
) -> None:
    """env_vars are the caller's: set by bwrap, they reached setpriv while it was
    still root, whose loader honoured LD_PRELOAD (a job's own code as root on
    the host). Only the job's own programs may see them, exactly as sent."""
    if os.geteuid() != 0:
        pytest.skip("an unprivileged actor runs no program as root")
    actors()
    tricky = "it's \"$HOME\" `id` $(id) \\ end\nsecond line '' \u00e9"
    env = {
        "LD_DEBUG": "files",
        "LD_PRELOAD": "/nonexistent-hero.so",
        "TRICKY": tricky,
        "OPTIND": "abc",
        "IFS": "/",
        "PATH": "/nowhere",
    }  # the shell's own names: a string each
    script = (
        "import os\n"
        "print(repr(os.environ['TRICKY']), os.environ['LD_PRELOAD'])\n"
        "print(sorted((k, v) for k, v in os.environ.items() if k in ('OPTIND', 'IFS', 'PATH')))\n"
        "print(sorted(os.environ))\n"
    )
    result = await sup.run(job(script, job_id="env-root", env_vars=env), wait=30)
    assert result["output"] == (
        f"{tricky!r} /nonexistent-hero.so\n"
        "[('IFS', '/'), ('OPTIND', 'abc'), ('PATH', '/nowhere')]\n"
        "['CALLER_ID', 'CONTEXT_ID', 'HOME', 'IFS', 'JOB_ID', 'LANG', 'LD_DEBUG', 'LD_PRELOAD',"
        " 'OPTIND', 'PATH', 'TMPDIR', 'TRICKY']\n"
    ), result
    logs = (await sup.logs("env-root"))["logs"]
    assert "needed by" in logs  # the loader saw LD_PRELOAD: in the job's python
    loaded_for = {line.split("needed by")[1].split()[0] for line in logs.splitlines()
                  if "/nonexistent-hero.so" in line and "needed by" in line}  # fmt: skip
    assert loaded_for and not any("setpriv" in p or "bwrap" in p for p in loaded_for), logs


async def test_an_environment_no_process_can_have_fails_the_job_clearly(
    sup: Supervisor, actors: Any
) -> None:
    """A JobSpec given to the supervisor as is, like an outside producer's hash,
    need not follow the contract's env_vars pattern: such a name would be
    shell text in the job's environment file."""
    actors()
    spec = JobSpec(script="print('ran')", script_type="python", job_id="bad-env",
                   env_vars={"A=1;echo injected;B": "x"})  # fmt: skip
    await sup.submit_many([spec])
    result = await sup.output("bad-env", wait=30)
    assert result["status"] == "error", result
    assert result["error"] == "env_vars: 'A=1;echo injected;B' cannot be a variable name", result
    # names outside the contract's pattern but a process's to have reach the job
    script = "import os; print(os.environ['my-var'], os.environ['-n'])"
    spec = JobSpec(script=script, script_type="python", job_id="odd-env",
                   env_vars={"my-var": "x", "-n": "y"})  # fmt: skip
    await sup.submit_many([spec])
    assert (await sup.output("odd-env", wait=30))["output"] == "x y\n"


async def test_a_job_gets_none_of_the_files_its_actor_was_started_with(
    sup: Supervisor, config: Config, tmp_path: Path
) -> None:
    """A shell's ``exec 7>>file`` before starting the actor left it an open file;
    uvloop's subprocesses, unlike asyncio's, pass such files to every job."""
    marker = tmp_path / f"actor-file-{uuid.uuid4().hex}"
    opened = os.open(marker, os.O_WRONLY | os.O_CREAT, 0o666)
    fd = os.dup2(opened, 240, inheritable=False)  # far above what the job's own files take
    os.close(opened)
    instance = f"fds-{uuid.uuid4().hex[:8]}"
    proc = spawn_actor(  # uvloop's: asyncio's subprocesses close such files themselves
        config, "--script-type", "python", "--instance", instance, pass_fds=(fd,),
        HERO_EVENT_LOOP="uvloop",
    )  # fmt: skip
    os.close(fd)
    script = (
        "import os\n"
        "for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):\n"
        "    try:\n"
        "        print(fd, os.readlink(f'/proc/self/fd/{fd}'))\n"
        "        os.write(fd, b'') if fd > 2 else None\n"
        "    except OSError as exc:\n"
        "        print(fd, type(exc).__name__)\n"
        f"os.write({fd}, b'written by the job')\n"
    )
    try:
        result = await sup.run(job(script, group="default", instance=instance), wait=30)
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 15)
    assert marker.name not in result["output"], result
    assert result["status"] == "error" and "Bad file descriptor" in result["error"], result
    assert marker.read_bytes() == b""


DEEP_TREE = (
    "import os\n"
    "fd = os.open('.', os.O_RDONLY)\n"
    "for _ in range(3000):\n"
    "    os.mkdir('d', dir_fd=fd)\n"
    "    inner = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
    "    os.close(fd)\n"
    "    fd = inner\n"
)


def job_folders() -> set[Path]:
    """This process's actors' job folders (in-process actors: the test's pid)."""
    return set(Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}{os.getpid()}-*"))


async def test_a_job_folder_is_removed_even_when_its_job_times_out_meanwhile(
    sup: Supervisor, actors: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder's removal ran in the job's own time: a job that ended just
    before its timeout, leaving a tree slow to remove and too deep for rmtree,
    had the removal cancelled and its folder left on the host for good."""
    rmtree = shutil.rmtree

    def slow_rmtree(path: str | Path, *args: Any, **kwargs: Any) -> None:
        if FOLDER_PREFIX in str(path):  # a job's, in a thread: the deadline passes meanwhile
            time.sleep(2)
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr("gateway.actor.python_exec.shutil.rmtree", slow_rmtree)
    actors()
    before = job_folders()
    result = await sup.run(job(DEEP_TREE + "print('deep')", timeout=1), wait=30)
    assert result["status"] == "timeout", result
    await eventually(lambda: asyncio.sleep(0, job_folders() <= before), within=20)


async def test_a_job_folder_too_deep_for_rmtree_is_removed(sup: Supervisor, actors: Any) -> None:
    """shutil.rmtree recurses: a deeper tree raised RecursionError, which became
    the job's error, and the folder stayed on the host."""
    actors()
    before = job_folders()
    result = await sup.run(job(DEEP_TREE + "print('deep')", timeout=60), wait=60)
    assert (result["status"], result["output"]) == ("finished", "deep\n"), result
    assert job_folders() <= before


async def test_no_daemon_outlives_its_job(sup: Supervisor, actors: Any) -> None:
    """A double-forked, setsid grandchild that holds stdout dies with the job,
    and the job ends when its main process does, with its output."""
    actors()
    marker = f"hero-test-{uuid.uuid4().hex}"
    script = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"  # noqa: E501
        "    os._exit(0)\n"
        "os.wait()\n"
        "time.sleep(0.5)\n"
        "print('main done')\n"
    )
    began = time.monotonic()
    result = await sup.run(job(script, timeout=60), wait=60)
    assert (result["status"], result["output"]) == ("finished", "main done\n")
    assert time.monotonic() - began < 20
    await eventually(lambda: marked_gone(marker))
    # what is left of this process's job cgroups: the one sandbox kept ready
    # for the next job, a lone bwrap waiting for its options
    assert [tasks(group) for group in job_cgroups()] == [1]


def job_cgroups() -> list[Path]:
    """The pids cgroups of jobs of this process's actors."""
    cgroups = detect()
    assert cgroups is not None, "these machines give the actor a cgroup"
    return list(cgroups.pids_parent.glob(f"{PREFIX}{os.getpid()}-*"))


def tasks(group: Path) -> int:
    return len((group / "cgroup.procs").read_text().split())


async def test_the_process_limit_holds_for_the_whole_job(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    actors(python_actor(dataclasses.replace(config, job_max_procs=8)))
    script = (
        "import subprocess, sys\n"
        "children = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])"
        " for _ in range(20)]\n"
    )
    result = await sup.run(job(script), wait=60)
    assert result["status"] == "error"
    assert "BlockingIOError" in result["error"]
    assert result["error"].endswith("process limit of the job hit (8)")


async def test_the_memory_limit_holds_for_the_whole_job(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    actors(python_actor(dataclasses.replace(config, job_memory_mb=100)))
    script = (  # six children of 30 MiB each: no single process passes the limit
        "import os, time\n"
        "for _ in range(6):\n"
        "    if os.fork() == 0:\n"
        "        block = bytearray(30 << 20)\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "for _ in range(6):\n"
        "    _, status = os.wait()\n"
        "    if os.waitstatus_to_exitcode(status) != 0:\n"
        "        raise SystemExit(f'a child was killed: {status}')\n"
    )
    result = await sup.run(job(script, timeout=60), wait=60)
    assert result["status"] == "error"
    assert result["error"].startswith("a child was killed")
    assert result["error"].endswith("memory limit of the job hit (100 MiB)")


async def test_the_job_folder_is_in_memory_within_the_memory_limit(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    """/job was a host folder bound in: a job wrote 3 GiB to the host's disk.
    It is a tmpfs now, charged to the job's memory (or, without cgroups, no
    larger than it), so a job writing 200 MiB into it with 64 MiB is stopped."""
    actors(python_actor(dataclasses.replace(config, job_memory_mb=64)))
    script = (
        "mounts = [line.split() for line in open('/proc/self/mountinfo')]\n"
        "print([m[m.index('-') + 1] for m in mounts if m[4] == '/job'], flush=True)\n"
        "n = 0\n"
        "try:\n"
        "    with open('/job/big', 'wb') as f:\n"
        "        while n < 200:\n"
        "            f.write(b'x' * (1 << 20))\n"
        "            f.flush()\n"
        "            n += 1\n"
        "except OSError as exc:\n"
        "    print('full', exc.errno, n)\n"
    )
    result = await sup.run(job(script, timeout=60), wait=60)
    first, *rest = result["output"].splitlines()
    assert first == "['tmpfs']", result
    if result["status"] == "error":  # the cgroup counted the pages: killed at its limit
        assert result["error"].endswith("memory limit of the job hit (64 MiB)"), result
    else:  # no cgroup: the tmpfs's own size stopped it
        assert rest and rest[0].split()[:2] == ["full", "28"], result
        assert int(rest[0].split()[2]) <= 64, result


BUSY = (  # four children, each busy for {each} s of CPU time, saying how far it got
    "import os, time\n"
    "for child in range(4):\n"
    "    if os.fork() == 0:\n"
    "        mark = 0.0\n"
    "        while (used := time.process_time()) < {each}:\n"
    "            if used >= mark:\n"
    "                os.write(1, f'{{child}} {{used}}\\n'.encode())  # one write: whole lines\n"
    "                mark = used + 0.05\n"
    "        os._exit(0)\n"
    "for _ in range(4):\n"
    "    os.wait()\n"
    "print('all done')\n"
)


async def test_the_cpu_time_limit_holds_for_the_whole_job(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    """Each child alone stays under the limit (a per-process RLIMIT_CPU would
    let the job finish, after 6 s of CPU); together they pass it by far."""
    actors(python_actor(dataclasses.replace(config, job_cpu_seconds=2)))
    result = await sup.run(job(BUSY.format(each=1.5), timeout=60), wait=60)
    assert result["status"] == "error", result
    assert result["error"].endswith("CPU time limit of the job hit (2 s)"), result
    assert "all done" not in result["output"]
    last: dict[str, float] = {}
    for line in result["output"].splitlines():
        child, used = line.split()
        last[child] = float(used)
    assert max(last.values()) < 1.5
    # about the limit (a loaded actor loop may overrun it a little), far below 4 x 1.5
    assert 1.2 < sum(last.values()) < 4.0, last


async def test_a_job_under_its_cpu_time_limit_is_unaffected(
    sup: Supervisor, actors: Any, config: Config
) -> None:
    actors(python_actor(dataclasses.replace(config, job_cpu_seconds=2)))
    result = await sup.run(job(BUSY.format(each=0.2), timeout=60), wait=60)
    assert result["status"] == "finished", result
    assert result["output"].endswith("all done\n")


async def test_the_log_file_is_capped(sup: Supervisor, actors: Any, config: Config) -> None:
    actors(python_actor(dataclasses.replace(config, job_max_log=100_000)))
    script = "import sys\nfor _ in range(1000):\n    print('x' * 1000, file=sys.stderr)\n"
    result = await sup.run(job(script, job_id="chatty"), wait=60)
    assert result["status"] == "finished"
    text = Path((await sup.get("chatty"))["log_path"]).read_text()
    assert text.endswith("\n[log cut at 100000 bytes]\n")
    assert len(text) < 100_100
    assert (await sup.logs("chatty"))["logs"].endswith("[log cut at 100000 bytes]\n")


async def test_killing_its_parent_does_not_kill_the_actor(
    sup: Supervisor, config: Config, processes: list[subprocess.Popen[bytes]]
) -> None:
    actor = spawn_actor(config, "--script-type", "python", "--instance", "tough")
    processes.append(actor)
    script = (
        "import os, signal\n"
        "for pid in (os.getppid(), 1):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
        "print('still here')\n"
    )
    first = await sup.run(job(script, instance="tough", group="default"), wait=30)
    assert first["status"] == "finished" and "still here" in first["output"], first
    after = await sup.run(job("print('served')", instance="tough", group="default"), wait=30)
    assert after["output"] == "served\n" and actor.poll() is None


def test_an_actor_without_the_sandbox_refuses_to_start(config: Config) -> None:
    env = dict(os.environ, HERO_REDIS_URL=config.redis_url or "", PATH="/nonexistent")
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "actor", "--script-type", "python"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "bwrap not found" in proc.stderr and "HERO_SANDBOX=off" in proc.stderr
    assert "Traceback" not in proc.stderr


async def test_sandbox_off_warns_and_marks_the_started_event_and_hash(
    sup: Supervisor, config: Config, rds: aioredis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    actor = spawn_actor(config, "--script-type", "python", "--instance", "loose",
                        log=subprocess.PIPE, PATH="/nonexistent", HERO_SANDBOX="off")  # fmt: skip
    processes.append(actor)
    spec = job("print('unconfined')", job_id="loose-1", group="default", instance="loose")
    assert (await sup.run(spec, wait=30))["output"] == "unconfined\n"  # claimed from its queue
    spec = job("print('again')", job_id="loose-2")  # handed straight to the idle actor
    assert (await sup.run(spec, wait=30))["output"] == "again\n"
    for job_id in ("loose-1", "loose-2"):
        assert (await rds.hget(keys.job(job_id), "sandbox")) == "off"
    started = [f for _, f in await rds.xrange(keys.EVENTS) if f["event"] == "started"]
    assert [f.get("sandbox") for f in started] == ["off", "off"]
    actor.terminate()
    _, stderr = await asyncio.to_thread(actor.communicate, timeout=20)
    assert b"WITHOUT a sandbox" in stderr


def test_joblog_caps_the_file_and_keeps_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.log"
    path.write_bytes(b"x" * 10)  # an earlier attempt's lines count against the cap
    log = JobLog(str(path), limit=50, tail=20)
    log.write(b"a" * 30)
    log.write(b"b" * 30)
    log.write(b"c" * 30)
    log.close()
    assert path.read_bytes() == b"x" * 10 + b"a" * 30 + b"b" * 10 + b"\n[log cut at 50 bytes]\n"
    assert log.text() == "\n[log cut at 50 bytes]\n"[-20:]
    quiet = JobLog(str(tmp_path / "quiet.log"), limit=50)  # made by the first write only
    quiet.close()
    assert not (tmp_path / "quiet.log").exists() and quiet.text() == ""
    written = JobLog(str(tmp_path / "w.log"), limit=50)
    written.write(b"one")
    written.close()
    for closed in (written, quiet):  # a write after the job's end fails, as it did
        with pytest.raises(ValueError):
            closed.write(b"late")
    assert not (tmp_path / "quiet.log").exists()


def test_the_sandbox_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = Sandbox(job_uid=4242).argv(["python", "job.py"], 7, 8, 9)
    text = " ".join(argv)
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert "--seccomp 9" in text  # the filter comes down fd 9 (seccomp.pipe)
    # the job's folder comes down fd 7, its environment down fd 8 into a read-only file
    assert f"--perms 0444 --ro-bind-data 8 {ENV_FILE} --chdir {JOB_DIR} --args 7 --" in text
    assert "--tmpfs /tmp" in text and "--proc /proc" in text
    assert "--reuid 4242 --regid 4242 --clear-groups" in text and "--no-new-privs" in text
    # the environment is read by a shell run after setpriv has dropped root
    assert argv[-6:] == [SHELL, "-c", LOAD_ENV, "sh", "python", "job.py"]
    assert next(i for i, a in enumerate(argv) if "setpriv" in a) < argv.index(SHELL)
    for path in python_paths():  # read-only, never the checkout around the venv
        assert f"--ro-bind {path} {path}" in text
    assert f"--bind {ROOT} " not in text and f"--ro-bind {ROOT} " not in text
    assert "--unshare-net" not in Sandbox(network=True).argv(["x"], 7, 8, 9)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # an unprivileged actor
    unprivileged = Sandbox().argv(["x"], 7, 8, 9)
    assert "--unshare-user" in unprivileged and not any("setpriv" in a for a in unprivileged)


def test_the_job_options_and_environment_sent_to_a_waiting_sandbox(tmp_path: Path) -> None:
    args = Sandbox(tmp_bytes=5 << 20).job_args(tmp_path)
    assert args.split(b"\0") == [
        b"--perms", b"1777", b"--size", b"5242880", b"--tmpfs", JOB_DIR.encode(),
        b"--ro-bind", str(tmp_path / "job.py").encode(), f"{JOB_DIR}/job.py".encode(),
        b"--clearenv", b"",
    ]  # fmt: skip
    assert Sandbox.env_file({"A": "1", "B": "it's"}) == b"set -- A=1 'B=it'\"'\"'s' \"$@\"\n"
    assert Sandbox.env_file({"my-var": "x", "-n": "y"}) == b'set -- my-var=x -n=y "$@"\n'
    check_environment({"A_1": "x", "_b": "", "my-var": "x", "a.b": "y", "1A": "z"})
    with pytest.raises(ValueError, match="NUL"):
        check_environment({"A": "x\0y"})
    check_environment({"A": "é" * 65534})  # "A=" and 131,068 bytes: exec passes 131,071
    with pytest.raises(ValueError, match="longer than the 128 KiB"):
        check_environment({"A": "é" * 65535})
    for name in ("A=1;id;B", "", "A\0B"):  # an outside producer's env_vars
        with pytest.raises(ValueError, match="cannot be a variable name"):
            check_environment({name: "x"})


def test_a_sandbox_that_fails_its_check_says_what_to_change() -> None:
    with pytest.raises(SandboxUnavailable, match=r"exit code 1.*HERO_SANDBOX=off"):
        Sandbox(bwrap="false").check()  # a bwrap that cannot make anything


def test_without_libseccomp_the_sandbox_check_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An actor with the sandbox on refuses to start, saying what to install,
    rather than failing its first job (or its import) on a traceback."""
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # its import now fails
    seccomp.program.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match=r"libseccomp.*apt-get install libseccomp2"):
            Sandbox().check()
    finally:
        seccomp.program.cache_clear()


async def test_job_network_gives_the_job_the_hosts_network(
    sup: Supervisor, actors: Any, config: Config, listener: socket.socket
) -> None:
    actors(python_actor(dataclasses.replace(config, job_network=True)))
    target = [(host_address(), listener.getsockname()[1])]
    result = await sup.run(job(CONNECT.format(targets=target)), wait=30)
    assert result["output"] == f"{target[0][0]} open\n", result


async def test_without_cgroups_rlimits_bound_each_process(
    sup: Supervisor, actors: Any, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.actor.cgroup.detect", lambda: None)  # as in a container
    actors(python_actor(dataclasses.replace(config, job_memory_mb=100, job_cpu_seconds=1)))
    result = await sup.run(job("block = bytearray(300 << 20)"), wait=30)
    assert result["status"] == "error" and result["error"].endswith("MemoryError"), result
    # CPU time: RLIMIT_CPU stops the one busy process (SIGXCPU), not the job as a whole
    result = await sup.run(job("while True: pass", timeout=60), wait=60)
    assert result["status"] == "error" and "limit of the job" not in result["error"], result
    assert result["error"] == "exit code 152", result  # bwrap's 128 + SIGXCPU (24)


def test_an_interpreter_under_tmp_is_seen_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout under /tmp has its venv there: the job's private /tmp must not
    hide it (it is mounted first, the interpreter's folders on top)."""
    venv = tmp_path / "venv"
    assert str(venv).startswith("/tmp/")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    argv = " ".join(Sandbox().argv(["python"], 7, 8, 9))
    assert argv.index("--tmpfs /tmp") < argv.index(f"--ro-bind {venv} {venv}")
    Sandbox().check()  # a trivial job with that interpreter: SandboxUnavailable if hidden


def test_an_environment_past_a_pipes_size_fits_its_pipe() -> None:
    """bwrap reads the environment only once its namespaces are made, and the
    actor writes it from its event loop: the pipe is grown to hold it all."""
    read, write = os.pipe()
    try:
        os.set_blocking(write, False)
        warm.fit(write, 1024 * 1024)
        assert os.write(write, b"x" * 1024 * 1024) == 1024 * 1024  # never blocks
    finally:
        os.close(read)
        os.close(write)
