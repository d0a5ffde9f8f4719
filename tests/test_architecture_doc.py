"""docs/architecture.md names only what exists, and its pictures are current.

The page tells a reader which module does each step of a ``job.run``; a name
that was renamed away would send them looking for nothing. So every code
reference on the page (```module.Class.method```, ```gateway/…``` paths,
``hero_*`` Functions) must resolve in the source, read with ``ast`` (nothing
imported). Each picture's SVG must carry every label of its graphviz source,
so a .dot edited without re-rendering fails here (graphviz is not needed).
"""

from __future__ import annotations

import ast
import html
import json
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
DIAGRAMS = ROOT / "docs" / "diagrams"
LUA = ROOT / "gateway" / "supervisor" / "lua" / "hero.lua"
#: ``x.py`` is a file name, checked by test_paths_and_files_exist
FILE_SUFFIXES = {"py", "lua", "json", "md", "svg", "dot"}


@cache
def definitions() -> dict[str, dict[str, set[str]]]:
    """Per module (dotted name): its top-level names, each with its members
    (a class's methods and attributes; empty for anything else)."""
    found: dict[str, dict[str, set[str]]] = {}
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names: dict[str, set[str]] = {}
        for node in ast.parse(path.read_text()).body:
            for name, body in _defined(node):
                names.setdefault(name, set()).update(n for sub in body for n, _ in _defined(sub))
        found[".".join(parts)] = names
    return found


def _defined(node: ast.stmt) -> list[tuple[str, list[ast.stmt]]]:
    if isinstance(node, ast.ClassDef):
        return [(node.name, node.body)]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [(node.name, [])]
    if isinstance(node, ast.Assign):
        return [(t.id, []) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, [])]
    if isinstance(node, ast.ImportFrom):
        return [(a.asname or a.name, []) for a in node.names]
    return []


def resolves(reference: str) -> bool:
    """``reference`` is a module (named by a dotted suffix of its name, e.g.
    ``pipeline.charts``) followed by at most a top-level name and a member
    (``access.admit`` may name ``Access.admit``: the module's ``admit``), or
    a ``Class.member`` defined in some module."""
    defs = definitions()
    parts = reference.split(".")
    for split in range(len(parts), 0, -1):
        suffix, rest = ".".join(parts[:split]), parts[split:]
        for module, names in defs.items():
            if module != suffix and not module.endswith("." + suffix):
                continue
            # one name: top-level, or a member of one of the module's classes
            if not rest or (len(rest) == 1 and any(rest[0] in (n, *m) for n, m in names.items())):
                return True
            if len(rest) == 2 and rest[1] in names.get(rest[0], ()):
                return True
    if len(parts) == 2 and parts[0][:1].isupper():
        return any(parts[1] in names.get(parts[0], ()) for names in defs.values())
    return False


def contract_methods() -> set[str]:
    document = json.loads((ROOT / "openrpc" / "openrpc.json").read_text())
    return {m["name"] for m in document["methods"]} | {"job.event"}


def test_code_references_resolve() -> None:
    text = DOC.read_text()
    quoted = set(re.findall(r"`([^`\s]+)`", text))
    methods = contract_methods()
    references = sorted(
        q
        for q in quoted
        if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", q)
        and q not in methods
        and q.rpartition(".")[2] not in FILE_SUFFIXES
    )
    assert len(references) > 20  # the page is read, not skipped
    assert [r for r in references if not resolves(r)] == []


def test_paths_and_files_exist() -> None:
    text = DOC.read_text()
    paths = set(re.findall(r"`((?:gateway|docs|tests|clients)/[\w/.]*)`", text))
    paths |= set(re.findall(r"\]\(((?:diagrams/)?[\w.-]+\.(?:svg|md))\)", text))
    missing = [
        p for p in sorted(paths) if not (ROOT / p).exists() and not (DOC.parent / p).exists()
    ]
    files = set(re.findall(r"`(\w+\.py)`", text))
    unknown = [f for f in sorted(files) if not any((ROOT / "gateway").rglob(f))]
    assert (missing, unknown) == ([], [])


def test_named_functions_are_registered_in_hero_lua() -> None:
    registered = set(re.findall(r"register_function\('(\w+)'", LUA.read_text()))
    named = set(re.findall(r"\bhero_[a-z_]+\b", DOC.read_text()))
    assert named and named <= registered, named - registered


@pytest.mark.parametrize("name", sorted(p.stem for p in DIAGRAMS.glob("*.dot")))
def test_svg_is_rendered_from_its_dot(name: str) -> None:
    source = (DIAGRAMS / f"{name}.dot").read_text()
    svg = DIAGRAMS / f"{name}.svg"
    assert svg.exists(), f"render it: dot -Tsvg docs/diagrams/{name}.dot -o {svg.name}"
    shown = {
        html.unescape(t).strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg.read_text())
    }
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', source)
    lines = {
        line.replace('\\"', '"').strip()
        for label in labels
        for line in label.split("\\n")
        if line.strip()
    }
    assert sorted(lines - shown) == [], f"re-render: dot -Tsvg docs/diagrams/{name}.dot"
