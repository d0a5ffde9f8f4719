"""BullMQ (Node): the workloads run by node/bullmq_bench.mjs with BullMQ's
standard Worker; this module only builds its command line (node_modules is
restored by ``npm ci`` from the committed package-lock.json)."""

from __future__ import annotations

from pathlib import Path

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
SCRIPT = NODE_DIR / "bullmq_bench.mjs"


def argv(
    url: str, mode: str, *, jobs: int, calls: int, runs: int, procs: int, concurrency: int
) -> list[str]:
    return [
        "node",
        str(SCRIPT),
        mode,
        "--url",
        url,
        "--jobs",
        str(jobs),
        "--calls",
        str(calls),
        "--runs",
        str(runs),
        "--procs",
        str(procs),
        "--concurrency",
        str(concurrency),
    ]


def version() -> str:
    import json

    try:
        package = NODE_DIR / "node_modules" / "bullmq" / "package.json"
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "not installed"
