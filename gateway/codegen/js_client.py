"""Emit ``clients/js``: one ES module for browsers and Node, no build step.

``hero-client.js`` holds, in order: the error classes (the hand-written root,
``runtime/errors.js``, then one class per code), JSDoc typedefs for the
contract's schemas, the hand-written connection and subscriptions
(``runtime/connection.js``, ``runtime/stream.js``) and ``HeroClient`` with a
method per RPC method (``job.create`` → ``jobCreate(params, options)``; params
by name, as the contract has them).
``hero-client.d.ts`` declares the same for TypeScript. The runtime files are
real ES modules that TypeScript checks where they are written; the generator
drops their ``import`` lines, since the client is one module. The files are
Jinja2 templates (``templates/js``). The gateway's page gets the same module,
rendered by the gateway from its contract (``gateway.web.client_module``),
because an installed gateway has no ``clients/`` folder.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.codegen.model import Contract, Method, TypeSyntax, is_object
from gateway.codegen.text import HEADER, render, runtime, sentence, wrap

MODULE = "hero-client.js"

SUBSCRIBE = "job.subscribe"
RUN = "job.run"
JOB_SPEC = "JobSpec"

TS = TypeSyntax(
    literal=" | ".join,
    array="Array<{}>",
    record="Record<string, {}>",
    scalars={
        "string": "string",
        "integer": "number",
        "number": "number",
        "boolean": "boolean",
        "null": "null",
    },
    top="unknown",
    null="null",
)
#: A JSON Schema as a TypeScript type expression (also valid in JSDoc).
ts_type = TS.of

#: A runtime module's imports of its sibling runtime modules (statements, and JSDoc
#: ``@import`` tags): one module has no use for them once the files are joined.
_IMPORT = re.compile(
    r'^(?:import (?:type )?\{[^}]*\} from "\./[\w.-]+";|/\*\* @import [^*]*\*/)\n\n?',
    re.MULTILINE,
)
#: ``export`` of a name marked ``/** @internal ... */``: the runtime modules share it,
#: the client does not export it.
_INTERNAL_EXPORT = re.compile(r"^(/\*\* @internal\b.*\*/\n)export ", re.MULTILINE)
#: The runtime modules joined into ``hero-client.js``, in order.
JS_RUNTIME = ("connection.js", "stream.js")


def joined(name: str) -> str:
    """A runtime module's source as the client holds it: without its imports of sibling
    runtime modules, and without exporting what they only share among themselves."""
    source = _INTERNAL_EXPORT.sub(r"\1", _IMPORT.sub("", runtime(name)))
    return source.rstrip("\n")


def _params_type(m: Method) -> str:
    if not m.params:
        return "Record<string, never>"
    fields = [f"{p.name}{'' if p.required else '?'}: {ts_type(p.schema)}" for p in m.params]
    return "{ " + "; ".join(fields) + " }"


def _event_type(c: Contract) -> str:
    for n in c.notifications:
        for p in n.params:
            if p.name == "event":
                return ts_type(p.schema)
    return "Record<string, unknown>"


def _comment(lines: list[str], indent: str = "") -> str:
    """A ``/** ... */`` block from its text lines."""
    body = [f"{indent} *{(' ' + ln) if ln else ''}" for ln in lines]
    return "\n".join([f"{indent}/**", *body, f"{indent} */"])


def _run(c: Contract) -> dict[str, str] | None:
    """What the templates need of ``HeroClient.run`` (None when the contract has no job.run)."""
    if RUN not in {m.name for m in c.methods} or JOB_SPEC not in c.schemas:
        return None
    return {"name": RUN, "result": ts_type(c.method(RUN).result)}


# -- hero-client.js --------------------------------------------------------------------------


def _typedef(name: str, schema: dict[str, Any]) -> str:
    """A schema as a JSDoc ``@typedef`` comment."""
    lines = wrap(schema.get("description", ""), "", 92)
    if not is_object(schema):
        return _comment([*lines, f"@typedef {{{ts_type(schema)}}} {name}"])
    required = set(schema.get("required", []))
    lines.append(f"@typedef {{object}} {name}")
    for prop, sub in schema["properties"].items():
        field = prop if prop in required else f"[{prop}]"
        desc = sub.get("description", "") if isinstance(sub, dict) else ""
        head = f"@property {{{ts_type(sub)}}} {field}"
        if not desc:
            lines.append(head)
            continue
        first, *rest = wrap(f"{head} {desc}", "", 92)
        lines += [first, *(f"  {line}" for line in rest)]
    return _comment(lines)


def _method_doc(m: Method, c: Contract, returns: str, options: str) -> list[str]:
    lines: list[str] = []
    if m.deprecated:
        target = c.method(m.replaced_by).camel if m.replaced_by else None
        lines.append(f"Hero name of `{m.replaced_by}`." if m.replaced_by else "Hero name.")
        lines.append(f"@deprecated Use {target}()." if target else "@deprecated")
    else:
        lines.append(sentence(m.summary or m.name))
        if m.description:
            lines += ["", *wrap(m.description, "", 88)]
    optional = "" if any(p.required for p in m.params) else "="
    lines.append(
        f"@param {{{_params_type(m)}{optional}}} {'params' if not optional else '[params]'}"
    )
    for p in m.params:
        if p.description:
            name = f"params.{p.name}" if p.required else f"[params.{p.name}]"
            lines += wrap(f"@param {{{ts_type(p.schema)}}} {name} {p.description}", "", 88)
    lines.append(f"@param {{{options}}} [options]")
    lines.append(f"@returns {{Promise<{returns}>}}")
    if m.errors:
        lines.append(f"@throws {{{' | '.join(m.errors)}}}")
    return lines


def _js_method(m: Method, c: Contract) -> dict[str, Any]:
    """One method of ``HeroClient`` for ``hero-client.js.j2``."""
    stream = m.name == SUBSCRIBE
    if stream:
        event = _event_type(c)
        doc = _method_doc(m, c, f"EventStream<{event}>", f"SubscribeOptions<{event}>")
    else:
        doc = _method_doc(m, c, ts_type(m.result), "CallOptions")
    return {
        "name": m.name,
        "camel": m.camel,
        "stream": stream,
        "doc": _comment(doc, "  "),
        "default": "" if any(p.required for p in m.params) else " = {}",
    }


def emit_module(c: Contract) -> str:
    return render(
        "js/hero-client.js.j2",
        version=c.version,
        errors_runtime=joined("errors.js"),
        errors=c.errors,
        typedefs=[_typedef(name, schema) for name, schema in c.schemas.items()],
        connection_runtime="\n\n".join(joined(name) for name in JS_RUNTIME),
        run=_run(c),
        methods=[_js_method(m, c) for m in c.methods],
    )


# -- hero-client.d.ts -------------------------------------------------------------------------


def _declaration(name: str, schema: dict[str, Any]) -> str:
    """A schema as a TypeScript interface or type alias (with its description)."""
    doc = wrap(schema.get("description", ""), "", 92)
    out = [_comment(doc)] if doc else []
    if not is_object(schema):
        return "\n".join([*out, f"export type {name} = {ts_type(schema)};"])
    required = set(schema.get("required", []))
    out.append(f"export interface {name} {{")
    for prop, sub in schema["properties"].items():
        desc = sub.get("description") if isinstance(sub, dict) else None
        if desc:
            out.append(f"  /** {' '.join(desc.split())} */")
        out.append(f"  {prop}{'' if prop in required else '?'}: {ts_type(sub)};")
    out.append("}")
    return "\n".join(out)


def _dts_method(m: Method, c: Contract) -> dict[str, Any]:
    """One method of ``HeroClient`` for ``hero-client.d.ts.j2``."""
    q = "" if any(p.required for p in m.params) else "?"
    stream = m.name == SUBSCRIBE
    if stream:
        event = _event_type(c)
        options, result = f"SubscribeOptions<{event}>", f"EventStream<{event}>"
    else:
        options, result = "CallOptions", ts_type(m.result)
    summary = sentence(m.summary or m.name)
    if m.deprecated and m.replaced_by:
        summary = f"@deprecated Use {c.method(m.replaced_by).camel}()."
    return {
        "camel": m.camel,
        "stream": stream,
        "summary": summary,
        "signature": f"(params{q}: {_params_type(m)}, options?: {options}): Promise<{result}>;",
    }


def emit_dts(c: Contract) -> str:
    return render(
        "js/hero-client.d.ts.j2",
        version=c.version,
        errors=c.errors,
        types=[_declaration(name, schema) for name, schema in c.schemas.items()],
        connection_runtime=joined("runtime.d.ts"),
        run=_run(c),
        methods=[_dts_method(m, c) for m in c.methods],
    )


# -- package files ------------------------------------------------------------------------------


def emit_package_json(c: Contract) -> str:
    package = {
        "name": "hero-client",
        "version": c.version,
        "description": "hero-gateway client for browsers and Node, "
        "generated from its OpenRPC contract",
        "type": "module",
        "main": MODULE,
        "types": "hero-client.d.ts",
        "exports": {".": {"types": "./hero-client.d.ts", "default": f"./{MODULE}"}},
        "files": [MODULE, "hero-client.d.ts", "README.md"],
        "engines": {"node": ">=18"},
        "peerDependencies": {"ws": ">=8"},
        "peerDependenciesMeta": {"ws": {"optional": True}},
        "x-generated": HEADER,
    }
    return json.dumps(package, indent=2) + "\n"


def files(c: Contract) -> dict[str, str]:
    """Every file of the JS client, by path relative to the repository root."""
    return {
        f"clients/js/{MODULE}": emit_module(c),
        "clients/js/hero-client.d.ts": emit_dts(c),
        "clients/js/package.json": emit_package_json(c),
        "clients/js/README.md": render(
            "js/README.md.j2",
            version=c.version,
            methods=[m for m in c.methods if not m.deprecated],
            errors=c.errors,
        ),
    }
