"""The generated clients match the contract, and are what the generator makes.

A contract change whose clients were not regenerated fails here
(``hero-gateway codegen --check``). Beyond byte equality, the generated code
is checked for what the issue asks: a typed method per contract method, an
exception class per server code, TypedDicts that follow the schemas, mypy
strict and ruff clean, and a JS module Node can load. No Redis involved.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from gateway import codegen, contract
from gateway.codegen import js_client, python_client
from gateway.codegen.model import load
from gateway.codegen.text import RUNTIME
from gateway.codegen.text import runtime as read_runtime
from gateway.web import client_module
from tests.node_support import NODE_DIR, node_or_skip

ROOT = Path(__file__).resolve().parent.parent
PY_CLIENT = ROOT / "clients" / "python"

sys.path.insert(0, str(PY_CLIENT))

import hero_client  # noqa: E402
from hero_client import errors as client_errors  # noqa: E402
from hero_client import types as client_types  # noqa: E402


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "codegen", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_generated_files_are_up_to_date() -> None:
    """The committed clients are exactly what the contract generates now."""
    done = _cli("--check")
    assert done.returncode == 0, (
        "generated clients are stale; run `hero-gateway codegen`\n" + done.stderr
    )


def test_check_lists_what_differs(tmp_path: Path) -> None:
    assert set(codegen.check(tmp_path)) == set(codegen.generate())  # nothing written yet
    assert set(codegen.write(tmp_path)) == set(codegen.generate())
    assert codegen.check(tmp_path) == []
    edited = tmp_path / "clients" / "python" / "hero_client" / "types.py"
    edited.write_text(edited.read_text() + "# hand edit\n")
    (tmp_path / "clients" / "js" / "hero-client.d.ts").unlink()
    done = _cli("--check", "--root", str(tmp_path))
    assert done.returncode == 1
    assert "clients/python/hero_client/types.py" in done.stderr
    assert "clients/js/hero-client.d.ts" in done.stderr
    assert "clients/js/hero-client.js" not in done.stderr
    assert _cli("--root", str(tmp_path)).returncode == 0
    assert codegen.check(tmp_path) == []


def test_generation_is_deterministic() -> None:
    assert codegen.generate() == codegen.generate()


# -- Python ----------------------------------------------------------------------------------


def test_a_python_method_per_contract_method() -> None:
    c = load()
    for method in c.methods:
        fn = getattr(hero_client.HeroClient, method.snake)
        doc = fn.__doc__ or ""
        if method.deprecated:
            assert "Deprecated" in doc and method.replaced_by in doc
        hints = typing.get_type_hints(fn)
        for param in method.params:
            assert param.name in hints, (method.name, param.name)
        assert "timeout" in hints
    assert hero_client.HeroClient.subscribe is hero_client.HeroClient.job_subscribe


def test_python_typeddicts_follow_the_schemas() -> None:
    schemas = contract.document()["components"]["schemas"]
    for name, schema in schemas.items():
        generated = getattr(client_types, name)
        if schema.get("type") == "object" and schema.get("properties"):
            assert generated.__required_keys__ == frozenset(schema.get("required", [])), name
            assert set(generated.__annotations__) == set(schema["properties"]), name
    status = typing.get_args(client_types.Status)
    assert list(status) == schemas["Status"]["enum"]
    spec = schemas["JobSpec"]
    optional = set(spec["properties"]) - set(spec["required"])
    assert set(client_types.JobOptions.__optional_keys__) == optional


def test_python_exception_per_server_code() -> None:
    declared = contract.document()["components"]["errors"]
    for name, error in declared.items():
        cls = client_errors.ERRORS[error["code"]]
        assert cls.__name__ == name and cls.code == error["code"]
        raised = client_errors.error_for(error["code"], "m", {"x": 1})
        assert isinstance(raised, cls) and raised.data == {"x": 1}
    for code in (-32700, -32600, -32601, -32602, -32603):
        assert issubclass(client_errors.ERRORS[code], hero_client.RpcError)
    unknown = client_errors.error_for(-32099, "other")
    assert type(unknown) is hero_client.RpcError and unknown.code == -32099
    for cls in client_errors.ERRORS.values():
        assert issubclass(cls, hero_client.HeroClientError)


def test_python_client_is_strictly_typed_and_lint_clean() -> None:
    """mypy --strict and ruff over the generated package (with its own settings)."""
    bin_dir = Path(sys.executable).parent
    ruff = subprocess.run(
        [str(bin_dir / "ruff"), "check", "--quiet", "."],
        cwd=PY_CLIENT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    fmt = subprocess.run(
        [str(bin_dir / "ruff"), "format", "--check", "--quiet", "."],
        cwd=PY_CLIENT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "hero_client"],
        cwd=PY_CLIENT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr


def test_python_client_depends_on_websockets_only() -> None:
    pyproject = (PY_CLIENT / "pyproject.toml").read_text()
    assert 'dependencies = ["websockets>=14"]' in pyproject
    imported = set()
    for path in (PY_CLIENT / "hero_client").glob("*.py"):
        for line in path.read_text().splitlines():
            if line.startswith(("import ", "from ")) and not line.startswith("from ."):
                imported.add(line.split()[1].split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"__future__"}
    assert third_party == {"websockets"}


# -- JS --------------------------------------------------------------------------------------


def test_js_module_exports_a_method_per_contract_method() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make test-system-deps installs nodejs)")
    script = """
      const m = await import(process.argv[1]);
      const proto = Object.getOwnPropertyNames(m.HeroClient.prototype);
      const errors = Object.fromEntries(Object.entries(m.ERRORS).map(([k, v]) => [k, v.name]));
      console.log(JSON.stringify({ proto, errors, exports: Object.keys(m).sort() }));
    """
    done = subprocess.run(
        [node, "--input-type=module", "-e", script, str(ROOT / "clients/js/hero-client.js")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    c = load()
    for method in c.methods:
        assert method.camel in found["proto"], method.name
    assert {"run", "subscribe"} <= set(found["proto"])
    for e in c.errors:
        assert found["errors"][str(e.code)] == e.name
    assert {
        "HeroClient",
        "EventStream",
        "HeroClientError",
        "RpcError",
        "CallTimeout",
        "ConnectionLost",
        "SubscriptionLost",
    } <= set(found["exports"])


def test_js_types_declare_every_method_and_schema() -> None:
    dts = (ROOT / "clients" / "js" / "hero-client.d.ts").read_text()
    c = load()
    for method in c.methods:
        assert f"  {method.camel}(params" in dts, method.name
    for name in c.schemas:
        assert f"export interface {name} " in dts or f"export type {name} = " in dts, name
    assert "@deprecated Use jobCreate()" in dts


def test_js_types_compile_with_typescript(node_modules: Path) -> None:
    """tests/node/types_check.ts uses the client as the README does; tsc --strict must
    accept it (and reject the lines marked as expected errors)."""
    tsc = node_modules / "typescript" / "bin" / "tsc"
    done = subprocess.run(
        [node_or_skip(), str(tsc), "-p", "tsconfig.json"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_js_runtime_type_checks(node_modules: Path) -> None:
    """The hand-written JS runtime (gateway/codegen/runtime: errors.js, connection.js,
    stream.js and runtime.d.ts) passes tsc --strict with checkJs where it is written; the
    generator only joins it into the client (``make lint`` runs the same check)."""
    tsc = node_modules / "typescript" / "bin" / "tsc"
    done = subprocess.run(
        [node_or_skip(), str(tsc), "-p", str(RUNTIME / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_runtimes_are_copied_not_rewritten() -> None:
    """What the clients hold of the runtime modules is their source (JS: minus the imports
    of sibling runtime modules), so what lint checks there is what runs."""
    files = codegen.generate()
    for name in python_client.RUNTIME_MODULES:
        assert files[f"clients/python/hero_client/{name}"].endswith(read_runtime(name))
    module = files[f"clients/js/{js_client.MODULE}"]
    assert "import {" in read_runtime("connection.js")  # what joined() drops
    for name in ("errors.js", *js_client.JS_RUNTIME):
        assert js_client.joined(name) in module
    assert "\nimport " not in module and "@import" not in module
    assert "export function sleep" in read_runtime("connection.js")  # shared by stream.js
    assert "\nfunction sleep(" in module  # but not exported by the client


def test_web_page_gets_the_same_module() -> None:
    files = codegen.generate()
    assert client_module().decode() == files[f"clients/js/{js_client.MODULE}"]
