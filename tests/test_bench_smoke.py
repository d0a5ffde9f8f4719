"""The benchmark code must not rot: a small supervisor run, end to end.

Runs ``bench/run.py --quick --only supervisor,lua-cost`` as ``make bench`` would
(its own private redis-server, 1 and 2 actor processes, every result verified;
the Functions driven directly, timed) and checks the figures it wrote.
Bounded: a few hundred jobs, well under 30 s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


#: ``bench/lua_cost.py``'s phases, and those each mode runs, in its table's column order.
PHASES = ("offer", "submit", "start", "claim", "report")
MODE_PHASES = {
    "queued": {"submit", "start", "claim", "report"},
    "handed": {"offer", "submit", "start", "report"},  # the start hands off: no claim
    "run": {"submit", "claim", "report"},  # one call creates and starts
}


def run_bounded(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``argv`` in a session of its own, killed with everything it started
    (a redis-server) if it outlives ``timeout``."""
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def lua_cost_rows(stdout: str) -> dict[str, list[str]]:
    """The rows of ``bench/lua_cost.py``'s table: phase -> its cells."""
    return {
        cells[0]: cells[1:]
        for line in stdout.splitlines()
        if line.startswith("| ") and not line.startswith(("| phase", "| ---"))
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }


def test_bench_quick_supervisor(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    argv = [sys.executable, str(ROOT / "bench" / "run.py"), "--quick"]
    argv += ["--only", "supervisor,lua-cost", "--jobs", "300", "--out", str(out)]
    proc = run_bounded([*argv, "--json", str(tmp_path / "results.json")], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    for procs in ("1p", "2p"):
        figure = results["supervisor"][procs]
        assert figure["verified"], figure
        assert figure["jobs_per_s"] > 0
        assert figure["detail"][0]["jobs"] == 300
    assert results["lua-cost"]["unit"] == "Redis CPU µs"  # --quick times: no callgrind
    assert set(results["lua-cost"]["modes"]) == set(MODE_PHASES)
    text = out.read_text()
    assert "hero-gateway supervisor" in text
    assert "## What a job costs inside the Functions (bench/lua_cost.py)" in text
    assert "Load average" in text


def test_lua_cost_counts_every_phase_of_every_mode() -> None:
    """``bench/lua_cost.py`` drives the job path's Functions itself (no actor):
    each mode ran its phases, each with the commands it runs, and no other."""
    argv = [sys.executable, str(ROOT / "bench" / "lua_cost.py"), "--cpu", "--jobs", "64"]
    proc = run_bounded([*argv, "--warm-up", "32"], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = lua_cost_rows(proc.stdout)
    assert set(rows) == {*PHASES, "job", "memory left per ended job"}
    for column, (mode, phases) in enumerate(MODE_PHASES.items()):
        for phase in PHASES:  # commands per job; a phase the mode does not run: "—"
            commands = rows[phase][2 * column]
            assert (commands != "—") == (phase in phases), (mode, phase)
            assert commands == "—" or float(commands) > 0
    job = [float(rows["job"][2 * column]) for column in range(3)]
    assert job[0] > job[2] > job[1] > 0  # a claim's commands; the run's start in its submit


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_lua_cost_counts_instructions_under_callgrind() -> None:
    """Under callgrind every FCALL is one dump (the tool checks the count
    matches its calls) and each phase's cost is instructions, the same from
    one run to the next within a few per cent."""
    argv = [sys.executable, str(ROOT / "bench" / "lua_cost.py"), "--mode", "queued"]
    runs = [run_bounded([*argv, "--jobs", "32", "--warm-up", "32"], timeout=240) for _ in range(2)]
    counts = []
    for proc in runs:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "queued: instructions" in proc.stdout
        counts.append(float(lua_cost_rows(proc.stdout)["job"][1].replace(",", "")))
    assert counts[0] > 100_000  # a job's life is hundreds of thousands of instructions
    assert abs(counts[0] - counts[1]) / counts[0] < 0.05


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_path_cost_counts_what_redis_does_for_a_job_of_the_real_path() -> None:
    """``bench/path_cost.py`` counts a real run (the supervisor and two actor
    processes on a redis-server under callgrind): every instruction, and
    each command per job, five events among them (four transitions and the
    ended copy)."""
    argv = [sys.executable, str(ROOT / "bench" / "path_cost.py"), "--only", "supervisor"]
    proc = run_bounded([*argv, "--jobs", "128"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("| hero-gateway supervisor")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1].replace(",", "")) > 100_000
    assert cells[2] == "—"  # no BullMQ figure in this run
    assert "xadd 5.00" in cells[3]
