"""Emit ``clients/python``: the installable, typed asyncio client ``hero_client``.

What is generated from the contract: a TypedDict or type alias per component
schema (``types.py``), an exception class per error code (``errors.py``) and
one method per RPC method on ``HeroClient`` (``client.py``). The connection
logic (reconnects, subscriptions) and the root exceptions are hand-written
once, as real modules in ``gateway/codegen/runtime``, and copied, so what
changes with the contract is only the thin, typed surface. The files are
Jinja2 templates (``templates/python``); this module decides what goes in
them: type expressions, names, and the docstrings and signatures whose
wrapping depends on their length.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from typing import Any

from gateway.codegen.model import Contract, Method, TypeSyntax, is_object, schema_name
from gateway.codegen.text import HEADER, render, runtime, sentence, wrap

PACKAGE = "hero_client"
DIST = "hero-client"
#: The runtime modules copied verbatim into the package.
RUNTIME_MODULES = ("_errors.py", "_runtime.py", "_stream.py", "_timeouts.py")

#: Methods with a shape of their own in the client (everything else is one call).
SUBSCRIBE = "job.subscribe"
RUN = "job.run"
JOB_SPEC = "JobSpec"
#: Exceptions the client raises on its own (not server codes), from ``_errors.py``.
_CLIENT_ERRORS = (
    "CallTimeout",
    "ConnectionLost",
    "HeroClientError",
    "RpcError",
    "SubscriptionLost",
)
#: The keyword every generated method takes for its call timeout.
TIMEOUT_KW = "timeout"

PY = TypeSyntax(
    literal=lambda values: "Literal[" + ", ".join(values) + "]",
    array="list[{}]",
    record="dict[str, {}]",
    scalars={
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "null": "None",
    },
    top="Any",
    null="None",
)
#: A JSON Schema as a Python type expression (component refs by name).
py_type = PY.of


def _docstring(lines: list[str], indent: str) -> str:
    """A docstring from text lines already indented with ``indent``."""
    if len(lines) == 1 and len(indent) + len(lines[0].strip()) + 6 <= 100:
        return f'{indent}"""{lines[0].strip()}"""'
    return "\n".join([f'{indent}"""{lines[0].strip()}', *lines[1:], f'{indent}"""'])


def _sorted_all(names: Iterable[str]) -> list[str]:
    """Names in the order ruff (RUF022, isort) wants: CONSTANTS, Classes, functions."""
    return sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[:1].isupper() else 2, n))


def _has_job_spec(c: Contract) -> bool:
    return JOB_SPEC in c.schemas and is_object(c.schemas[JOB_SPEC])


def _type_names(c: Contract) -> list[str]:
    """Every name ``types.py`` defines: the schemas, and JobOptions beside JobSpec."""
    return [*c.schemas, "JobOptions"] if _has_job_spec(c) else list(c.schemas)


# -- types.py ----------------------------------------------------------------------------


def emit_types(c: Contract) -> str:
    # Aliases first: TypedDict bodies may name them, and aliases are evaluated at import.
    aliases = [
        {"comment": wrap(schema.get("description", ""), "#: "), "code": _alias(name, schema)}
        for name, schema in c.schemas.items()
        if not is_object(schema)
    ]
    records = [_record(name, c.schemas[name]) for name in _records_in_dependency_order(c)]
    if _has_job_spec(c):
        spec = c.schemas[JOB_SPEC]
        required = set(spec.get("required", []))
        about = "The optional fields of a JobSpec (keyword arguments of HeroClient.run)."
        optional = {k: v for k, v in spec["properties"].items() if k not in required}
        records.append(
            _record("JobOptions", {"description": about, "properties": optional}, total=False)
        )
    return render(
        "python/types.py.j2",
        version=c.version,
        exported=_sorted_all(_type_names(c)),
        aliases=aliases,
        records=records,
    )


def _records_in_dependency_order(c: Contract) -> list[str]:
    """The object schemas, each after the ones it names (annotations are evaluated at
    class creation); otherwise in document order."""
    records = [n for n, schema in c.schemas.items() if is_object(schema)]
    done: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in done:
            return
        if name in path:
            raise ValueError(f"schemas refer to each other in a cycle: {' -> '.join(path)}")
        for dep in sorted(_refs(c.schemas[name]) & set(records), key=records.index):
            visit(dep, (*path, name))
        done.append(name)

    for name in records:
        visit(name, ())
    return done


def _refs(node: Any) -> set[str]:
    """The component schemas a schema names, at any depth."""
    found: set[str] = set()
    if isinstance(node, dict):
        name = schema_name(node)
        if name is not None:
            found.add(name)
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found


def _alias(name: str, schema: dict[str, Any]) -> str:
    expr = py_type(schema)
    line = f"{name}: TypeAlias = {expr}"
    if len(line) <= 100 or not expr.startswith("Literal["):
        return line
    values = expr[len("Literal[") : -1].split(", ")
    return "\n".join([f"{name}: TypeAlias = Literal[", *[f"    {v}," for v in values], "]"])


def _record(name: str, schema: dict[str, Any], total: bool = True) -> dict[str, Any]:
    """A TypedDict for ``types.py.j2``: its docstring and fields."""
    required = set(schema.get("required", []))
    props: dict[str, Any] = schema["properties"]
    if any(not k.isidentifier() or keyword.iskeyword(k) for k in props):
        raise ValueError(f"{name}: property names must be Python identifiers")
    about = schema.get("description") or f"The contract's {name} object."
    fields = []
    for prop, sub in props.items():
        desc = sub.get("description") if isinstance(sub, dict) else None
        t = py_type(sub)
        if total and prop not in required:
            t = f"NotRequired[{t}]"
        fields.append({"comment": wrap(desc, "    #: ") if desc else [], "name": prop, "type": t})
    doc = _docstring(wrap(sentence(about), "    "), "    ")
    return {"name": name, "total": total, "doc": doc, "fields": fields}


# -- errors.py ---------------------------------------------------------------------------


def emit_errors(c: Contract) -> str:
    base = _sorted_all(["ERRORS", *_CLIENT_ERRORS, "error_for"])
    return render(
        "python/errors.py.j2",
        errors=c.errors,
        base=base,
        exported=_sorted_all([*base, *(e.name for e in c.errors)]),
    )


# -- client.py ---------------------------------------------------------------------------


def _signature(m: Method) -> list[str]:
    """The parameter declarations: required params positional, the rest keyword-only."""
    for p in m.params:
        if p.name == TIMEOUT_KW or not p.name.isidentifier() or keyword.iskeyword(p.name):
            raise ValueError(f"{m.name}: param {p.name!r} cannot be a Python keyword argument")
    return [
        *(f"{p.name}: {py_type(p.schema)}" for p in m.params if p.required),
        "*",
        *(f"{p.name}: {py_type(p.schema)} | None = None" for p in m.params if not p.required),
        f"{TIMEOUT_KW}: Timeout = Default.TIMEOUT",
    ]


def _method_doc(m: Method, c: Contract) -> list[str]:
    """Docstring lines, wrapped to fit once indented by 8."""
    width = 88
    lines: list[str] = []
    if m.deprecated:
        target = c.method(m.replaced_by).snake if m.replaced_by else None
        lines.append(
            f"Deprecated Hero name of ``{m.replaced_by}``: use ``{target}``."
            if target
            else "Deprecated."
        )
    else:
        lines.append(sentence(m.summary or m.name))
    if m.description and not m.deprecated:
        lines += ["", *wrap(m.description, "", width)]
    documented = [p for p in m.params if p.description]
    if documented and not m.deprecated:
        lines += ["", "Args:"]
        for p in documented:
            lines += wrap(f"{p.name}: {p.description}", "    ", width)
    if m.errors:
        lines += ["", "Raises:"]
        lines += wrap(", ".join(m.errors) + " (see hero_client.errors).", "    ", width)
    return lines


#: What the docstring of ``job_subscribe`` adds about the stream it returns.
_STREAM_DOC = [
    "",
    "Returns an EventStream: ``await`` it (or ``async with`` it) to subscribe,",
    "then iterate it for events. It resumes after reconnects from the last",
    "event it delivered, so no event is lost or repeated.",
]


def _def(name: str, decls: list[str], returns: str, is_async: bool) -> str:
    head = f"    {'async ' if is_async else ''}def {name}("
    one_line = head + ", ".join(["self", *decls]) + f") -> {returns}:"
    if len(one_line) <= 100:
        return one_line
    return "\n".join([head, *[f"        {d}," for d in ["self", *decls]], f"    ) -> {returns}:"])


def _warning(m: Method, c: Contract) -> str | None:
    """The ``warnings.warn`` line of a deprecated method (None for the others)."""
    if not m.deprecated:
        return None
    instead = c.method(m.replaced_by).snake if m.replaced_by else "the new names"
    args = f'"{m.snake} is deprecated: use {instead}", DeprecationWarning, stacklevel=2'
    if len(f"        warnings.warn({args})") <= 100:
        return f"        warnings.warn({args})"
    return f"        warnings.warn(\n            {args}\n        )"


def _method(m: Method, c: Contract) -> dict[str, Any]:
    """One method of ``HeroClient`` for ``client_body.py.j2``."""
    stream = m.name == SUBSCRIBE
    result = f"EventStream[{_event_type(c)}]" if stream else py_type(m.result)
    doc = [f"        {line}" if line.strip() else "" for line in _method_doc(m, c)]
    if stream:
        doc += [f"        {line}" if line else "" for line in _STREAM_DOC]
    return {
        "name": m.name,
        "snake": m.snake,
        "stream": stream,
        "result": result,
        "head": _def(m.snake, _signature(m), result, is_async=not stream),
        "doc": _docstring(doc, "        "),
        "warning": _warning(m, c),
        "required": ", ".join(f'"{p.name}": {p.name}' for p in m.params if p.required),
        "optional": [p.name for p in m.params if not p.required],
    }


def _event_type(c: Contract) -> str:
    for n in c.notifications:
        for p in n.params:
            if p.name == "event":
                return py_type(p.schema)
    return "dict[str, Any]"


def emit_client(c: Contract) -> str:
    run = None
    if RUN in {m.name for m in c.methods} and _has_job_spec(c):
        method = c.method(RUN)
        run = {"name": RUN, "snake": method.snake, "result": py_type(method.result)}
    body = render("python/client_body.py.j2", run=run, methods=[_method(m, c) for m in c.methods])
    # client.py imports exactly the type names its body mentions
    used = sorted(n for n in _type_names(c) if re.search(rf"\b{n}\b", body))
    return render("python/client.py.j2", version=c.version, types=used, body=body.rstrip("\n"))


# -- package files -------------------------------------------------------------------------


def emit_init(c: Contract) -> str:
    error_names = [*_CLIENT_ERRORS, *(e.name for e in c.errors)]
    type_names = _type_names(c)
    runtime_names = ["HeroClient", "run", "EventStream", "Default"]
    clash = set(type_names) & {*error_names, *runtime_names}
    if clash:
        raise ValueError(f"schema names clash with client names: {sorted(clash)}")
    return render(
        "python/__init__.py.j2",
        version=c.version,
        errors=_sorted_all(error_names),
        types=_sorted_all(type_names),
        exported=_sorted_all({*runtime_names, *error_names, *type_names}),
    )


def emit_readme(c: Contract) -> str:
    return render(
        "python/README.md.j2",
        version=c.version,
        methods=[m for m in c.methods if not m.deprecated],
        aliases=", ".join(f"`{m.snake}`" for m in c.methods if m.deprecated),
        errors=c.errors,
    )


def files(c: Contract) -> dict[str, str]:
    """Every file of the Python client, by path relative to the repository root."""
    root = f"clients/python/{PACKAGE}"
    copied = {
        f"{root}/{name}": f"# {HEADER}\n# (copied from gateway/codegen/runtime/{name})\n"
        + runtime(name)
        for name in RUNTIME_MODULES
    }
    return {
        "clients/python/pyproject.toml": render(
            "python/pyproject.toml.j2", dist=DIST, package=PACKAGE, version=c.version
        ),
        "clients/python/README.md": emit_readme(c),
        f"{root}/__init__.py": emit_init(c),
        **copied,
        f"{root}/client.py": emit_client(c),
        f"{root}/errors.py": emit_errors(c),
        f"{root}/types.py": emit_types(c),
        f"{root}/py.typed": "",
    }
