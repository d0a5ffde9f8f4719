"""The OpenRPC contract is valid, self-contained, and matches what is served.

``openrpc/openrpc.json`` is what clients are generated from and what params
are validated against; these tests fail when it stops being a valid OpenRPC
document, when a ``$ref`` dangles, when a schema does not compile, and when
the server's method table and the document disagree in either direction.
No Redis involved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from gateway import contract, errors
from gateway.rpc.backends import Backends
from gateway.rpc.dispatch import Dispatcher
from gateway.rpc.methods import HERO_ALIASES, build_methods

ROOT = Path(__file__).resolve().parent.parent
VENDOR = Path(__file__).resolve().parent / "vendor" / "openrpc"

#: The method names DESIGN.md fixes, plus the three the gateway issue adds.
DESIGN_METHODS = {
    "job.create",
    "job.start",
    "job.run",
    "job.output",
    "job.status",
    "job.get",
    "job.list",
    "job.stop",
    "job.delete",
    "job.logs",
    "job.subscribe",
    "job.unsubscribe",
    "queue.stats",
    "actor.list",
    "stats.report",
    "auth.whoami",
    "rpc.discover",
    "auth.login",
    "queue.dlq.list",
    "queue.dlq.replay",
    "job.purge",
    *HERO_ALIASES,
}
#: Results whose shape the gateway does not own: free-form on purpose.
OPEN_RESULTS = {"/components/schemas/Report", "/components/schemas/OpenRPCDocument"}
_REF_SIBLINGS = {"$ref", "description", "title", "$comment", "default", "examples"}


def _meta_validator() -> Draft7Validator:
    openrpc = json.loads((VENDOR / "openrpc-meta-schema.json").read_text())
    jsonschema_meta = json.loads((VENDOR / "json-schema-tools-meta-schema.json").read_text())
    meta = Resource.from_contents(jsonschema_meta, default_specification=DRAFT7)
    registry: Registry[Any] = Registry().with_resources(
        [
            (openrpc["$id"], Resource.from_contents(openrpc, default_specification=DRAFT7)),
            (jsonschema_meta["$id"], meta),
            (jsonschema_meta["$id"].rstrip("/"), meta),  # referenced without the slash
        ]
    )
    return Draft7Validator(openrpc, registry=registry)


def _walk(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{pointer}/{i}")


class _NoSupervisor:
    """Stands in where the table needs an object; building the table calls nothing."""


def _served() -> dict[str, Any]:
    return build_methods(Backends(supervisor=_NoSupervisor()))  # type: ignore[arg-type]


# -- the document itself ---------------------------------------------------------------


def test_document_is_valid_openrpc() -> None:
    doc = contract.document()
    assert doc["openrpc"] == "1.3.2"
    found = sorted(_meta_validator().iter_errors(doc), key=lambda e: e.json_path)
    assert not found, [f"{e.json_path}: {e.message[:200]}" for e in found]


def test_meta_schema_is_not_a_rubber_stamp() -> None:
    broken = json.loads(json.dumps(contract.document()))
    broken["methods"].append({"name": "x.y", "params": "not a list"})
    broken["components"]["errors"]["Bad"] = {"code": "-1"}
    assert len(list(_meta_validator().iter_errors(broken))) >= 2


def test_package_copy_is_the_contract() -> None:
    """gateway/openrpc.json (shipped in the wheel) is the same file as openrpc/openrpc.json."""
    assert contract.CONTRACT_PATH.resolve() == (ROOT / "openrpc" / "openrpc.json").resolve()


def test_every_ref_resolves() -> None:
    refs = [
        (where, node["$ref"])
        for where, node in _walk(contract.document())
        if isinstance(node, dict) and isinstance(node.get("$ref"), str)
    ]
    assert len(refs) > 50
    for where, ref in refs:
        assert ref.startswith("#/"), f"{where}: only local refs keep the contract offline"
        try:
            contract.resolve(ref)
        except LookupError:
            pytest.fail(f"{where}: {ref} points nowhere")


def _schema_pointers() -> list[str]:
    doc = contract.document()
    pointers = [f"/components/schemas/{name}" for name in doc["components"]["schemas"]]
    pointers += [
        f"/components/contentDescriptors/{name}/schema"
        for name in doc["components"]["contentDescriptors"]
    ]
    for name in contract.method_names():
        pointers += [p.schema_pointer for p in contract.params(name)]
        pointers.append(contract.result_pointer(name))
    return sorted(set(pointers))


@pytest.mark.parametrize("pointer", _schema_pointers())
def test_every_schema_compiles(pointer: str) -> None:
    schema = contract.resolve(pointer)
    Draft202012Validator.check_schema(schema)
    for where, node in _walk(schema):
        if isinstance(node, dict) and isinstance(node.get("pattern"), str):
            re.compile(node["pattern"])
        if isinstance(node, dict) and "$ref" in node:
            # contract.locate() relies on this to map failures to contract locations
            assert set(node) <= _REF_SIBLINGS, f"{where}: a $ref beside validation keywords"
    validator = contract.validator(pointer)
    validator.is_valid({})  # whatever stays a $ref resolves through the registry


def test_error_components_are_the_exception_tree() -> None:
    """components/errors names and codes are gateway.errors' classes and codes."""
    described = contract.document()["components"]["errors"]
    assert {e["code"] for e in described.values()} == set(range(-32007, -32000))
    for name, error in described.items():
        cls = getattr(errors, name)
        assert issubclass(cls, errors.HeroError)
        assert (error["code"], error["message"]) == (cls.code, cls.default_message)


# -- methods -----------------------------------------------------------------------------


def test_served_methods_are_the_described_methods() -> None:
    described = contract.method_names()
    assert len(described) == len(set(described)), "a method is described twice"
    served = set(_served())
    assert served - set(described) == set(), "served but not described"
    assert set(described) - served == set(), "described but not served"


def test_design_methods_are_all_there() -> None:
    assert set(contract.method_names()) == DESIGN_METHODS


def test_dispatcher_refuses_an_undescribed_method() -> None:
    async def handler(params: dict[str, Any], ctx: Any) -> None:
        return None

    Dispatcher(_served())  # the real table binds
    with pytest.raises(KeyError):
        Dispatcher({"job.teleport": handler})


@pytest.mark.parametrize("name", sorted(DESIGN_METHODS))
def test_methods_take_params_by_name(name: str) -> None:
    method = contract.resolve(contract.method_pointer(name))
    assert method["paramStructure"] == "by-name"
    names = [p.name for p in contract.params(name)]
    assert len(names) == len(set(names))
    assert "result" in method and method["errors"] is not None


@pytest.mark.parametrize(("old", "new"), sorted(HERO_ALIASES.items()))
def test_hero_names_are_deprecated_twins(old: str, new: str) -> None:
    hero = contract.resolve(contract.method_pointer(old))
    current = contract.resolve(contract.method_pointer(new))
    assert hero["deprecated"] is True
    assert hero["x-replaced-by"] == new
    for part in ("params", "result", "errors", "paramStructure"):
        assert hero[part] == current[part], part
    assert all("$ref" in p for p in hero["params"]), "shared descriptors, written once"
    served = _served()
    assert served[old] == served[new]


def test_only_hero_names_are_deprecated() -> None:
    deprecated = {m["name"] for m in contract.document()["methods"] if m.get("deprecated")}
    assert deprecated == set(HERO_ALIASES)


def _reachable_objects(pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object schema reachable from a schema, following refs (each once)."""
    seen: set[str] = set()
    todo = [pointer]
    while todo:
        at = todo.pop()
        if at in seen:
            continue
        seen.add(at)
        for where, node in _walk(contract.resolve(at), at):
            if not isinstance(node, dict):
                continue
            if isinstance(node.get("$ref"), str):
                todo.append(node["$ref"].removeprefix("#"))
            if node.get("type") == "object" or "object" in (node.get("type") or []):
                yield where, node


def test_param_schemas_are_closed() -> None:
    """Every object a client sends names its fields: a typo is -32602, not ignored."""
    for name in contract.method_names():
        for param in contract.params(name):
            for where, node in _reachable_objects(param.schema_pointer):
                assert "additionalProperties" in node, f"{name}: {where} is open"


def test_result_schemas_are_closed() -> None:
    for name in contract.method_names():
        start = contract.result_pointer(name)
        for where, node in _reachable_objects(start):
            if where in OPEN_RESULTS:
                continue
            assert "additionalProperties" in node, f"{name}: {where} is open"


def test_kept_schemas_are_where_the_supervisor_looks() -> None:
    validator = contract.schema_validator("JobSpec")
    assert validator.is_valid({"script": "print(1)", "script_type": "python"})
    assert not validator.is_valid({"script": "x", "script_type": "osis", "instance": "i"})
    assert contract.schema_validator("Status").is_valid("dlq")


def test_list_params() -> None:
    limit = {p.name: p for p in contract.params("job.list")}["limit"]
    schema = contract.resolve(limit.schema_pointer)
    assert (schema["minimum"], schema["maximum"], schema["default"]) == (1, 500, 50)
    page = contract.validator(contract.result_pointer("job.list"))
    assert page.is_valid({"jobs": [], "next_cursor": None})
    assert page.is_valid({"jobs": [], "next_cursor": "opaque"})
    assert not page.is_valid({"jobs": []})


def test_wait_is_bounded_seconds() -> None:
    for name in ("job.run", "job.output"):
        wait = {p.name: p for p in contract.params(name)}["wait"]
        assert not wait.required
        v = contract.validator(wait.schema_pointer)
        assert v.is_valid(0) and v.is_valid(2.5) and v.is_valid(3600)
        assert not v.is_valid(-1) and not v.is_valid(3600.5) and not v.is_valid("1")


# -- notifications --------------------------------------------------------------------


def test_job_event_notification_is_described() -> None:
    doc = contract.document()
    (note,) = doc["x-notifications"]
    assert note["name"] == "job.event"
    method_object = _meta_validator().evolve(
        schema={"$ref": "https://meta.open-rpc.org/#/definitions/methodObject"}
    )
    assert not list(method_object.iter_errors(note))
    params = [contract.resolve(p["$ref"]) if "$ref" in p else p for p in note["params"]]
    assert [(p["name"], p["required"]) for p in params] == [
        ("subscription", True),
        ("event", True),
    ]
    event = contract.schema_validator("Event")
    assert event.is_valid(
        {
            "id": "1700000000000-0",
            "job_id": "j1",
            "event": "finished",
            "status": "finished",
            "script_type": "python",
            "group": None,
            "instance": None,
            "actor": "g:i",
            "caller_id": None,
            "attempt": 1,
            "ts": 1700000000000,
            "error": None,
        }
    )
