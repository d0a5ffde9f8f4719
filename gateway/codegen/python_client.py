"""Emit ``clients/python``: the installable, typed asyncio client ``hero_client``.

What is generated from the contract: a TypedDict or type alias per component
schema (``types.py``), an exception class per error code (``errors.py``) and
one method per RPC method on ``HeroClient`` (``client.py``). The connection
logic (reconnects, subscriptions) is hand-written once in
``templates/runtime.py.in`` and copied as ``_runtime.py``, so what changes
with the contract is only the thin, typed surface.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gateway.codegen.model import (
    Contract,
    Method,
    is_object,
    schema_name,
    types_of,
    union,
)
from gateway.codegen.text import HEADER, sentence, wrap

PACKAGE = "hero_client"
DIST = "hero-client"
TEMPLATES = Path(__file__).with_name("templates")

#: Methods with a shape of their own in the client (everything else is one call).
SUBSCRIBE = "job.subscribe"
RUN = "job.run"
JOB_SPEC = "JobSpec"
#: Exceptions the client raises on its own (not server codes).
_CLIENT_ERRORS = (
    "CallTimeout",
    "ConnectionLost",
    "HeroClientError",
    "RpcError",
    "SubscriptionLost",
)
#: The keyword every generated method takes for its call timeout.
TIMEOUT_KW = "timeout"

_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}


def py_type(schema: dict[str, Any]) -> str:
    """A JSON Schema as a Python type expression (component refs by name)."""
    name = schema_name(schema)
    if name is not None:
        return name
    if "enum" in schema:
        return "Literal[" + ", ".join(json.dumps(v) for v in schema["enum"]) + "]"
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return _union(py_type(s) for s in schema[combinator])
    parts: list[str] = []
    for t in types_of(schema):
        if t == "array":
            items = schema.get("items")
            parts.append(f"list[{py_type(items) if isinstance(items, dict) else 'Any'}]")
        elif t == "object":
            extra = schema.get("additionalProperties")
            value = py_type(extra) if isinstance(extra, dict) else "Any"
            parts.append(f"dict[str, {value}]")
        else:
            parts.append(_SCALARS.get(t, "Any"))
    return _union(parts) if parts else "Any"


def _union(parts: Iterable[str]) -> str:
    return union(parts, top="Any", null="None")


def _docstring(lines: list[str], indent: str) -> list[str]:
    """A docstring from text lines already indented with ``indent``."""
    if not lines:
        return []
    if len(lines) == 1 and len(indent) + len(lines[0].strip()) + 6 <= 100:
        return [f'{indent}"""{lines[0].strip()}"""']
    return [f'{indent}"""{lines[0].strip()}', *lines[1:], f'{indent}"""']


def _all_order(name: str) -> tuple[int, str]:
    """The order ruff (RUF022) wants in ``__all__``: CONSTANTS, Classes, functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _has_job_spec(c: Contract) -> bool:
    return JOB_SPEC in c.schemas and is_object(c.schemas[JOB_SPEC])


# -- types.py ----------------------------------------------------------------------------


def emit_types(c: Contract) -> str:
    out = [
        f'"""Types of the hero-gateway contract (v{c.version}), one per component schema.',
        "",
        f"{HEADER}",
        '"""',
        "",
        "# No `from __future__ import annotations` here: TypedDict reads NotRequired at",
        "# runtime only from evaluated annotations (``__required_keys__``).",
        "from typing import Any, Literal, NotRequired, TypeAlias, TypedDict",
        "",
    ]
    names = list(c.schemas)
    if _has_job_spec(c):
        names.append("JobOptions")
    out.append("__all__ = [")
    out.extend(f'    "{n}",' for n in sorted(names, key=_all_order))
    out.append("]")
    # Aliases first: TypedDict bodies may name them, and aliases are evaluated at import.
    for name, schema in c.schemas.items():
        if is_object(schema):
            continue
        out.append("")
        out.extend(wrap(schema.get("description", ""), "#: "))
        out.extend(_alias(name, py_type(schema)))
    for name in _records_in_dependency_order(c):
        out.extend(["", ""])
        out.extend(_typed_dict(name, c.schemas[name]))
    if _has_job_spec(c):
        spec = c.schemas[JOB_SPEC]
        required = set(spec.get("required", []))
        optional = {k: v for k, v in spec["properties"].items() if k not in required}
        out.extend(["", ""])
        out.extend(
            _typed_dict(
                "JobOptions",
                {
                    "description": "The optional fields of a JobSpec (keyword arguments of "
                    "HeroClient.run).",
                    "properties": optional,
                },
                total=False,
            )
        )
    return "\n".join(out) + "\n"


def _records_in_dependency_order(c: Contract) -> list[str]:
    """The object schemas, each after the ones it names (annotations are evaluated at
    class creation); otherwise in document order."""
    records = [n for n, schema in c.schemas.items() if is_object(schema)]
    done: list[str] = []

    def refs(node: Any) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            name = schema_name(node)
            if name is not None:
                found.add(name)
            for value in node.values():
                found |= refs(value)
        elif isinstance(node, list):
            for value in node:
                found |= refs(value)
        return found

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in done:
            return
        if name in path:
            raise ValueError(f"schemas refer to each other in a cycle: {' -> '.join(path)}")
        for dep in sorted(refs(c.schemas[name]) & set(records), key=records.index):
            visit(dep, (*path, name))
        done.append(name)

    for name in records:
        visit(name, ())
    return done


def _alias(name: str, expr: str) -> list[str]:
    line = f"{name}: TypeAlias = {expr}"
    if len(line) <= 100 or not expr.startswith("Literal["):
        return [line]
    values = expr[len("Literal[") : -1].split(", ")
    return [f"{name}: TypeAlias = Literal[", *[f"    {v}," for v in values], "]"]


def _typed_dict(name: str, schema: dict[str, Any], total: bool = True) -> list[str]:
    required = set(schema.get("required", []))
    props: dict[str, Any] = schema["properties"]
    if any(not k.isidentifier() or keyword.iskeyword(k) for k in props):
        raise ValueError(f"{name}: property names must be Python identifiers")
    lines = [f"class {name}(TypedDict{'' if total else ', total=False'}):"]
    about = schema.get("description") or f"The contract's {name} object."
    lines += _docstring(wrap(sentence(about), "    "), "    ")
    lines.append("")
    for prop, sub in props.items():
        desc = sub.get("description") if isinstance(sub, dict) else None
        if desc:
            lines.extend(wrap(desc, "    #: "))
        t = py_type(sub)
        if total and prop not in required:
            t = f"NotRequired[{t}]"
        lines.append(f"    {prop}: {t}")
    return lines


# -- errors.py ---------------------------------------------------------------------------


def emit_errors(c: Contract) -> str:
    exported = [*_CLIENT_ERRORS, *(e.name for e in c.errors), "ERRORS", "error_for"]
    out = [
        '"""Exceptions raised by hero_client: one root, one class per server code.',
        "",
        "    HeroClientError",
        "    ├── ConnectionLost      the socket dropped before the answer (the call may have run)",
        "    ├── CallTimeout         no answer within the call's timeout (also a TimeoutError)",
        "    ├── SubscriptionLost    a subscription ended without being closed",
        "    └── RpcError            the server answered with an error; ``code``, ``data``",
    ]
    for e in c.errors:
        out.append(f"        ├── {e.name:<19} {e.code}")
    out += [
        "",
        f"{HEADER}",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "__all__ = [",
        *[f'    "{n}",' for n in sorted(exported, key=_all_order)],
        "]",
        "",
        "",
        "class HeroClientError(Exception):",
        '    """Root of every error hero_client raises."""',
        "",
        "",
        "class ConnectionLost(HeroClientError):",
        '    """The connection dropped before the answer came: the server may or may not',
        '    have acted on the call (retry only what is idempotent)."""',
        "",
        "",
        "class CallTimeout(HeroClientError, TimeoutError):",
        '    """No answer within the call\'s timeout."""',
        "",
        "",
        "class SubscriptionLost(HeroClientError):",
        '    """A subscription ended without being closed (it could not be resumed)."""',
        "",
        "",
        "class RpcError(HeroClientError):",
        '    """The server answered with a JSON-RPC error. ``code`` is the server\'s code,',
        '    ``data`` its details (e.g. the failing schema path of -32602)."""',
        "",
        "    code: int = 0",
        "",
        "    def __init__(self, message: str, data: Any = None, code: int | None = None) -> None:",
        "        super().__init__(message)",
        "        self.message = message",
        "        self.data = data",
        "        if code is not None:",
        "            self.code = code",
        "",
        "    def __str__(self) -> str:",
        '        return f"{self.message} (code {self.code})"',
    ]
    for e in c.errors:
        out += [
            "",
            "",
            f"class {e.name}(RpcError):",
            f'    """{e.code}: {sentence(e.message)}"""',
            "",
            f"    code = {e.code}",
        ]
    out += [
        "",
        "",
        "#: The exception class for each code the server answers.",
        "ERRORS: dict[int, type[RpcError]] = {",
        *[f"    {e.code}: {e.name}," for e in c.errors],
        "}",
        "",
        "",
        "def error_for(code: int, message: str, data: Any = None) -> RpcError:",
        '    """The exception for an error object (RpcError itself for codes not listed)."""',
        "    cls = ERRORS.get(code)",
        "    if cls is None:",
        "        return RpcError(message, data, code)",
        "    return cls(message, data)",
    ]
    return "\n".join(out) + "\n"


# -- client.py ---------------------------------------------------------------------------


def _signature(m: Method) -> tuple[list[str], list[str]]:
    """(parameter declarations, body lines building ``params``)."""
    decls: list[str] = []
    body: list[str] = []
    required = [p for p in m.params if p.required]
    optional = [p for p in m.params if not p.required]
    for p in m.params:
        if p.name == TIMEOUT_KW or not p.name.isidentifier() or keyword.iskeyword(p.name):
            raise ValueError(f"{m.name}: param {p.name!r} cannot be a Python keyword argument")
    decls += [f"{p.name}: {py_type(p.schema)}" for p in required]
    decls.append("*")
    decls += [f"{p.name}: {py_type(p.schema)} | None = None" for p in optional]
    decls.append(f"{TIMEOUT_KW}: Timeout = Default.TIMEOUT")
    inline = ", ".join(f'"{p.name}": {p.name}' for p in required)
    body.append(f"params: dict[str, Any] = {{{inline}}}")
    for p in optional:
        body += [f"if {p.name} is not None:", f'    params["{p.name}"] = {p.name}']
    return decls, body


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


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [f"{prefix}{line}" if line.strip() else "" for line in lines]


def _def(name: str, decls: list[str], returns: str, is_async: bool = True) -> list[str]:
    head = f"    {'async ' if is_async else ''}def {name}("
    one_line = head + ", ".join(["self", *decls]) + f") -> {returns}:"
    if len(one_line) <= 100:
        return [one_line]
    return [head, *[f"        {d}," for d in ["self", *decls]], f"    ) -> {returns}:"]


def _emit_method(m: Method, c: Contract) -> list[str]:
    decls, body = _signature(m)
    result = py_type(m.result)
    doc = _indent(_method_doc(m, c), "        ")
    lines: list[str] = []
    if m.name == SUBSCRIBE:
        event = _event_type(c)
        lines += _def(m.snake, decls, f"EventStream[{event}]", is_async=False)
        stream_doc = [
            "",
            "        Returns an EventStream: ``await`` it (or ``async with`` it) to subscribe,",
            "        then iterate it for events. It resumes after reconnects from the last",
            "        event it delivered, so no event is lost or repeated.",
        ]
        lines += _docstring([*doc, *stream_doc], "        ")
        lines += _indent(body, "        ")
        lines.append(f'        return self._subscription("{m.name}", params, {TIMEOUT_KW})')
        return lines
    lines += _def(m.snake, decls, result)
    lines += _docstring(doc, "        ")
    if m.deprecated:
        instead = c.method(m.replaced_by).snake if m.replaced_by else "the new names"
        args = f'"{m.snake} is deprecated: use {instead}", DeprecationWarning, stacklevel=2'
        if len(f"        warnings.warn({args})") <= 100:
            lines.append(f"        warnings.warn({args})")
        else:
            lines += ["        warnings.warn(", f"            {args}", "        )"]
    lines += _indent(body, "        ")
    call = f'await self.call("{m.name}", params, {TIMEOUT_KW}={TIMEOUT_KW})'
    if result == "Any":
        lines.append(f"        return {call}")
    else:
        lines.append(f'        return cast("{result}", {call})')
    return lines


def _event_type(c: Contract) -> str:
    for n in c.notifications:
        for p in n.params:
            if p.name == "event":
                return py_type(p.schema)
    return "dict[str, Any]"


def _used_types(c: Contract, body: list[str]) -> list[str]:
    """The type names ``body`` mentions (so client.py imports exactly those)."""
    names = [*c.schemas, "JobOptions"]
    text = "\n".join(body)
    return sorted(n for n in names if re.search(rf"\b{n}\b", text))


def _run_helper(c: Contract) -> list[str]:
    """``HeroClient.run``: the three-line path (create, start, wait in one call)."""
    if RUN not in {m.name for m in c.methods} or not _has_job_spec(c):
        return []
    run = c.method(RUN)
    result = py_type(run.result)
    return [
        "",
        "    async def run(",
        "        self,",
        "        script: str,",
        '        script_type: str = "python",',
        "        *,",
        "        wait: float = 300.0,",
        "        **options: Unpack[JobOptions],",
        f"    ) -> {result}:",
        '        """Run a script and wait (up to ``wait`` seconds) for its result.',
        "",
        "        A failed job is a result with status ``error``, not an exception. The job",
        "        gets its id here (unless ``job_id`` is given), so if the socket drops",
        "        meanwhile the call is sent again after the reconnect and waits on the same",
        "        job instead of starting a second one. ``options`` are the other JobSpec",
        "        fields (``timeout`` there is the job's own time limit); the call itself",
        "        gives up ``wait`` seconds plus a margin after it was made.",
        '        """',
        f"        job = cast({JOB_SPEC}, "
        '{"script": script, "script_type": script_type, **options})',
        '        job.setdefault("job_id", uuid.uuid4().hex)',
        '        seconds = self._timeout_for({"wait": wait}, Default.TIMEOUT)',
        "        try:",
        "            async with asyncio.timeout(seconds):",
        "                while True:",
        "                    try:",
        f"                        return await self.{run.snake}(job, wait=wait, {TIMEOUT_KW}=None)",
        "                    except ConnectionLost:",
        "                        if not self.reconnect:",
        "                            raise",
        "                        await asyncio.sleep(RETRY_PAUSE)",
        "        except TimeoutError as exc:",
        "            if isinstance(exc, HeroClientError):",
        "                raise",
        f'            raise CallTimeout(f"{RUN}: no result within {{seconds}} s") from None',
    ]


def emit_client(c: Contract) -> str:
    body = [
        "",
        "",
        "class HeroClient(Connection):",
        '    """A hero-gateway client over one WebSocket that reconnects by itself.',
        "",
        "    ::",
        "",
        '        async with HeroClient("ws://127.0.0.1:8080/ws", key=KEY) as hero:',
        "            result = await hero.run(\"print('hello')\")",
        "",
        "    See ``Connection`` for the options (key, timeout, reconnect).",
        '    """',
    ]
    run_helper = _run_helper(c)
    body += run_helper
    for m in c.methods:
        body.append("")
        body += _emit_method(m, c)
        if m.name == SUBSCRIBE:
            body += ["", f"    subscribe = {m.snake}"]
    if run_helper:
        result = py_type(c.method(RUN).result)
        body += [
            "",
            "",
            "def run(",
            "    script: str,",
            '    script_type: str = "python",',
            "    *,",
            '    url: str = "ws://127.0.0.1:8080/ws",',
            "    key: str | None = None,",
            "    wait: float = 300.0,",
            "    **options: Unpack[JobOptions],",
            f") -> {result}:",
            '    """Run one job from synchronous code: connect, run, wait, close."""',
            "",
            f"    async def go() -> {result}:",
            "        async with HeroClient(url, key=key) as hero:",
            "            return await hero.run(script, script_type, wait=wait, **options)",
            "",
            "    return asyncio.run(go())",
        ]
    out = [
        f'"""``HeroClient``: a typed method per method of the hero-gateway contract '
        f"(v{c.version}).",
        "",
        "Methods are named after the RPC methods (``job.create`` → ``job_create``). Required",
        "params are positional, optional ones keyword-only; every method takes",
        "``timeout=`` (seconds, None for no limit) over the client's default.",
        "",
        f"{HEADER}",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import asyncio",
        "import uuid",
        "import warnings",
        "from typing import Any, Unpack, cast",
        "",
        "from ._runtime import RETRY_PAUSE, Connection, Default, EventStream, Timeout",
        "from .errors import CallTimeout, ConnectionLost, HeroClientError",
        "from .types import (",
        *[f"    {n}," for n in _used_types(c, body)],
        ")",
        "",
        '__all__ = ["HeroClient", "run"]',
    ]
    return "\n".join(out + body) + "\n"


# -- package files -------------------------------------------------------------------------


def emit_init(c: Contract) -> str:
    error_names = [*_CLIENT_ERRORS, *(e.name for e in c.errors)]
    type_names = list(c.schemas)
    if _has_job_spec(c):
        type_names.append("JobOptions")
    runtime_names = ["HeroClient", "run", "EventStream", "Default"]
    clash = set(type_names) & {*error_names, *runtime_names}
    if clash:
        raise ValueError(f"schema names clash with client names: {sorted(clash)}")
    exported = sorted({*runtime_names, *error_names, *type_names}, key=_all_order)
    return (
        "\n".join(
            [
                f'"""Typed asyncio client for hero-gateway (contract v{c.version}).',
                "",
                "    import asyncio",
                "    from hero_client import HeroClient",
                "",
                "    async def main() -> None:",
                '        async with HeroClient("ws://127.0.0.1:8080/ws") as hero:',
                "            result = await hero.run(\"print('hello')\")",
                '            print(result["output"])',
                "",
                "    asyncio.run(main())",
                "",
                f"{HEADER}",
                '"""',
                "",
                "from ._runtime import Default, EventStream",
                "from .client import HeroClient, run",
                "from .errors import (",
                *[f"    {n}," for n in sorted(error_names, key=_all_order)],
                ")",
                "from .types import (",
                *[f"    {n}," for n in sorted(type_names, key=_all_order)],
                ")",
                "",
                f'__version__ = "{c.version}"',
                "",
                "__all__ = [",
                *[f'    "{n}",' for n in exported],
                "]",
            ]
        )
        + "\n"
    )


def emit_pyproject(c: Contract) -> str:
    return f"""# {HEADER}
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST}"
version = "{c.version}"
description = "Typed asyncio client for hero-gateway, generated from its OpenRPC contract"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["websockets>=14"]

[tool.setuptools]
packages = ["{PACKAGE}"]

[tool.setuptools.package-data]
{PACKAGE} = ["py.typed"]

[tool.mypy]
strict = true
python_version = "3.11"

[tool.ruff]
line-length = 100
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "W", "I", "B", "UP", "SIM", "RUF", "ASYNC"]
# Per-call timeouts are this client's API (the calls are network round trips
# with a deadline each), not a missing asyncio.timeout.
ignore = ["ASYNC109"]
"""


def emit_readme(c: Contract) -> str:
    methods = "\n".join(
        f"| `{m.name}` | `{m.snake}` | {sentence(m.summary)} |"
        for m in c.methods
        if not m.deprecated
    )
    aliases = ", ".join(f"`{m.snake}`" for m in c.methods if m.deprecated)
    errors = "\n".join(f"| {e.code} | `{e.name}` | {e.message} |" for e in c.errors)
    return f"""# hero-client (Python)

<!-- {HEADER} -->

Typed asyncio client for hero-gateway (contract v{c.version}). One dependency: `websockets`.
From the checkout:

<!-- example: skip (tests/test_client_python.py installs it into a fresh venv) -->
```sh
pip install ./clients/python
```

Run a job in three lines:

```python
import hero_client

result = hero_client.run("print('hello')", url="ws://127.0.0.1:8080/ws")
print(result["output"])
```

Inside async code:

```python
import asyncio

from hero_client import HeroClient


async def main() -> None:
    # `hero-gateway dev` has no API keys; once a gateway has some, pass key="..."
    async with HeroClient("ws://127.0.0.1:8080/ws") as hero:
        result = await hero.run("print('hello')", "python", wait=60)
        print(result["status"], result["output"])
        async with hero.subscribe(script_type="python") as events:
            await hero.run("print('again')", "python", wait=60)
            async for event in events:
                print(event["job_id"], event["status"])
                if event["status"] == "finished":
                    break


asyncio.run(main())
```

- **Reconnects** by itself (exponential backoff). Subscriptions resume with `since` = the last
  event id they delivered: events that happened while the gateway was away are replayed, none
  twice. Calls made meanwhile wait; a call whose socket dropped before its answer raises
  `ConnectionLost` (`run()` retries safely: it fixes the job id first).
- **Timeouts**: `HeroClient(timeout=30.0)` per call by default, `timeout=` on any method.
  Calls that make the server wait (`wait=`) get that wait plus a margin.
- **Auth**: `key=` goes in an `Authorization: Bearer` header; if something refuses the header
  the client logs in with `auth.login` instead.
- **Errors**: every exception derives from `HeroClientError`; server errors are `RpcError`
  subclasses carrying `code` and `data`. A failed job is not an exception: its result has
  `status == "error"`.
- **Live logs**: while a job runs, its new log lines arrive as `log` events (`event["lines"]`)
  and its handler's progress as `progress` events (`event["progress"]`, `event["message"]`).

## Methods

| RPC method | Python | |
| --- | --- | --- |
{methods}

Deprecated Hero names are kept as aliases that warn: {aliases}.

## Errors

| code | class | meaning |
| --- | --- | --- |
{errors}
"""


def files(c: Contract) -> dict[str, str]:
    """Every file of the Python client, by path relative to the repository root."""
    root = f"clients/python/{PACKAGE}"
    runtime = (
        f"# {HEADER}\n# (copied from gateway/codegen/templates/runtime.py.in)\n"
        + (TEMPLATES / "runtime.py.in").read_text()
    )
    return {
        "clients/python/pyproject.toml": emit_pyproject(c),
        "clients/python/README.md": emit_readme(c),
        f"{root}/__init__.py": emit_init(c),
        f"{root}/_runtime.py": runtime,
        f"{root}/client.py": emit_client(c),
        f"{root}/errors.py": emit_errors(c),
        f"{root}/types.py": emit_types(c),
        f"{root}/py.typed": "",
    }
