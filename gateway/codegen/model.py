"""The contract as the client emitters need it: methods, params, results, errors.

Both emitters (Python and JS) read the same few facts out of
``openrpc/openrpc.json``; this module gathers them once, in document order,
so the emitters only decide how to *spell* things and never walk OpenRPC
structures themselves. Content-descriptor refs are followed here; schema refs
(``#/components/schemas/X``) are kept, because the emitters turn them into
named types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway import contract

#: The JSON-RPC 2.0 codes every method may answer (not listed per method in the
#: contract), with the class names both clients give them.
STANDARD_ERRORS: tuple[tuple[str, int, str], ...] = (
    ("ParseError", -32700, "Parse error"),
    ("InvalidRequest", -32600, "Invalid request"),
    ("MethodNotFound", -32601, "Method not found"),
    ("InvalidParams", -32602, "Invalid params"),
    ("InternalError", -32603, "Internal error"),
)

SCHEMA_REF = "#/components/schemas/"


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    required: bool
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    summary: str
    description: str
    params: tuple[Param, ...]
    result: dict[str, Any]
    errors: tuple[str, ...]  # component error names, e.g. "JobNotFound"
    deprecated: bool
    replaced_by: str | None

    @property
    def snake(self) -> str:
        """``job.dlq.list`` → ``job_dlq_list`` (Python method name)."""
        return re.sub(r"[^0-9A-Za-z]+", "_", self.name).strip("_").lower()

    @property
    def camel(self) -> str:
        """``queue.dlq.list`` → ``queueDlqList`` (JS method name)."""
        head, *rest = self.snake.split("_")
        return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class ErrorCode:
    name: str
    code: int
    message: str


@dataclass(frozen=True, slots=True)
class Notification:
    name: str
    summary: str
    params: tuple[Param, ...]


@dataclass(frozen=True, slots=True)
class Contract:
    title: str
    version: str
    description: str
    methods: tuple[Method, ...]
    schemas: dict[str, dict[str, Any]]  # components/schemas, document order
    errors: tuple[ErrorCode, ...]  # standard codes first, then the contract's
    notifications: tuple[Notification, ...]

    def method(self, name: str) -> Method:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(name)


def schema_name(schema: dict[str, Any]) -> str | None:
    """The component name a schema refers to (``{"$ref": "#/components/schemas/Ident"}``
    → ``Ident``), or None when it is not such a reference."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(SCHEMA_REF):
        return ref[len(SCHEMA_REF) :]
    return None


def _descriptor(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        found: dict[str, Any] = contract.resolve(node["$ref"])
        return found
    return node


def _param(node: dict[str, Any]) -> Param:
    d = _descriptor(node)
    return Param(
        name=d["name"],
        required=bool(d.get("required")),
        description=d.get("description", ""),
        schema=d["schema"],
    )


def _error_name(node: dict[str, Any]) -> str:
    ref = node.get("$ref", "")
    return str(ref).rsplit("/", 1)[-1]


def load() -> Contract:
    """The contract (``openrpc/openrpc.json``, as ``gateway.contract`` loaded it)."""
    doc = contract.document()
    methods = tuple(
        Method(
            name=m["name"],
            summary=m.get("summary", ""),
            description=m.get("description", ""),
            params=tuple(_param(p) for p in m.get("params", [])),
            result=_descriptor(m["result"])["schema"],
            errors=tuple(_error_name(e) for e in m.get("errors", [])),
            deprecated=bool(m.get("deprecated")),
            replaced_by=m.get("x-replaced-by"),
        )
        for m in doc["methods"]
    )
    components = doc.get("components", {})
    errors = tuple(ErrorCode(*e) for e in STANDARD_ERRORS) + tuple(
        ErrorCode(name, e["code"], e["message"]) for name, e in components.get("errors", {}).items()
    )
    notifications = tuple(
        Notification(
            name=n["name"],
            summary=n.get("summary", ""),
            params=tuple(_param(p) for p in n.get("params", [])),
        )
        for n in doc.get("x-notifications", [])
    )
    info = doc.get("info", {})
    return Contract(
        title=info.get("title", ""),
        version=info.get("version", ""),
        description=info.get("description", ""),
        methods=methods,
        schemas=dict(components.get("schemas", {})),
        errors=errors,
        notifications=notifications,
    )


def is_object(schema: dict[str, Any]) -> bool:
    """Whether a component schema describes a record with named fields (a
    TypedDict / a JSDoc typedef with properties) rather than a scalar or a map."""
    return schema.get("type") == "object" and bool(schema.get("properties"))


def types_of(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)


def union(parts: Iterable[str], *, top: str, null: str) -> str:
    """A union type from ``parts`` (themselves maybe unions), without repeats.

    ``top`` (Any / unknown) absorbs everything; ``null`` (None / null) goes
    last, which reads best: ``str | None``."""
    seen: list[str] = []
    for p in parts:
        for piece in p.split(" | "):
            if piece not in seen:
                seen.append(piece)
    if top in seen:
        return top
    seen.sort(key=lambda piece: piece == null)
    return " | ".join(seen)


@dataclass(frozen=True)
class TypeSyntax:
    """How one target language spells JSON Schema types: the one walk over a
    schema (refs, enums, unions, arrays, maps, scalars) both emitters share,
    so the two clients cannot come to read a schema differently."""

    #: ``enum`` values (JSON-encoded) as a type: ``Literal[...]`` or a TS union.
    literal: Callable[[list[str]], str]
    #: Format strings with one ``{}``: an array of, a map of string to.
    array: str
    record: str
    scalars: Mapping[str, str]
    #: The type of anything (Any / unknown), and of null (None / null).
    top: str
    null: str

    def of(self, schema: dict[str, Any]) -> str:
        """A JSON Schema as a type expression (component refs by name)."""
        name = schema_name(schema)
        if name is not None:
            return name
        if "enum" in schema:
            return self.literal([json.dumps(v) for v in schema["enum"]])
        for combinator in ("oneOf", "anyOf"):
            if combinator in schema:
                return self.union(self.of(s) for s in schema[combinator])
        parts: list[str] = []
        for t in types_of(schema):
            if t in ("array", "object"):
                sub = schema.get("items" if t == "array" else "additionalProperties")
                inner = self.of(sub) if isinstance(sub, dict) else self.top
                parts.append((self.array if t == "array" else self.record).format(inner))
            else:
                parts.append(self.scalars.get(t, self.top))
        return self.union(parts) if parts else self.top

    def union(self, parts: Iterable[str]) -> str:
        return union(parts, top=self.top, null=self.null)
