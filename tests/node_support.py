"""Node for the JS client and OpenRPC ecosystem tests: a conftest plugin (its
``node_modules`` fixture reaches every test module without an import)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

NODE_DIR = ROOT / "tests" / "node"


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make test-system-deps installs it): JS checks skipped")
    return node


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """tests/node/node_modules, installed once with ``npm ci`` from the committed lock."""
    node_or_skip()
    target = NODE_DIR / "node_modules"
    if not (target / ".package-lock.json").is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the OpenRPC ecosystem checks need it")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            check=True,
            timeout=300,
        )
    return target
