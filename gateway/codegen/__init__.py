"""``hero-gateway codegen``: the clients, generated from the contract.

``openrpc/openrpc.json`` is the one description of the API, so the clients
are written from it rather than by hand: a Python package (``clients/python``,
see ``python_client``) and a browser/Node ES module (``clients/js``, see
``js_client``; the gateway renders the same module for its page, see
``gateway.web``).
``check`` tells which files on disk differ from what the contract gives now,
so a test (and CI) catches a contract change whose clients were not
regenerated.
"""

from __future__ import annotations

from pathlib import Path

from gateway.codegen import js_client, python_client
from gateway.codegen.model import load

#: The repository root (the generator writes into a source checkout).
ROOT = Path(__file__).resolve().parent.parent.parent


def generate() -> dict[str, str]:
    """Every generated file's content, by path relative to the repository root."""
    contract = load()
    out = python_client.files(contract)
    out.update(js_client.files(contract))
    return dict(sorted(out.items()))


def write(root: Path = ROOT) -> list[str]:
    """Write the files that changed; returns their paths."""
    changed = check(root)
    for path, text in generate().items():
        if path in changed:
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return changed


def check(root: Path = ROOT) -> list[str]:
    """Generated files that are missing or differ on disk (relative paths)."""
    stale: list[str] = []
    for path, text in generate().items():
        target = root / path
        if not target.is_file() or target.read_text() != text:
            stale.append(path)
    return stale
