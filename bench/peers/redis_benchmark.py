"""The Redis ceiling: ``redis-benchmark`` LPUSH and LPOP (50 clients, no
pipelining) against the bench's redis-server; requests/s as it reports them."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from typing import Any


def run(host: str, port: int, *, requests: int) -> dict[str, Any]:
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return {"skipped": "redis-benchmark not installed"}
    argv = [
        exe,
        "-h",
        host,
        "-p",
        str(port),
        "-n",
        str(requests),
        "-c",
        "50",
        "-t",
        "lpush,lpop",
        "--csv",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    rows = {
        row[0]: float(row[1])
        for row in csv.reader(io.StringIO(out.stdout))
        if len(row) > 1 and row[0] != "test"
    }
    return {"lpush_per_s": rows.get("LPUSH", 0.0), "lpop_per_s": rows.get("LPOP", 0.0)}
