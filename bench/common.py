"""Helpers shared by every benchmark module: stats, machine facts, processes, probes.

This module imports only the standard library and redis-py, so both the
project venv (run.py, ours.py, ws_bench.py, scale.py) and the peers' venv
(bench/peers/*) can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeGuard

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"


# -- figures -----------------------------------------------------------------------

#: The peers' names in the results, as the tables print them.
PEER_LABELS = {
    "arq": "arq",
    "rq": "RQ",
    "celery": "Celery (Redis broker + backend)",
    "dramatiq": "Dramatiq (Redis broker + Results)",
    "saq": "SAQ",
    "taskiq": "taskiq (taskiq-redis)",
    "bullmq": "BullMQ (Node)",
}


def ok(result: object) -> TypeGuard[dict[str, Any]]:
    """A section's figures (not an error or a skip); narrows ``results.get(...)``."""
    return isinstance(result, dict) and "error" not in result and "skipped" not in result


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return float(ordered[rank - 1])


def latency_summary(samples_s: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "mean_ms": statistics.fmean(ms) if ms else float("nan"),
        "max_ms": max(ms) if ms else float("nan"),
        "calls": len(ms),
    }


def emit(result: dict[str, Any]) -> None:
    """A child benchmark's answer: one JSON line on stdout, tagged so logs can share it."""
    print("BENCH-RESULT " + json.dumps(result), flush=True)


def parse_result(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith("BENCH-RESULT "):
            parsed: dict[str, Any] = json.loads(line[len("BENCH-RESULT ") :])
            return parsed
    raise RuntimeError("no BENCH-RESULT line in output:\n" + stdout[-2000:])


# -- machine and conditions --------------------------------------------------------


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def memory_total() -> str:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 1024 / 1024:.1f} GiB"
    return "unknown"


def loadavg() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def command_version(argv: Sequence[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not installed"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory": memory_total(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "redis_server": command_version(["redis-server", "--version"]),
        "node": command_version(["node", "--version"]),
    }


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (VmRSS), 0 if it is gone."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process used so far (0 when gone)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks
    return 0.0


def redis_cpu(client: Any) -> float:
    """CPU seconds redis-server used so far (INFO cpu, user + sys); a sync client."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def aredis_cpu(client: Any) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def redis_persistence(url: str) -> dict[str, str]:
    """How a Redis persists (AOF on/off, fsync policy, RDB saves): the setting
    that most changes its CPU per write, printed with every figure."""
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        found: dict[str, str] = {}
        for name in ("appendonly", "appendfsync", "save"):
            found.update(client.config_get(name))
        return found
    finally:
        client.close()


def raise_nofile(want: int = 65536) -> int:
    """Raise this process's open-files limit (children inherit it); the new soft limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# -- processes ---------------------------------------------------------------------


class Procs:
    """Child processes started by one benchmark, each in its own session so the
    whole group can be ended; always ended on exit, by pid."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        log: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        out: Any = subprocess.DEVNULL
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            out = log.open("ab")
        proc = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {})},
            cwd=str(cwd) if cwd else None,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def stop_all(self, timeout: float = 10.0) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                continue
            if any(str(a).endswith("py-spy") for a in proc.args):  # type: ignore[union-attr]
                # py-spy writes its file when its target exits: end the target only
                for child in children(proc.pid):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(child, signal.SIGTERM)
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()

    def check_alive(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def children(pid: int) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(c) for c in text.split()]
    return []


@contextlib.contextmanager
def deadline(seconds: float, what: str) -> Iterator[Callable[[], None]]:
    """``check()`` raises once ``seconds`` have passed: every loop is bounded."""
    end = time.monotonic() + seconds

    def check() -> None:
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: gave up after {seconds:.0f}s")

    yield check


def wait_until(
    probe: Callable[[], bool], timeout: float, what: str, interval: float = 0.002
) -> float:
    """Poll ``probe`` until true; returns the perf_counter() at which it was seen true."""
    end = time.monotonic() + timeout
    while True:
        if probe():
            return time.perf_counter()
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not done after {timeout:.0f}s")
        time.sleep(interval)


def run_child(argv: list[str], *, cwd: Path, timeout: float) -> dict[str, Any]:
    """Run a benchmark child to its end; its BENCH-RESULT (stderr passes through)."""
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env={**os.environ, **python_env()},
        text=True,
        stdout=subprocess.PIPE,
        stderr=None,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}")
    return parse_result(proc.stdout)


def python_env() -> dict[str, str]:
    """Environment for bench children: the bench folder importable, no bytecode noise."""
    path = os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
