"""Emit ``clients/js``: one ES module for browsers and Node, no build step.

``hero-client.js`` holds, in order: the error classes (one per code), JSDoc
typedefs for the contract's schemas, the hand-written connection
(``templates/runtime.js.in``) and ``HeroClient`` with a method per RPC method
(``job.create`` → ``jobCreate(params, options)``; params by name, as the
contract has them). ``hero-client.d.ts`` declares the same for TypeScript.
The gateway's page gets the same module, rendered by the gateway from its
contract (``gateway.web.client_module``), because an installed gateway has no
``clients/`` folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from gateway.codegen.model import Contract, Method, is_object, schema_name, types_of, union
from gateway.codegen.text import HEADER, runtime, sentence, wrap

MODULE = "hero-client.js"

SUBSCRIBE = "job.subscribe"
RUN = "job.run"
JOB_SPEC = "JobSpec"

_CLIENT_ERRORS = (
    (
        "ConnectionLost",
        "The connection dropped before the answer: the call may or may not have run.",
    ),
    ("CallTimeout", "No answer within the call's timeout."),
    ("SubscriptionLost", "A subscription ended without being closed (it could not be resumed)."),
)

_SCALARS = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}


def _rule(title: str) -> str:
    """A section comment line of the generated files."""
    return f"// --- {title} ".ljust(92, "-")


def _js_param(name: str, required: bool) -> str:
    return f"params.{name}" if required else f"[params.{name}]"


def ts_type(schema: dict[str, Any]) -> str:
    """A JSON Schema as a TypeScript type expression (also valid in JSDoc)."""
    name = schema_name(schema)
    if name is not None:
        return name
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return _union(ts_type(s) for s in schema[combinator])
    parts: list[str] = []
    for t in types_of(schema):
        if t == "array":
            items = schema.get("items")
            parts.append(f"Array<{ts_type(items) if isinstance(items, dict) else 'unknown'}>")
        elif t == "object":
            extra = schema.get("additionalProperties")
            value = ts_type(extra) if isinstance(extra, dict) else "unknown"
            parts.append(f"Record<string, {value}>")
        else:
            parts.append(_SCALARS.get(t, "unknown"))
    return _union(parts) if parts else "unknown"


def _union(parts: Iterable[str]) -> str:
    return union(parts, top="unknown", null="null")


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


def _comment(lines: list[str], indent: str = "") -> list[str]:
    return [
        f"{indent}/**",
        *[f"{indent} *{(' ' + ln) if ln else ''}" for ln in lines],
        f"{indent} */",
    ]


# -- hero-client.js --------------------------------------------------------------------------


def _errors_js(c: Contract) -> list[str]:
    out = [
        _rule("errors: one root, one class per server code"),
        "",
        "/** Root of every error hero-client raises. */",
        "export class HeroClientError extends Error {",
        "  constructor(message) {",
        "    super(message);",
        "    this.name = new.target.name;",
        "  }",
        "}",
    ]
    for name, doc in _CLIENT_ERRORS:
        out += ["", f"/** {doc} */", f"export class {name} extends HeroClientError {{}}"]
    out += [
        "",
        "/** The server answered with a JSON-RPC error: `code` is its code, `data` its details. */",
        "export class RpcError extends HeroClientError {",
        "  /**",
        "   * @param {string} message",
        "   * @param {unknown} [data]",
        "   * @param {number} [code]",
        "   */",
        "  constructor(message, data = null, code = undefined) {",
        "    super(message);",
        "    /** @type {number} */",
        "    this.code = code ?? /** @type {any} */ (new.target).code ?? 0;",
        "    this.data = data;",
        "  }",
        "}",
    ]
    for e in c.errors:
        out += [
            "",
            f"/** {e.code}: {sentence(e.message)} */",
            f"export class {e.name} extends RpcError {{",
            f"  static code = {e.code};",
            "}",
        ]
    out += [
        "",
        "/** The error class for each code the server answers. */",
        "export const ERRORS = Object.freeze({",
        *[f'  "{e.code}": {e.name},' for e in c.errors],
        "});",
        "",
        "/**",
        " * The error for an error object (RpcError itself for codes not listed).",
        " * @param {number} code",
        " * @param {string} message",
        " * @param {unknown} [data]",
        " * @returns {RpcError}",
        " */",
        "export function errorFor(code, message, data = null) {",
        "  const cls = ERRORS[String(code)];",
        "  return cls ? new cls(message, data) : new RpcError(message, data, code);",
        "}",
    ]
    return out


def _typedefs_js(c: Contract) -> list[str]:
    out = [
        "",
        _rule("types of the contract (JSDoc)"),
    ]
    for name, schema in c.schemas.items():
        doc = wrap(schema.get("description", ""), "", 92)
        if is_object(schema):
            required = set(schema.get("required", []))
            lines = [*doc, f"@typedef {{object}} {name}"]
            for prop, sub in schema["properties"].items():
                field = prop if prop in required else f"[{prop}]"
                desc = sub.get("description", "") if isinstance(sub, dict) else ""
                head = f"@property {{{ts_type(sub)}}} {field}"
                if not desc:
                    lines.append(head)
                    continue
                first, *rest = wrap(f"{head} {desc}", "", 92)
                lines += [first, *(f"  {line}" for line in rest)]
        else:
            lines = [*doc, f"@typedef {{{ts_type(schema)}}} {name}"]
        out += ["", *_comment(lines)]
    return out


def _method_doc(m: Method, c: Contract, returns: str, params_type: str) -> list[str]:
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
    lines.append(f"@param {{{params_type}{optional}}} {'params' if not optional else '[params]'}")
    for p in m.params:
        if p.description:
            lines += wrap(
                f"@param {{{ts_type(p.schema)}}} {_js_param(p.name, p.required)} {p.description}",
                "",
                88,
            )
    lines.append("@param {CallOptions} [options]")
    lines.append(f"@returns {{Promise<{returns}>}}")
    if m.errors:
        lines.append(f"@throws {{{' | '.join(m.errors)}}}")
    return lines


def _client_js(c: Contract) -> list[str]:
    event = _event_type(c)
    out = [
        "",
        _rule("the client: one method per RPC method"),
        "",
        "/**",
        " * A hero-gateway client over one WebSocket that reconnects by itself.",
        " *",
        ' *     const hero = new HeroClient("ws://127.0.0.1:8080/ws", { key });',
        ' *     const result = await hero.run({ script: "print(42)", script_type: "python" });',
        " */",
        "export class HeroClient extends Connection {",
    ]
    names = {m.name for m in c.methods}
    if RUN in names and JOB_SPEC in c.schemas:
        run = c.method(RUN)
        out += [
            "  /**",
            "   * Run a job and wait (up to `wait` seconds, default 300) for its result.",
            '   * A failed job is a result with status "error", not an exception. The job',
            "   * gets its id here (unless given), so after a dropped socket the call is",
            "   * sent again and waits on the same job.",
            f"   * @param {{{JOB_SPEC}}} job",
            "   * @param {{wait?: number} & CallOptions} [options]",
            f"   * @returns {{Promise<{ts_type(run.result)}>}}",
            "   */",
            "  async run(job, options = {}) {",
            "    const wait = options.wait ?? 300;",
            "    const spec = { ...job, job_id: job.job_id ?? randomId() };",
            "    const deadline = Date.now() + (this._timeoutFor({ wait }, options) ?? Infinity);",
            "    for (;;) {",
            "      const left = Math.max(deadline - Date.now(), 1);",
            "      try {",
            f'        return await this.call("{RUN}", {{ job: spec, wait }}, {{',
            "          timeoutMs: Number.isFinite(left) ? left : null,",
            "        });",
            "      } catch (err) {",
            "        if (!(err instanceof ConnectionLost) || !this.reconnect) throw err;",
            "        await sleep(RETRY_PAUSE_MS);",
            "      }",
            "    }",
            "  }",
        ]
    for m in c.methods:
        params_type = _params_type(m)
        default = "" if any(p.required for p in m.params) else " = {}"
        out.append("")
        if m.name == SUBSCRIBE:
            doc = _method_doc(m, c, f"EventStream<{event}>", params_type)
            doc[-2 if m.errors else -1 :] = []
            doc += [
                f"@param {{SubscribeOptions<{event}>}} [options]",
                f"@returns {{Promise<EventStream<{event}>>}}",
                f"@throws {{{' | '.join(m.errors)}}}" if m.errors else "",
            ]
            doc = [d for d in doc if d != "@param {CallOptions} [options]"]
            doc = [d for d in doc if d]
            out += _comment(doc, "  ")
            out += [
                f"  {m.camel}(params{default}, options = {{}}) {{",
                f'    return this._subscription("{m.name}", params, options);',
                "  }",
                "",
                f"  /** Same as {m.camel}(). */",
                "  subscribe(params = {}, options = {}) {",
                f"    return this.{m.camel}(params, options);",
                "  }",
            ]
            continue
        out += _comment(_method_doc(m, c, ts_type(m.result), params_type), "  ")
        out += [
            f"  {m.camel}(params{default}, options = {{}}) {{",
            f'    return this.call("{m.name}", params, options);',
            "  }",
        ]
    out.append("}")
    return out


def emit_module(c: Contract) -> str:
    source = runtime("connection.js")
    head = [
        f"// hero-client: the hero-gateway client for browsers and Node (contract v{c.version}).",
        f"// {HEADER}",
        "//",
        "// An ES module with no dependencies and no build step:",
        '//   import { HeroClient } from "./hero-client.js";',
        '//   const hero = new HeroClient("ws://127.0.0.1:8080/ws", { key });',
        "//   (Node 18/20: also pass { WebSocket } from the `ws` package)",
        '//   const result = await hero.run({ script: "print(1)", script_type: "python" });',
        '//   for await (const event of await hero.subscribe({ script_type: "python" })) { ... }',
        "// Types: JSDoc here, and hero-client.d.ts beside it.",
        "",
    ]
    body = head + _errors_js(c) + _typedefs_js(c) + ["", source.rstrip("\n")] + _client_js(c)
    return "\n".join(body) + "\n"


# -- hero-client.d.ts -------------------------------------------------------------------------


def emit_dts(c: Contract) -> str:
    out = [
        f"// Types of hero-client.js (contract v{c.version}).",
        f"// {HEADER}",
        "",
        _rule("errors"),
        "",
        "export declare class HeroClientError extends Error {}",
        *[
            f"export declare class {name} extends HeroClientError {{}}"
            for name, _ in _CLIENT_ERRORS
        ],
        "export declare class RpcError extends HeroClientError {",
        "  constructor(message: string, data?: unknown, code?: number);",
        "  readonly code: number;",
        "  readonly data: unknown;",
        "}",
    ]
    for e in c.errors:
        out += [
            f"/** {e.code}: {sentence(e.message)} */",
            f"export declare class {e.name} extends RpcError {{",
            f"  static readonly code: {e.code};",
            "}",
        ]
    out += [
        "export declare const ERRORS: Readonly<Record<string, typeof RpcError>>;",
        "export declare function errorFor(",
        "  code: number,",
        "  message: string,",
        "  data?: unknown,",
        "): RpcError;",
        "",
        "// --- types of the contract ------------------------------------------------------------",
    ]
    for name, schema in c.schemas.items():
        doc = wrap(schema.get("description", ""), "", 92)
        out.append("")
        if doc:
            out += _comment(doc)
        if is_object(schema):
            required = set(schema.get("required", []))
            out.append(f"export interface {name} {{")
            for prop, sub in schema["properties"].items():
                desc = sub.get("description") if isinstance(sub, dict) else None
                if desc:
                    out.append(f"  /** {' '.join(desc.split())} */")
                out.append(f"  {prop}{'' if prop in required else '?'}: {ts_type(sub)};")
            out.append("}")
        else:
            out.append(f"export type {name} = {ts_type(schema)};")
    out += ["", runtime("connection.d.ts").rstrip("\n"), ""]
    event = _event_type(c)
    out += [
        _rule("the client"),
        "",
    ]
    out.append("export declare class HeroClient extends Connection {")
    if RUN in {m.name for m in c.methods} and JOB_SPEC in c.schemas:
        out += [
            "  /** Run a job and wait (up to `wait` seconds, default 300) for its result. */",
            f"  run(job: {JOB_SPEC}, options?: {{ wait?: number }} & CallOptions)"
            f": Promise<{ts_type(c.method(RUN).result)}>;",
        ]
    for m in c.methods:
        params_type = _params_type(m)
        q = "" if any(p.required for p in m.params) else "?"
        summary = sentence(m.summary or m.name)
        if m.deprecated and m.replaced_by:
            out.append(f"  /** @deprecated Use {c.method(m.replaced_by).camel}(). */")
        else:
            out.append(f"  /** {summary} */")
        if m.name == SUBSCRIBE:
            sig = (
                f"(params{q}: {params_type}, options?: SubscribeOptions<{event}>)"
                f": Promise<EventStream<{event}>>;"
            )
            out += [f"  {m.camel}{sig}", f"  /** Same as {m.camel}(). */", f"  subscribe{sig}"]
        else:
            out.append(
                f"  {m.camel}(params{q}: {params_type}, options?: CallOptions)"
                f": Promise<{ts_type(m.result)}>;"
            )
    out.append("}")
    return "\n".join(out) + "\n"


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


def emit_readme(c: Contract) -> str:
    methods = "\n".join(
        f"| `{m.name}` | `{m.camel}` | {sentence(m.summary)} |"
        for m in c.methods
        if not m.deprecated
    )
    errors = "\n".join(f"| {e.code} | `{e.name}` | {e.message} |" for e in c.errors)
    return f"""# hero-client (JavaScript)

<!-- {HEADER} -->

One ES module, no dependencies, no build step: works in browsers and in Node 18+
(contract v{c.version}). The gateway serves it at `/client/hero-client.js`.

```js
import {{ HeroClient }} from "./hero-client.js";
// Node 22 and browsers have a global WebSocket; on Node 18/20 pass one:
//   import {{ WebSocket }} from "ws";  new HeroClient(url, {{ WebSocket }})
const hero = new HeroClient("ws://127.0.0.1:8080/ws", {{ key: "<API key>" }});

const job = {{ script: "print('hello')", script_type: "python" }};
const result = await hero.run(job, {{ wait: 60 }});
console.log(result.status, result.output);

const events = await hero.subscribe({{ script_type: "python" }});
for await (const event of events) console.log(event.job_id, event.status);
```

- **Params by name**, as in the contract: `hero.jobGet({{ job_id }})`,
  `hero.jobList({{ status: "started" }})`.
- **Reconnects** by itself (exponential backoff); subscriptions resume with `since` = the last
  event id delivered, so events from while the gateway was away are replayed and none twice.
  `onStatus` tells you when it drops and comes back.
- **Timeouts** in milliseconds: `new HeroClient(url, {{ timeoutMs: 30000 }})`, or per call
  `hero.jobGet({{ job_id }}, {{ timeoutMs: 5000 }})`. Calls with `wait` get that wait plus a margin.
- **Auth** by key with `auth.login` on every (re)connect (browsers cannot set headers).
- **Errors** derive from `HeroClientError`; server errors are `RpcError` subclasses with `code`
  and `data`. A failed job is a result with `status: "error"`, not an exception.
- **Subscriptions**: `for await` the stream, or pass `{{ onEvent }}`; `stream.close()` unsubscribes.
- **Live logs**: while a job runs, its new log lines arrive as `log` events (`event.lines`)
  and its handler's progress as `progress` events (`event.progress`, `event.message`).

## Methods

| RPC method | JS | |
| --- | --- | --- |
{methods}

Deprecated Hero names exist as `@deprecated` methods (`createJob`, ...).

## Errors

| code | class | meaning |
| --- | --- | --- |
{errors}
"""


def files(c: Contract) -> dict[str, str]:
    """Every file of the JS client, by path relative to the repository root."""
    return {
        f"clients/js/{MODULE}": emit_module(c),
        "clients/js/hero-client.d.ts": emit_dts(c),
        "clients/js/package.json": emit_package_json(c),
        "clients/js/README.md": emit_readme(c),
    }
