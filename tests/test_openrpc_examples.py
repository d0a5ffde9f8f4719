"""The contract teaches by example: ``@open-rpc/test-coverage`` (pinned in
tests/node_coverage) runs its examples rule against a live gateway and actor.

Every method of openrpc/openrpc.json has example pairings, and each one passes:
called in document order on one connection, its result equals the example's,
or (where the result holds timestamps, server-made ids or the whole document)
fits the result schema. The package is installed with ``npm ci`` from the
committed lock into a cache folder outside the checkout, once per lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gateway import contract
from gateway.actor import Actor
from gateway.config import Config
from tests.conftest import ROOT
from tests.node_support import node_or_skip, node_report
from tests.server_support import Server

COVERAGE_DIR = ROOT / "tests" / "node_coverage"
#: Methods whose example results cannot be matched exactly: timestamps (job.get,
#: job.list, actor.list), a server-made id (job.subscribe), the document itself.
SCHEMA_ONLY = {"job.get", "job.list", "actor.list", "job.subscribe", "rpc.discover"}


@pytest.fixture(scope="session")
def coverage_modules() -> Path:
    """node_modules for tests/node_coverage, in ~/.cache (XDG_CACHE_HOME), keyed by its lock."""
    node_or_skip()
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (make test-system-deps installs it)")
    lock = (COVERAGE_DIR / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hero-gateway"
    target = cache / f"openrpc-coverage-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (target / "node_modules" / ".package-lock.json").is_file():
        building = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(COVERAGE_DIR / name, building / name)
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=building, check=True, timeout=300,
        )  # fmt: skip
        try:
            building.replace(target)  # another session may have finished first: keep its copy
        except OSError:
            shutil.rmtree(building, ignore_errors=True)
    return target / "node_modules"


@pytest.mark.timeout(180)
async def test_every_example_passes_the_openrpc_test_runner(
    server: Server, python_actor: Actor, coverage_modules: Path
) -> None:
    report = await node_report(
        str(COVERAGE_DIR / "examples_check.cjs"),
        server.ws,
        within=150,
        env={"NODE_PATH": str(coverage_modules)},
    )

    every = [m["name"] for m in contract.document()["methods"]]
    assert report["methods"] == every
    assert {c["method"] for c in report["calls"]} == set(every)  # each method has examples
    failed = [c for c in report["calls"] if not c["valid"]]
    assert failed == [], json.dumps(failed, indent=1)
    inexact = {c["method"] for c in report["calls"] if not c["exact"]}
    assert inexact <= SCHEMA_ONLY, inexact - SCHEMA_ONLY
    assert report["script_type_enum"] == list(Config().script_types)  # the shared server's defaults


def test_the_served_contract_enumerates_the_configured_script_types() -> None:
    served = contract.served(("python", "osis"))
    assert served["components"]["schemas"]["JobSpec"]["properties"]["script_type"]["enum"] == [
        "python",
        "osis",
    ]
    named = [d for d in served["components"]["contentDescriptors"].values()]
    params = [d for d in named if d["name"] == "script_type"]
    assert params and all(d["schema"]["enum"] == ["python", "osis"] for d in params)
    base = contract.document()["components"]["schemas"]["JobSpec"]["properties"]["script_type"]
    assert "enum" not in base  # the committed base (the clients' source) stays open
