"""Checking against the contract's schemas, and client-safe error details.

Every RPC call's params are checked, so the check is on the job path. A
fast check decides alone when it passes an instance: the schema compiled to
closures (``_compiled``, for the keywords every method's params use: a
``job.create``'s params in about 1.2 µs; jsonschema took 77). An instance
the fast check refuses, and every instance of a schema it cannot take (the
``Job`` results' ``oneOf``, checked in tests only), is checked by
jsonschema, the reference implementation, which reports every failure;
jsonschema has the last word, so a stricter fast check never refuses what
the contract allows (``test_validation`` checks that the two agree on the
contract's schemas).

A ``pattern`` is ECMA-262, where ``$`` ends the string; Python's ``$``
also matches before a trailing newline, so jsonschema's stock check would
pass ``"alice"`` plus a newline as an identifier. Both checks here read
``$`` as the end of the string.

jsonschema's own messages quote the offending value, which may be a secret
(an env var) or a megabyte of script; clients and logs get the field path and
the rule instead, never the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from math import inf as INF
from typing import Any, Literal, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend
from referencing import Registry

#: An unescaped ``$``.
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


#: Whether an instance passes a schema; False may also mean "not sure" (see ``_compiled``).
Check = Callable[[Any], bool]

#: Keywords that do not validate (2020-12 treats ``format`` as an annotation too).
_ANNOTATIONS = frozenset({
    "description", "title", "default", "examples", "deprecated", "$comment", "format",
})  # fmt: skip
_STRING = frozenset({"pattern", "maxLength", "minLength"})
_NUMBER = frozenset({"minimum", "maximum"})
_ARRAY = frozenset({"items", "maxItems", "minItems", "uniqueItems"})
_OBJECT = frozenset({
    "properties", "required", "additionalProperties", "dependentRequired",
    "maxProperties", "propertyNames",
})  # fmt: skip
_COMPILED = _ANNOTATIONS | _STRING | _NUMBER | _ARRAY | _OBJECT | {"type", "enum"}
#: Each JSON type by the exact Python types ``json.loads`` makes of it (an
#: integral float is an integer too: ``_typed``), and the keywords' kind it takes.
_TYPES: dict[str, tuple[tuple[type, ...], str | None]] = {
    "string": ((str,), "string"), "integer": ((int,), "number"),
    "number": ((int, float), "number"), "boolean": ((bool,), None),
    "array": ((list,), "array"), "object": ((dict,), "object"), "null": ((type(None),), None),
}  # fmt: skip
#: Each kind of keywords, and the Python types it applies to (never a bool for a number).
_KINDS: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "array": (list,), "object": (dict,),
}  # fmt: skip


def _compiled(schema: Any) -> Check | None:
    """``schema`` as nested closures, for the keywords the contract's params
    use; None when it uses any other (``oneOf``, ``$ref``, ``const``, …).

    The closures pass an instance only where jsonschema would; where they
    are not sure they refuse, and ``Schema.problems`` asks jsonschema: a
    type is matched exactly (``type(v) is dict``, not a subclass; never a
    ``bool`` for a number), ``uniqueItems`` is decided for strings only,
    ``enum`` for string values only. A keyword applies to its own type
    alone, as in JSON Schema. Each closure is built for the keywords its
    schema has, with a single type's check folded in (docs/performance.md)."""
    if not isinstance(schema, dict) or not schema.keys() <= _COMPILED:
        return None
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else kinds
    if names is not None and not (isinstance(names, list) and all(n in _TYPES for n in names)):
        return None
    enum = schema.get("enum")
    if enum is not None and not all(isinstance(v, str) for v in enum):
        return None
    keywords = schema.keys() & _VALIDATING
    if names is not None and len(names) == 1 and enum is None:
        (name,) = names
        kind = _TYPES[name][1]
        if not keywords:
            return _typed(names)
        if kind in _FOLDED and keywords <= _KEYWORDS[kind]:  # the common cases: one call
            return _FOLDED[kind](schema, True) or None
    parts = {kind: _PARTS[kind](schema) for kind in _KEYWORDS if keywords & _KEYWORDS[kind]}
    if any(part is False for part in parts.values()):
        return None
    steps: list[Check] = []
    if names is not None:
        steps.append(_typed(names))
    if enum is not None:
        texts = frozenset(enum)
        steps.append(lambda v: type(v) is str and v in texts)
    for kind, part in parts.items():
        if part is not None and part is not False:
            steps.append(_when(_KINDS[kind], part))
    return _all(steps)


def _typed(names: list[str]) -> Check:
    """The type check alone."""
    allowed = tuple({t for n in names for t in _TYPES[n][0]})
    if "integer" in names and float not in allowed:  # JSON Schema: 1.0 is an integer
        return lambda v: type(v) in allowed or (type(v) is float and v.is_integer())
    if len(allowed) == 1:
        (only,) = allowed
        return lambda v: type(v) is only
    return lambda v: type(v) in allowed


def _when(kinds: tuple[type, ...], check: Check) -> Check:
    """``check`` for instances of exactly these types; others pass."""
    return lambda v: type(v) not in kinds or check(v)


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # a type and its bounds (an integer param): no generator
        first, second = checks
        return lambda v: first(v) and second(v)
    return lambda v: all(check(v) for check in checks)


def _string(schema: dict[str, Any], typed: bool = False) -> Check | None:
    """The string keywords' check; ``typed``: with the string type's check
    folded in (the closure every identifier of a call's params goes through)."""
    if not schema.keys() & _STRING:
        return None
    most, least = schema.get("maxLength", INF), schema.get("minLength", 0)
    if "pattern" not in schema:
        if typed:
            return lambda v: type(v) is str and least <= len(v) <= most
        return lambda v: least <= len(v) <= most
    search = _ecma_pattern(schema["pattern"]).search
    if most == INF and not least:  # an identifier: its pattern says its length
        if typed:
            return lambda v: type(v) is str and search(v) is not None
        return lambda v: search(v) is not None
    if typed:
        return lambda v: type(v) is str and least <= len(v) <= most and search(v) is not None
    return lambda v: least <= len(v) <= most and search(v) is not None


def _number(schema: dict[str, Any]) -> Check | None:
    if not schema.keys() & _NUMBER:
        return None
    low, high = schema.get("minimum", -INF), schema.get("maximum", INF)
    return lambda v: low <= v <= high


def _array(schema: dict[str, Any]) -> Check | Literal[False] | None:
    if not schema.keys() & _ARRAY:
        return None
    item = _compiled(schema.get("items", {}))
    if item is None:
        return False
    most, least = schema.get("maxItems"), schema.get("minItems", 0)
    unique = schema.get("uniqueItems", False)

    def check(v: list[Any]) -> bool:
        if (most is not None and len(v) > most) or len(v) < least:
            return False
        if unique and not (all(type(x) is str for x in v) and len(set(v)) == len(v)):
            return False
        return all(item(x) for x in v)

    return check


def _object(schema: dict[str, Any], typed: bool = False) -> Check | Literal[False] | None:
    """The object keywords' check; ``typed``: with the object type's check
    folded in (a call's params, a JobSpec)."""
    if not schema.keys() & _OBJECT:
        return None
    found = {name: _compiled(sub) for name, sub in schema.get("properties", {}).items()}
    extra = schema.get("additionalProperties", True)
    rest = (lambda v: extra) if isinstance(extra, bool) else _compiled(extra)
    key = _compiled(schema.get("propertyNames", {}))
    if any(c is None for c in found.values()) or rest is None or key is None:
        return False
    get = cast(dict[str, Check], found).get
    required = frozenset(schema.get("required", ()))
    # What is checked once the members are: dependentRequired, maxProperties, propertyNames.
    after = [_requires(k, needs) for k, needs in schema.get("dependentRequired", {}).items()]
    if "maxProperties" in schema:
        most = schema["maxProperties"]
        after.append(lambda v: len(v) <= most)
    if "propertyNames" in schema:
        after.append(lambda v: all(key(name) for name in v))
    then = _all(after) if after else None

    def check(v: dict[Any, Any]) -> bool:
        if (typed and type(v) is not dict) or not required <= v.keys():
            return False
        for name, value in v.items():
            sub = get(name)
            if not (rest(value) if sub is None else sub(value)):
                return False
        return then is None or then(v)

    return check


def _requires(name: str, needs: list[str]) -> Check:
    """``dependentRequired``: an object with ``name`` has all of ``needs`` too."""
    wanted = frozenset(needs)
    return lambda v: name not in v or wanted <= v.keys()


#: Each kind's keywords, and the builder of their check (``typed``: with the
#: type's check folded in); ``_FOLDED``: the kinds whose builder can fold it.
_KEYWORDS = {"string": _STRING, "number": _NUMBER, "array": _ARRAY, "object": _OBJECT}
_VALIDATING = _STRING | _NUMBER | _ARRAY | _OBJECT
_PARTS: dict[str, Callable[[dict[str, Any]], Check | Literal[False] | None]] = {
    "string": _string, "number": _number, "array": _array, "object": _object,
}  # fmt: skip
_FOLDED: dict[str, Callable[[dict[str, Any], bool], Check | Literal[False] | None]] = {
    "string": _string, "object": _object,
}  # fmt: skip


class Schema:
    """One schema of the contract, compiled for both checks.

    The fast check is a predicate: the schema as closures (``_compiled``)
    where it uses only the keywords they know, as every method's params
    do; any other schema is checked by jsonschema alone."""

    def __init__(self, schema: dict[str, Any], registry: Registry[Any]) -> None:
        self.validator = _Validator(schema, registry=registry)
        self._fast: Check | None = _compiled(schema)

    def is_valid(self, instance: Any) -> bool:
        return not self.problems(instance)

    def passes(self, instance: Any) -> bool:
        """The fast check alone: True means valid; False means ask ``problems``."""
        return self._fast is not None and self._fast(instance)

    def problems(self, instance: Any) -> list[dict[str, str]]:
        """Every failure as ``{"field", "message", "schema_path"}``, in a stable order."""
        return [] if self.passes(instance) else self.report(instance)

    def report(self, instance: Any) -> list[dict[str, str]]:
        """``problems`` for a caller that ran the fast check already: jsonschema
        says what fails, and whether anything does."""
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
