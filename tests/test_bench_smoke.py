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
