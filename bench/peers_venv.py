"""The peers' own venv (bench/.venv-peers, git-ignored), made by the bench itself so
the project's venv stays clean. Also home of the profilers (py-spy, pyinstrument)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from common import BENCH, log

VENV = BENCH / ".venv-peers"
PEERS_BIN = VENV / "bin"
PEERS_PY = PEERS_BIN / "python"
REQUIREMENTS = BENCH / "peers" / "requirements.txt"
NODE_DIR = BENCH / "node"


def _stamp() -> Path:
    return VENV / ".installed"


def ensure_peers_venv() -> Path:
    """Create or update the venv when requirements.txt changed; its python."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if _stamp().exists() and _stamp().read_text() == digest and PEERS_PY.exists():
        return PEERS_PY
    log(f"installing the peers into {VENV} (once)")
    if not PEERS_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PEERS_PY), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    _stamp().write_text(digest)
    return PEERS_PY


def ensure_node_modules() -> Path | None:
    """``npm ci`` (or ``npm install`` from the same lock) into bench/node
    (node_modules git-ignored); None when node is missing."""
    import shutil

    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
    marker = NODE_DIR / "node_modules" / ".package-lock.json"
    lock = NODE_DIR / "package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < lock.stat().st_mtime:
        log("npm ci in bench/node (once)")
        quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
        if subprocess.run(["npm", "ci", *quiet], cwd=NODE_DIR).returncode != 0:
            # npm 11 refuses `ci` when the lock lists msgpackr's optional
            # per-platform builds without entries; `install` honours the same
            # lock (it leaves package-lock.json unchanged) and fills them in.
            log("npm ci refused the lock; npm install from the same lock")
            subprocess.run(["npm", "install", *quiet], cwd=NODE_DIR, check=True)
    return NODE_DIR


def peer_argv(
    name: str, url: str, mode: str, *, jobs: int, calls: int, runs: int, concurrency: int
) -> list[str] | None:
    """The command line of one peer's benchmark child (2 worker processes);
    None when BullMQ's node is missing. Installs the peer's venv or
    node_modules on first use."""
    flags = [
        "--url",
        url,
        "--jobs",
        str(jobs),
        "--calls",
        str(calls),
        "--runs",
        str(runs),
        "--procs",
        "2",
        "--concurrency",
        str(concurrency),
    ]
    if name == "bullmq":
        from peers import bullmq_peer

        return None if ensure_node_modules() is None else bullmq_peer.argv(mode, flags)
    return [str(ensure_peers_venv()), "-m", f"peers.{name}_peer", "--mode", mode, *flags]
