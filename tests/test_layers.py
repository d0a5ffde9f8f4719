"""The layers' arrows as DESIGN draws them, checked on the source.

Every module of ``gateway/`` is parsed with ``ast`` (nothing is imported, no
Redis involved) and each import it makes, at any depth (function-local and
``TYPE_CHECKING`` imports included: they are arrows too), must point at a
layer its own layer may use. The table below is the rule; docs/architecture.md
draws it. A new package of ``gateway/`` fails here until it is given a layer,
so the picture cannot drift by omission.

Also checked: ``gateway/rpc`` reaches neither redis nor the supervisor, not
even through a module it imports (``rpc → web → pipeline`` is one such path),
and no module but ``gateway/supervisor/keys.py`` spells a Redis key.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GATEWAY = ROOT / "gateway"

#: The layer of each module, by the longest matching name prefix.
LAYERS = {
    # the floor: shared facts every layer may use, importing nothing above
    "gateway": "floor",  # the package itself: __version__
    "gateway.paths": "floor",
    "gateway.errors": "floor",
    "gateway.validation": "floor",
    "gateway.contract": "floor",
    "gateway.config": "floor",
    "gateway.eventloop": "floor",
    "gateway.protocols": "floor",
    "gateway.admission": "floor",
    # the sans-I/O model: a job, its events, the typed binding of hero.lua
    "gateway.model": "model",
    "gateway.supervisor": "supervisor",
    "gateway.supervisor.keys": "supervisor.keys",
    "gateway.supervisor.worker": "supervisor.actor_api",
    "gateway.supervisor.in_hand": "supervisor.actor_api",
    "gateway.supervisor.connection": "supervisor.actor_api",
    "gateway.supervisor.retention": "supervisor.actor_api",
    # structured logging; masks API keys, so it knows their prefix (supervisor.auth)
    "gateway.logs": "logs",
    "gateway.rpc": "rpc",
    "gateway.web": "web",
    "gateway.codegen": "codegen",
    "gateway.actor": "actor",
    "gateway.pipeline": "pipeline",
    "gateway.pipeline.charts": "pipeline.charts",
    # the top: processes that wire the layers together
    "gateway.server": "entry",
    "gateway.cli": "entry",
    "gateway.dev": "entry",
    "gateway.acl_command": "entry",
    "gateway.embedded_redis": "entry",
    "gateway.metrics": "entry",
}

SUPERVISOR = {"supervisor", "supervisor.keys", "supervisor.actor_api"}

#: Which layers each layer may import (its own always). What is not listed
#: points the wrong way: up, or sideways between peers.
MAY_IMPORT: dict[str, set[str]] = {
    "floor": set(),
    "model": {"floor"},
    "supervisor": {"floor", "model"} | SUPERVISOR,
    # `gateway/rpc` calls the supervisor through the protocols in rpc/backends.py
    "rpc": {"floor", "model", "web"},
    # the page, its generated JS client and the charts' plotly bundle
    "web": {"floor", "model", "codegen", "pipeline.charts"},
    "codegen": {"floor"},
    # the API-key prefix it masks; the refusal of a Redis handshake it tells from an outage
    "logs": {"floor", "model", "supervisor", "supervisor.actor_api"},
    # actors use the supervisor's API for actors, never its keys or Functions
    "actor": {"floor", "model", "logs", "supervisor.actor_api"},
    # the archive reads the events stream: its key and the model of an event
    "pipeline": {"floor", "model", "logs", "supervisor.keys", "pipeline.charts"},
    "entry": set(LAYERS.values()),
}
for _name in SUPERVISOR:
    MAY_IMPORT[_name] = MAY_IMPORT["supervisor"]
#: the charts are drawn by the page too, so they stand on the floor alone
MAY_IMPORT["pipeline.charts"] = {"floor"}

#: Third-party packages a layer must not import at all.
NEVER_THIRD_PARTY = {
    "floor": {"redis", "hiredis"},
    "model": {"redis", "hiredis"},
    "rpc": {"redis", "hiredis"},
    "web": {"redis", "hiredis"},
    "codegen": {"redis", "hiredis"},
}

#: A Redis key spelled out: a string literal (or an f-string) starting "hero:".
KEY_LITERAL = re.compile(r"hero:")
KEYS_MODULE = "gateway.supervisor.keys"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(GATEWAY.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    """The layer of ``module`` by its longest listed prefix; None: unplaced."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = LAYERS.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


def imported(module: str, is_package: bool, source: str, known: set[str]) -> Iterator[str]:
    """Every module name ``source`` imports, relative imports resolved; for
    ``from pkg import name`` the submodule ``pkg.name`` when it is one."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            yield from subs or [target]


def violations(module: str, is_package: bool, source: str, known: set[str]) -> list[str]:
    """What is wrong with ``module``'s imports; [] when every arrow points down."""
    own = layer_of(module)
    if own is None:
        return [f"{module} has no layer: place it in LAYERS (tests/test_layers.py)"]
    found = []
    for target in imported(module, is_package, source, known):
        top = target.split(".")[0]
        if top != "gateway":
            if top in NEVER_THIRD_PARTY.get(own, set()):
                found.append(f"{module} ({own}) imports {target}")
            continue
        theirs = layer_of(target)
        if theirs != own and theirs not in MAY_IMPORT[own]:
            found.append(f"{module} ({own}) imports {target} ({theirs})")
    return found


def test_every_import_points_down() -> None:
    known = set(modules())
    found = []
    for module, path in modules().items():
        is_package = path.name == "__init__.py"
        found += violations(module, is_package, path.read_text(), known)
    assert found == []


def test_the_check_refuses_a_wrong_arrow() -> None:
    """The rule is not vacuous: an upward and a sideways import are caught."""
    known = set(modules())
    up = violations("gateway.model.job", False, "from gateway.supervisor import keys\n", known)
    side = violations("gateway.actor.runtime", False, "from ..pipeline import store\n", known)
    deep = violations("gateway.rpc.app", False, "def f():\n    import redis.asyncio\n", known)
    internals = violations("gateway.actor.x", False, "from gateway.supervisor import keys\n", known)
    assert up == ["gateway.model.job (model) imports gateway.supervisor.keys (supervisor.keys)"]
    assert side == ["gateway.actor.runtime (actor) imports gateway.pipeline.store (pipeline)"]
    assert deep == ["gateway.rpc.app (rpc) imports redis.asyncio"]
    assert internals == [
        "gateway.actor.x (actor) imports gateway.supervisor.keys (supervisor.keys)"
    ]


def reachable(start: str) -> dict[str, str]:
    """Every module importing ``start`` loads (packages' ``__init__`` included),
    each with the module that imports it: a static closure over the sources."""
    mods = modules()
    known = set(mods)
    via: dict[str, str] = {start: start}
    todo = [start]
    while todo:
        module = todo.pop()
        path = mods.get(module)
        if path is None:
            continue
        for target in imported(module, path.name == "__init__.py", path.read_text(), known):
            parts = target.split(".")
            loaded = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
            for name in loaded if parts[0] == "gateway" else loaded[:1]:
                if name not in via:
                    via[name] = module
                    todo.append(name)
    return via


def chain(via: dict[str, str], module: str) -> str:
    path = [module]
    while via[path[-1]] != path[-1]:
        path.append(via[path[-1]])
    return " <- ".join(path)


@pytest.mark.parametrize("module", sorted(m for m in modules() if layer_of(m) == "rpc"))
def test_rpc_reaches_no_redis_even_indirectly(module: str) -> None:
    via = reachable(module)
    reached = [m for m in ("redis", "hiredis", "gateway.supervisor") if m in via]
    assert [chain(via, m) for m in reached] == []


def test_no_module_but_keys_spells_a_redis_key() -> None:
    found = []
    for module, path in modules().items():
        if module == KEYS_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            head = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else node
            if not isinstance(head, ast.Constant):
                continue
            value = head.value
            if isinstance(value, bytes):
                value = value.decode(errors="replace")
            if isinstance(value, str) and KEY_LITERAL.match(value):
                found.append(f"{path.relative_to(ROOT)}:{head.lineno}: {value!r}")
    lua = GATEWAY / "supervisor" / "lua" / "hero.lua"
    for n, line in enumerate(lua.read_text().splitlines(), 1):
        if re.search(r"""['"]hero:""", line):
            found.append(f"{lua.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
