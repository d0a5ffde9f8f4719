"""Modules stay under about 400 lines and functions under about 60.

DESIGN asks for small modules with one job each; a module or function past
these sizes is usually doing two jobs. The allow-lists below name what is
still over, each with the reason, so the next engineer shrinks them: an
entry that is no longer over fails too, so the lists only get shorter.
No Redis involved: the sizes come from the source (``ast``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.conftest import ROOT

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

#: Modules over MAX_MODULE_LINES today (paths in the repository), each with why.
LONG_MODULES = {
    # The client runtime codegen copies into generated clients, one file by design.
    "gateway/codegen/runtime/_runtime.py",
}

#: Functions over MAX_FUNCTION_LINES today ("path:qualified name"), each with why.
LONG_FUNCTIONS: set[str] = set()


def modules() -> Iterator[Path]:
    yield from sorted((ROOT / "gateway").rglob("*.py"))


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """Each function's qualified name and its lines (``def`` to its last line)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")
        else:
            yield from functions(node, prefix)


@cache
def sizes() -> tuple[dict[str, int], dict[str, int]]:
    """Modules and functions over the limits, with their lines."""
    long_modules: dict[str, int] = {}
    long_functions: dict[str, int] = {}
    for path in modules():
        name = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            long_modules[name] = lines
        for function, span in functions(ast.parse(source)):
            if span > MAX_FUNCTION_LINES:
                long_functions[f"{name}:{function}"] = span
    return long_modules, long_functions


def test_no_module_grows_over_the_limit() -> None:
    long_modules, _ = sizes()
    grown = {name: n for name, n in long_modules.items() if name not in LONG_MODULES}
    assert not grown, f"over {MAX_MODULE_LINES} lines: split them by responsibility: {grown}"


def test_no_function_grows_over_the_limit() -> None:
    _, long_functions = sizes()
    grown = {name: n for name, n in long_functions.items() if name not in LONG_FUNCTIONS}
    assert not grown, f"over {MAX_FUNCTION_LINES} lines: split them into named parts: {grown}"


def test_the_allow_lists_name_only_what_is_still_over() -> None:
    long_modules, long_functions = sizes()
    shrunk = sorted(LONG_MODULES - set(long_modules))
    shrunk += sorted(LONG_FUNCTIONS - set(long_functions))
    assert not shrunk, f"now within the limits: remove them from the allow-lists: {shrunk}"


def test_the_measure_counts_methods_and_nested_functions() -> None:
    """A method and a function nested in it are measured, each under its own name."""
    source = (
        "class A:\n    def m(self):\n        def inner():\n            pass\n        return 1\n"
    )
    assert dict(functions(ast.parse(source))) == {"A.m": 4, "A.m.inner": 2}
