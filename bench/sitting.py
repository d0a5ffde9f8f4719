"""What a sitting records about itself besides its figures: package versions,
the settings it ran with, and (``--merge``) the earlier sitting it extends."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PY_PEERS = ["arq", "rq", "celery", "dramatiq", "saq", "taskiq"]


def versions(sections: list[str]) -> dict[str, str]:
    v: dict[str, str] = {}
    for dist in ("hero-gateway", "redis", "hiredis", "websockets", "uvicorn", "starlette"):
        try:
            v[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            v[dist] = "not installed"
    if any(s in PY_PEERS or s == "naive" for s in sections):
        from peers_venv import PEERS_PY

        if PEERS_PY.exists():
            freeze = subprocess.run(
                [str(PEERS_PY), "-m", "pip", "freeze"], capture_output=True, text=True, check=False
            ).stdout
            wanted = {
                "arq",
                "rq",
                "celery",
                "kombu",
                "dramatiq",
                "saq",
                "taskiq",
                "taskiq-redis",
                "redis",
                "hiredis",
            }
            for line in freeze.splitlines():
                name, _, ver = line.partition("==")
                if name.lower() in wanted:
                    v[f"peers: {name.lower()}"] = ver
    if "bullmq" in sections:
        from peers import bullmq_peer

        v["peers: bullmq (node)"] = bullmq_peer.version()
    return v


def settings(a: argparse.Namespace, persistence: dict[str, str]) -> dict[str, Any]:
    """What the sitting ran with: HERO_* variables (the gateway and actors
    read them too), the bench's own flags, the main Redis's persistence."""
    flags = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(a).items()
        if k not in ("sections", "render", "merge")
    }
    return {
        "hero_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("HERO_")},
        "flags": flags,
        "redis_persistence": persistence,
    }


def merge_earlier(
    path: Path, a: argparse.Namespace, results: dict[str, Any], conditions: dict[str, Any]
) -> dict[str, Any]:
    """``--merge``: the earlier sitting's figures with this one's sections replaced."""
    earlier = json.loads(path.read_text())
    merged_results = {**earlier["results"], **results}
    conditions["sections"] = {**earlier["meta"].get("sections", {}), **conditions["sections"]}
    conditions["rerun"] = list(a.sections)
    conditions["merged_from"] = {
        k: earlier["meta"].get(k) for k in ("started", "finished", "command", "load_before")
    }
    conditions["load_before"] = earlier["meta"].get("load_before")
    conditions["earlier_versions"] = earlier["meta"].get("versions", {})
    return merged_results
