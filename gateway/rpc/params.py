"""Params checked against the contract, before any handler runs.

Each method's by-name params become one object schema (a property per
content descriptor, ``$ref``-ing the descriptor's schema in the contract), so
jsonschema does all the work and the handler can trust what it gets. A failure
is an ``InvalidParams`` (-32602) whose ``data`` names the first failing field
(``path``, e.g. ``job.priority``), the contract location of the rule it broke
(``schema_path``, e.g. ``#/components/schemas/JobSpec/properties/priority/maximum``),
a message that never quotes the value (it may be a secret), and every failure
in ``errors``.
"""

from __future__ import annotations

from typing import Any

from gateway import contract
from gateway.errors import InvalidParams

Problem = dict[str, str]


class ParamsValidator:
    """The params check of one method of the contract."""

    def __init__(self, method: str) -> None:
        self.method = method
        self._params = {p.name: p for p in contract.params(method)}
        self._method_pointer = contract.method_pointer(method)
        self._known = frozenset(self._params)
        self._required = frozenset(name for name, p in self._params.items() if p.required)
        self._validator = contract.compile_schema(
            {
                "type": "object",
                "additionalProperties": False,
                "required": [p.name for p in self._params.values() if p.required],
                "properties": {
                    p.name: contract.ref_to(p.schema_pointer) for p in self._params.values()
                },
            }
        )

    def check(self, params: dict[str, Any] | list[Any] | None) -> dict[str, Any]:
        """The params as a dict, or InvalidParams.

        Absent params and ``[]`` mean "no params"; any other array is refused,
        since every method is ``paramStructure: by-name``.
        """
        if params is None or params == []:
            params = {}
        if isinstance(params, dict) and self._validator.passes(params):  # every valid call
            return params
        if not isinstance(params, dict):
            where = f"#{self._method_pointer}/paramStructure"
            raise self._error([_problem("", "params must be an object (by name)", where)])
        keys = params.keys()
        found = [] if self._required <= keys <= self._known else self._names(params)
        if not found:
            problems = self._validator.report(params)  # passes() refused it above
            if not problems:  # valid after all (the fast check was not sure)
                return params
            found = [self._located(p) for p in problems]
        raise self._error(found)

    def _names(self, params: dict[str, Any]) -> list[Problem]:
        """Missing and unknown param names, each under its own name (jsonschema
        would report them against the params object as a whole)."""
        missing = [
            _problem(
                name, "is a required param", f"#{p.schema_pointer.removesuffix('/schema')}/required"
            )
            for name, p in self._params.items()
            if p.required and name not in params
        ]
        unknown = [
            _problem(name, "is not a param of this method", f"#{self._method_pointer}/params")
            for name in params
            if name not in self._params
        ]
        return missing + unknown

    def _located(self, problem: dict[str, str]) -> Problem:
        """A ``Schema.problems()`` entry with its schema path turned into a contract location.

        ``Schema.problems()`` joins the keyword path with "/"; splitting it back is
        exact because no schema key in the contract contains a "/" (property
        names are identifiers)."""
        steps = [s for s in problem["schema_path"].split("/") if s]
        if len(steps) >= 2 and steps[0] == "properties" and steps[1] in self._params:
            schema_path = contract.locate(steps[2:], self._params[steps[1]].schema_pointer)
        else:
            schema_path = f"#{self._method_pointer}/params"
        return {"path": problem["field"], "schema_path": schema_path, "message": problem["message"]}

    def _error(self, found: list[Problem]) -> InvalidParams:
        first = found[0]
        where = f"{first['path']} " if first["path"] else ""
        return InvalidParams(
            f"Invalid params: {where}{first['message']}",
            {**first, "errors": found},
        )


def _problem(path: str, message: str, schema_path: str) -> Problem:
    return {"path": path, "schema_path": schema_path, "message": message}
