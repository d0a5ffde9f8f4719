"""validation: the fast check and jsonschema agree on the contract's schemas.

The fast check (the schema as closures) decides alone when it passes an instance,
so it must never pass what jsonschema, the reference, refuses. Instances
are generated from each schema (every method's params and every component)
with one field at a time swapped for an awkward value: wrong types, bools
for integers, integral floats, huge numbers, long and non-ASCII strings,
repeated items, unknown keys, missing required keys.
"""

from __future__ import annotations

import random
import re
from types import MappingProxyType
from typing import Any

import pytest

from gateway import contract, validation
from gateway.rpc.params import ParamsValidator
from gateway.validation import Schema

AWKWARD: list[Any] = [
    None, True, False, 0, 1, -1, 1.0, 2.5, -0.0, 2**63, 10**30, "", "x", "x" * 300,
    "αβγ", "with space", "a/b", [], ["a", "a"], ["a", "b"], [1], {}, {"k": "v"}, {"k": 1},
]  # fmt: skip


def sample(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A value shaped after ``schema`` (not always valid: see ``perturb``)."""
    if not isinstance(schema, dict) or depth > 6:
        return rng.choice(AWKWARD)
    if "oneOf" in schema:
        return sample(rng.choice(schema["oneOf"]), rng, depth + 1)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {
            name: sample(sub, rng, depth + 1) for name, sub in props.items() if rng.random() < 0.7
        }
        for name in schema.get("required", []):
            out.setdefault(name, sample(props.get(name, {}), rng, depth + 1))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            out.update({f"k{i}": sample(extra, rng, depth + 1) for i in range(rng.randint(0, 3))})
        return out
    if kind == "array":
        return [sample(schema.get("items", {}), rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "integer":
        low, high = schema.get("minimum", -5), schema.get("maximum", 10**6)
        return rng.choice([low, high, low - 1, high + 1, rng.randint(low, high)])
    if kind == "number":
        low, high = schema.get("minimum", 0), schema.get("maximum", 1e9)
        return rng.choice([low, high, (low + high) / 2, high + 1])
    if kind == "boolean":
        return rng.choice([True, False])
    if kind == "string":
        texts = ["osis", "python", "a", "", "job-1", "1700000000000-0", "2026-11-22T12:00:00.000Z"]
        texts.append("x" * schema.get("maxLength", 10))
        # mostly a text that fits the pattern: with many patterned fields a
        # uniform pick would almost never give a valid whole (perturb breaks it)
        fitting = [t for t in texts if re.search(schema.get("pattern", ""), t)]
        return rng.choice(fitting if fitting and rng.random() < 0.8 else texts)
    return rng.choice(AWKWARD)


def perturb(value: Any, rng: random.Random) -> Any:
    """``value`` with one node swapped, dropped or added."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        roll = rng.random()
        if roll < 0.2:
            return {k: v for k, v in value.items() if k != key}
        if roll < 0.3:
            return {**value, "unknown_key": rng.choice(AWKWARD)}
        return {**value, key: perturb(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.7:
        i = rng.randrange(len(value))
        return [*value[:i], perturb(value[i], rng), *value[i + 1 :]]
    return rng.choice(AWKWARD)


def schemas() -> list[tuple[str, Schema]]:
    out = [
        (m["name"], ParamsValidator(m["name"])._validator) for m in contract.document()["methods"]
    ]
    out += [
        (name, contract.schema_validator(name))
        for name in contract.document()["components"]["schemas"]
    ]
    return out


@pytest.mark.parametrize(("name", "schema"), schemas(), ids=[n for n, _ in schemas()])
def test_fast_check_and_jsonschema_agree(name: str, schema: Schema) -> None:
    if schema._fast is None:  # a keyword the closures do not know: jsonschema alone
        assert name in NOT_COMPILED, name
        assert not schema.passes(sample(schema.validator.schema, random.Random(name)))
        return
    rng = random.Random(name)
    valid = 0
    for _ in range(400):
        instance = sample(schema.validator.schema, rng)
        if rng.random() < 0.7:
            instance = perturb(instance, rng)
        fast_ok = schema._fast(instance)
        reference_ok = not list(schema.validator.iter_errors(instance))
        assert fast_ok == reference_ok, (instance, schema.problems(instance))
        assert (schema.problems(instance) == []) == reference_ok
        valid += reference_ok
    assert 0 < valid < 400  # the corpus holds both kinds


def test_the_fast_check_fills_in_no_defaults() -> None:
    params = {"job": {"script_type": "osis", "script": "x"}}
    assert ParamsValidator("job.create").check(params) == {
        "job": {"script_type": "osis", "script": "x"}
    }


#: Components checked by jsonschema alone (``oneOf``): results, checked in tests only.
NOT_COMPILED = frozenset({"Job", "JobPage"})


def test_every_methods_params_compile_to_closures() -> None:
    """The job path never falls back to jsonschema alone: every method's params
    use only the keywords ``validation._compiled`` knows."""
    for method in contract.document()["methods"]:
        schema = ParamsValidator(method["name"])._validator.validator.schema
        assert validation._compiled(schema) is not None, method["name"]


JOB = {"script": "x", "script_type": "osis", "job_id": "j-1"}
#: JobSpecs at the edges of each keyword the closures decide (valid or not).
EDGES: list[Any] = [
    JOB,
    {**JOB, "job_id": "j-1\n"},  # Python's $ would pass it: refused
    {**JOB, "job_id": "j" * 128},
    {**JOB, "job_id": "j" * 129},
    {**JOB, "job_id": ""},
    {**JOB, "script": "é" * 10},
    {**JOB, "priority": 1.0},  # an integer by JSON Schema's rule
    {**JOB, "priority": 1.5},
    {**JOB, "priority": True},
    {**JOB, "priority": -0.0},
    {**JOB, "priority": 2**63},
    {**JOB, "timeout": 86400},
    {**JOB, "timeout": 86401},
    {**JOB, "timeout": 0},
    {**JOB, "instance": "i"},  # dependentRequired: group too
    {**JOB, "instance": "i", "group": "g"},
    {**JOB, "env_vars": {"A_1": "v"}},
    {**JOB, "env_vars": {"1A": "v"}},  # propertyNames
    {**JOB, "env_vars": {"A": 1}},  # additionalProperties as a schema
    {**JOB, "env_vars": {f"K{i}": "v" for i in range(65)}},  # maxProperties
    {**JOB, "prerequisites": ["a", "b"]},
    {**JOB, "prerequisites": ["a", "a"]},  # uniqueItems
    {**JOB, "prerequisites": [1, 1]},
    {**JOB, "prerequisites": [f"p{i}" for i in range(101)]},  # maxItems
    {**JOB, "extra": 1},
    {"script": "x"},
    MappingProxyType(dict(JOB)),  # not a dict
    [JOB],
]


@pytest.mark.parametrize("instance", EDGES)
@pytest.mark.parametrize("in_params", [False, True], ids=["JobSpec", "job.create params"])
def test_the_closures_never_pass_what_jsonschema_refuses(instance: Any, in_params: bool) -> None:
    """Where the closures are not sure they refuse, and jsonschema decides:
    ``problems`` always says what jsonschema says."""
    if in_params:
        schema, instance = ParamsValidator("job.create")._validator, {"job": instance}
    else:
        schema = contract.schema_validator("JobSpec")
    check = validation._compiled(schema.validator.schema)
    assert check is not None
    reference_ok = not list(schema.validator.iter_errors(instance))
    assert check(instance) == reference_ok
    assert (schema.problems(instance) == []) == reference_ok
