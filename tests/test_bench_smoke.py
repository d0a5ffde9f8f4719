"""The benchmark code must not rot: a small supervisor run, end to end.

Runs ``bench/run.py --quick --only supervisor`` as ``make bench`` would (its own
private redis-server, 1 and 2 actor processes, every result verified) and
checks the figures it wrote. Bounded: a few hundred jobs, well under 30 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_quick_supervisor(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--quick",
            "--only",
            "supervisor",
            "--jobs",
            "300",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "results.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    for procs in ("1p", "2p"):
        figure = results["supervisor"][procs]
        assert figure["verified"], figure
        assert figure["jobs_per_s"] > 0
        assert figure["detail"][0]["jobs"] == 300
    text = out.read_text()
    assert "hero-gateway supervisor" in text
    assert "Load average" in text


#: ``bench/lua_cost.py``'s phases: an idle actor's offer, and no claim, when handed.
PHASES_QUEUED = ("submit", "start", "claim", "report")
PHASES_HANDED = ("offer", "submit", "start", "report")


def test_lua_cost_counts_every_phase_of_both_modes() -> None:
    """``bench/lua_cost.py`` drives the job path's Functions itself (no actor):
    every phase of both modes ran on every job, with the commands they run."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "lua_cost.py"), "--cpu", "--jobs", "64"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tables = proc.stdout.split("\n\n")[1:]
    assert [t.splitlines()[0] for t in tables] == [
        "queued, batches of 32, 64 jobs: per job, inside the Functions",
        "handed, batches of 32, 64 jobs: per job, inside the Functions",
    ]
    for table, phases in zip(tables, (PHASES_QUEUED, PHASES_HANDED), strict=True):
        rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[2:]}
        assert set(rows) == {*phases, "all", "memory"}
        for phase in phases:  # one call a batch, and each call runs commands
            calls, commands = float(rows[phase][0]), float(rows[phase][1])
            assert calls == round(1 / 32, 3)
            assert commands > 0
