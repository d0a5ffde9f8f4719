"""Turn JSON Schema failures into client-safe error details.

jsonschema's own messages quote the offending value, which may be a secret
(an env var) or a megabyte of script; clients and logs get the field path and
the rule instead, never the value.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

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


def problems(validator: Draft202012Validator, instance: Any) -> list[dict[str, str]]:
    """Every failure as ``{"field", "message", "schema_path"}``, in a stable order."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    return [
        {
            "field": _field(e),
            "message": _message(e),
            "schema_path": "/".join(str(p) for p in e.absolute_schema_path),
        }
        for e in errors
    ]
