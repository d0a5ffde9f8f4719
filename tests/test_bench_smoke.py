"""The benchmark code must not rot: a small supervisor run, end to end.

Runs ``bench/run.py --quick --only supervisor,lua-cost`` as ``make bench`` would
(its own private redis-server, 1 and 2 actor processes, every result verified;
the Functions driven directly, timed) and checks the figures it wrote.
Bounded: a few hundred jobs, well under 30 s.
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
            "supervisor,lua-cost",
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
    assert results["lua-cost"]["unit"] == "Redis CPU µs"  # --quick times: no callgrind
    assert set(results["lua-cost"]["modes"]) == {"queued", "handed"}
    text = out.read_text()
    assert "hero-gateway supervisor" in text
    assert "## What a job costs inside the Functions (bench/lua_cost.py)" in text
    assert "Load average" in text


#: ``bench/lua_cost.py``'s phases: an idle actor's offer, and no claim, when handed.
PHASES = ("offer", "submit", "start", "claim", "report")
PHASES_QUEUED = ("submit", "start", "claim", "report")
PHASES_HANDED = ("offer", "submit", "start", "report")


def test_lua_cost_counts_every_phase_of_both_modes() -> None:
    """``bench/lua_cost.py`` drives the job path's Functions itself (no actor):
    every phase of both modes ran, each with the commands it runs."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "lua_cost.py"), "--cpu", "--jobs", "64"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {
        cells[0]: cells[1:]
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and not line.startswith(("| phase", "| ---"))
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert set(rows) == {*PHASES, "job", "memory left per ended job"}
    for phase in PHASES:  # each call runs commands; a phase only one mode has: "—"
        queued, handed = rows[phase][0], rows[phase][2]
        assert (queued != "—") == (phase in PHASES_QUEUED)
        assert (handed != "—") == (phase in PHASES_HANDED)
        assert all(float(c) > 0 for c in (queued, handed) if c != "—")
    assert float(rows["job"][0]) > float(rows["job"][2]) > 0  # a claim's commands: queued more
