"""BullMQ (Node): the workloads run by node/bullmq_bench.mjs with BullMQ's
standard Worker; this module only builds its command line (node_modules is
restored by ``npm ci`` from the committed package-lock.json)."""

from __future__ import annotations

from pathlib import Path

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
SCRIPT = NODE_DIR / "bullmq_bench.mjs"


def argv(mode: str, flags: list[str]) -> list[str]:
    """node bullmq_bench.mjs MODE, with the flags every peer's child takes."""
    return ["node", str(SCRIPT), mode, *flags]


def version() -> str:
    import json

    try:
        package = NODE_DIR / "node_modules" / "bullmq" / "package.json"
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "not installed"
