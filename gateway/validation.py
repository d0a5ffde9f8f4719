"""Checking against the contract's schemas, and client-safe error details.

Every RPC call's params are checked, so the check is on the job path.
fastjsonschema compiles a schema to Python and passes a valid job.run's
params in about 6 µs, where jsonschema took 77. An instance the fast check
refuses is checked again by jsonschema, the reference implementation, which
reports every failure; jsonschema has the last word, so a stricter fast
check never refuses what the contract allows (``test_validation`` checks
that the two agree on the contract's schemas).

A ``pattern`` is ECMA-262, where ``$`` ends the string; Python's ``$``
also matches before a trailing newline, so jsonschema's stock check would
pass ``"alice"`` plus a newline as an identifier. Both checks here read
``$`` as the end of the string (fastjsonschema does so itself).

jsonschema's own messages quote the offending value, which may be a secret
(an env var) or a megabyte of script; clients and logs get the field path and
the rule instead, never the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend
from referencing import Registry

#: An unescaped ``$`` (as fastjsonschema finds it).
_DOLLAR = re.compile(r"(?<!\\)\$")


@cache
def _ecma_pattern(pattern: str) -> re.Pattern[str]:
    """An ECMA-262 pattern as Python reads it: ``$`` is the end of the string."""
    return re.compile(_DOLLAR.sub(r"\\Z", pattern))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _ecma_pattern(pattern).search(instance):
        yield ValidationError(f"does not match {pattern!r}")


_Validator: Any = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _pattern}
)

_RULES = {
    "type": "must be of type {}",
    "pattern": "must match {}",
    "maxLength": "must be at most {} characters",
    "minLength": "must be at least {} characters",
    "maximum": "must be at most {}",
    "minimum": "must be at least {}",
    "maxItems": "must have at most {} items",
    "maxProperties": "must have at most {} entries",
    "enum": "must be one of {}",
    "uniqueItems": "must not repeat items",
}


def _field(error: ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path)


def _message(error: ValidationError) -> str:
    keyword = str(error.validator)
    if keyword in _RULES:
        return _RULES[keyword].format(error.validator_value)
    if keyword in {"required", "dependentRequired", "additionalProperties"}:
        return error.message  # names properties, never values
    if keyword == "propertyNames":
        return "has an invalid name"
    return f"fails {keyword}"


#: Keywords that mean the same in draft 7 (fastjsonschema's newest) as in
#: 2020-12 (the contract's), when ``items`` is one schema.
_SAME_IN_DRAFT7 = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties", "propertyNames", "oneOf", "anyOf", "allOf", "not",
    "description", "title", "default", "examples", "deprecated", "$comment",
})  # fmt: skip


def _draft7(node: Any) -> Any:
    """``node`` in draft 7 terms for the fast check, or None when a keyword has
    no exact equivalent (then jsonschema alone checks the schema).

    ``dependentRequired`` is draft 7's array form of ``dependencies``; ``format``
    is dropped, since 2020-12 treats it as an annotation (jsonschema does not
    assert it) while fastjsonschema would."""
    if isinstance(node, list):
        items = [_draft7(item) for item in node]
        return None if any(item is None for item in items) else items
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "format":
            continue
        if key == "dependentRequired":
            out["dependencies"] = value
        elif key in _SAME_IN_DRAFT7 and not (key == "items" and isinstance(value, list)):
            if key in {"properties", "enum", "const", "default", "examples", "required"}:
                converted = value if key != "properties" else _draft7_map(value)
            else:
                converted = _draft7(value)
            if converted is None and value is not None:
                return None
            out[key] = converted
        else:
            return None
    return out


def _draft7_map(properties: dict[str, Any]) -> dict[str, Any] | None:
    out = {name: _draft7(sub) for name, sub in properties.items()}
    return None if any(sub is None for sub in out.values()) else out


class Schema:
    """One schema of the contract, compiled for both checks."""

    def __init__(self, schema: dict[str, Any], registry: Registry[Any]) -> None:
        self.validator = _Validator(schema, registry=registry)
        self._fast: Callable[[Any], Any] | None = None
        fast = _draft7(schema)  # None for a $ref left in, too (fastjsonschema would fetch it)
        if fast is not None:
            self._fast = fastjsonschema.compile(fast, use_default=False)

    def is_valid(self, instance: Any) -> bool:
        return not self.problems(instance)

    def problems(self, instance: Any) -> list[dict[str, str]]:
        """Every failure as ``{"field", "message", "schema_path"}``, in a stable order."""
        if self._fast is not None:
            try:
                self._fast(instance)
            except fastjsonschema.JsonSchemaValueException:
                pass  # jsonschema says what, and whether it really fails
            else:
                return []
        return _report(self.validator, instance)


def _report(validator: Any, instance: Any) -> list[dict[str, str]]:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    return [
        {
            "field": _field(e),
            "message": _message(e),
            "schema_path": "/".join(str(p) for p in e.absolute_schema_path),
        }
        for e in errors
    ]
