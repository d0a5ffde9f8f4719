"""The OpenRPC contract (``openrpc/openrpc.json``), loaded once.

The contract is the one description of every shape: the RPC layer validates
params against it, the supervisor validates JobSpecs with the same schema, and
the clients are generated from it. Refs (``#/components/...``) resolve inside
the document.

Besides validators, this module answers the questions the RPC layer asks of
the document (which methods exist, where a method's param schemas live, which
contract location a failed schema keyword came from), so nothing else has to
walk OpenRPC structures or follow ``$ref`` by hand.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from gateway.validation import Schema

CONTRACT_PATH = Path(__file__).with_name("openrpc.json")
_BASE_URI = "urn:hero-gateway:openrpc"


@cache
def document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(CONTRACT_PATH.read_text())
    return doc


@cache
def served(script_types: tuple[str, ...]) -> dict[str, Any]:
    """The document a gateway serves: the committed contract (the base the clients
    are generated from) with this deployment's script types enumerated where a
    caller names one (JobSpec's ``script_type`` and every ``script_type`` param),
    so a client or tool sees the choices instead of learning them from -32602.
    Built once per set of types and shared, like ``document()``: callers only
    read it (the copy below is what keeps the base untouched)."""
    doc: dict[str, Any] = json.loads(json.dumps(document()))  # a copy: the base stays
    if not script_types:
        return doc
    enum = list(script_types)
    spec = doc["components"]["schemas"]["JobSpec"]["properties"]
    spec["script_type"] = {**spec["script_type"], "enum": enum}
    for descriptor in doc["components"]["contentDescriptors"].values():
        if descriptor["name"] == "script_type":
            descriptor["schema"] = {**descriptor["schema"], "enum": enum}
    return doc


@cache
def _registry() -> Registry[Any]:
    resource: Resource[Any] = Resource.from_contents(document(), default_specification=DRAFT202012)
    empty: Registry[Any] = Registry()
    return empty.with_resources([(_BASE_URI, resource)])


@cache
def validator(pointer: str) -> Schema:
    """The schema at a JSON pointer of the contract, e.g. ``/components/schemas/JobSpec``."""
    return compile_schema(ref_to(pointer))


#: Keywords that may sit beside a ``$ref`` and still let it be inlined (they do not validate).
_ANNOTATIONS = frozenset({"description", "title", "examples", "default", "deprecated", "$comment"})


def _inline(node: Any, seen: frozenset[str] = frozenset()) -> Any:
    """``node`` with every ``$ref`` into the contract replaced by what it points to.

    Resolving a ``$ref`` through the registry costs more than the checks it
    leads to (jsonschema/referencing build a resolver per hop, per call):
    validating a JobSpec drops from ~66 to ~23 µs. Errors are unchanged:
    jsonschema leaves ``$ref`` hops out of schema paths (``locate`` follows
    them). A recursive ref, or one beside validating keywords, stays a ``$ref``.
    """
    if isinstance(node, list):
        return [_inline(item, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in seen and set(node) - {"$ref"} <= _ANNOTATIONS:
        try:
            target = resolve(ref)
        except LookupError:
            target = None
        if isinstance(target, dict):
            return _inline(target, seen | {ref})
    return {key: _inline(value, seen) for key, value in node.items()}


def schema_validator(name: str) -> Schema:
    return validator(f"/components/schemas/{name}")


def ref_to(pointer: str) -> dict[str, str]:
    """A schema that is a ``$ref`` to a pointer of the contract, usable in schemas
    built outside the document (see ``compile``)."""
    return {"$ref": f"{_BASE_URI}#{pointer}"}


def compile_schema(schema: Mapping[str, Any]) -> Schema:
    """A schema built in code whose ``$ref``s point into the contract (made
    with ``ref_to``), compiled for checking."""
    return Schema(_inline(schema), _registry())


def resolve(ref: str) -> Any:
    """What a local reference points to: ``#/components/...`` or a bare JSON
    pointer (``/methods/0``). Raises ``LookupError`` when it points nowhere."""
    node: Any = document()
    for part in _pointer_parts(ref):
        if isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                raise LookupError(f"unresolvable reference {ref!r}") from None
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise LookupError(f"unresolvable reference {ref!r}")
    return node


@dataclass(frozen=True, slots=True)
class Param:
    """One by-name param of a method: its name, whether it is required and
    where its schema lives in the contract (a JSON pointer)."""

    name: str
    required: bool
    schema_pointer: str


@cache
def _methods() -> dict[str, tuple[int, dict[str, Any]]]:
    return {m["name"]: (i, m) for i, m in enumerate(document()["methods"])}


def method_names() -> list[str]:
    """Every method the contract describes, in document order."""
    return list(_methods())


def method_pointer(name: str) -> str:
    """The JSON pointer of a method object, e.g. ``/methods/3``. ``KeyError`` if
    the contract does not describe ``name``."""
    return f"/methods/{_methods()[name][0]}"


def params(name: str) -> list[Param]:
    """A method's params with their schema locations (content descriptor refs followed)."""
    base = method_pointer(name)
    found: list[Param] = []
    for i, descriptor in enumerate(_methods()[name][1]["params"]):
        pointer = f"{base}/params/{i}"
        if "$ref" in descriptor:
            pointer = _strip(descriptor["$ref"])
            descriptor = resolve(pointer)
        found.append(
            Param(descriptor["name"], bool(descriptor.get("required")), f"{pointer}/schema")
        )
    return found


def scope(name: str) -> str:
    """Who may call a method: its ``x-scope`` (see ``gateway.rpc.access``).
    ``KeyError`` if the contract does not describe the method or its scope."""
    return str(_methods()[name][1]["x-scope"])


def result_pointer(name: str) -> str:
    """Where a method's result schema lives in the contract."""
    pointer = f"{method_pointer(name)}/result"
    result = resolve(pointer)
    if "$ref" in result:
        pointer = _strip(result["$ref"])
    return f"{pointer}/schema"


def locate(schema_path: Sequence[str | int], start: str) -> str:
    """The contract location (``#/...``) of a failed keyword.

    jsonschema reports a keyword's path through the schema but leaves ``$ref``
    hops out of it; this walks the same path from ``start`` (a JSON pointer),
    following a ``$ref`` whenever the next step is not in the schema at hand.
    Gives ``#`` + ``start`` if the path cannot be followed.
    """
    pointer = start
    try:
        node = resolve(pointer)
        for step in schema_path:
            while isinstance(node, dict) and str(step) not in node and "$ref" in node:
                pointer = _strip(node["$ref"])
                node = resolve(pointer)
            node = node[int(step)] if isinstance(node, list) else node[str(step)]
            pointer = f"{pointer}/{_escape(str(step))}"
    except (LookupError, ValueError, TypeError):
        return f"#{start}"
    return f"#{pointer}"


def _strip(ref: str) -> str:
    """A reference into this document as a bare JSON pointer."""
    for prefix in (f"{_BASE_URI}#", "#"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    raise LookupError(f"not a reference into the contract: {ref!r}")


def _pointer_parts(ref: str) -> list[str]:
    pointer = _strip(ref) if "#" in ref else ref
    if pointer in ("", "/"):
        return [] if pointer == "" else [""]
    if not pointer.startswith("/"):
        raise LookupError(f"not a JSON pointer: {ref!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")
