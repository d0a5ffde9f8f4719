"""Node for the JS client and OpenRPC ecosystem tests: a conftest plugin (its
``node_modules`` fixture reaches every test module without an import)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

NODE_DIR = ROOT / "tests" / "node"


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make test-system-deps installs it): JS checks skipped")
    return node


async def node_report(
    script: str, *args: str, within: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run a check script of tests/node (from there) and return the JSON object
    it prints last; fail with its stderr when it prints nothing, crashed or
    exited non-zero."""
    proc = await asyncio.create_subprocess_exec(
        node_or_skip(),
        script,
        *args,
        cwd=NODE_DIR,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), within)
    assert out, err.decode()
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    assert "crash" not in report, report["crash"]
    assert proc.returncode == 0, err.decode()
    return report


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
