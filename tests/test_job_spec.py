"""JobSpec validated once: ``parse`` for anyone, ``from_valid`` for data the
RPC layer already checked against the contract. Pure logic, no Redis."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidJob
from gateway.model import library
from gateway.model.job import JobSpec

TYPES = ("python", "osis")
#: A JobSpec with every field a client may give.
FULL: dict[str, Any] = {
    "script": "x",
    "script_type": "osis",
    "job_id": "j1",
    "caller_id": "c",
    "context_id": "ctx",
    "worker_id": "w",
    "group": "g",
    "instance": "i",
    "priority": 0,
    "timeout": 9,
    "retries": 2,
    "env_vars": {"A": "1"},
    "prerequisites": ["p1", "p2"],
}


@pytest.mark.parametrize(
    "data",
    [{"script": "x", "script_type": "python"}, FULL],
)
def test_from_valid_builds_what_parse_builds(data: dict[str, Any]) -> None:
    data = {"job_id": "fixed", **data}
    assert JobSpec.from_valid(data, TYPES) == JobSpec.parse(data, TYPES)


def test_parse_still_checks_the_schema_for_direct_callers() -> None:
    with pytest.raises(InvalidJob) as err:
        JobSpec.parse({"script": "x", "script_type": "python", "priority": 9}, TYPES)
    assert err.value.data[0]["field"] == "priority"


@pytest.mark.parametrize("make", [JobSpec.parse, JobSpec.from_valid])
def test_both_refuse_what_no_schema_can_know(make: Any) -> None:
    with pytest.raises(InvalidJob) as err:
        make({"script": "x", "script_type": "cobol"}, TYPES)
    assert err.value.data == [
        {"field": "script_type", "message": "must be one of osis, python", "schema_path": ""}
    ]
    with pytest.raises(InvalidJob) as stream:
        make({"script": "x", "script_type": "python", "group": "g"}, TYPES, ("python",))
    assert stream.value.data[0]["field"] == "group"


def test_a_spec_cannot_be_changed_nor_can_the_env_vars_all_specs_share() -> None:
    """A JobSpec is handed from the RPC layer to the supervisor and its
    hash: nothing on the way may change it. Specs without env_vars share one
    empty mapping, so that one must refuse writes too, or a write to one
    spec's would appear in every other's."""
    spec = JobSpec(script="x", script_type="python", job_id="j1")
    with pytest.raises(AttributeError):
        spec.script = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.env_vars["A"] = "1"  # type: ignore[index]
    assert JobSpec(script="x", script_type="python", job_id="j2").env_vars == {}
    args = library.submit_many(False, [(spec, "q")]).args  # start flag, id, prerequisites, fields
    assert args[3 + library.SUBMIT_FIELDS.index("env_vars")] == "{}"


def test_from_valid_takes_each_field_given_and_the_defaults_for_the_rest() -> None:
    """``from_valid`` builds a spec by position (one per job submitted): every
    field lands where its name says, and an absent one is the JobSpec's default."""
    spec = JobSpec.from_valid(FULL, TYPES)
    assert spec._asdict() == {**FULL, "prerequisites": ("p1", "p2"), "stream": False}
    bare = JobSpec.from_valid({"script": "x", "script_type": "osis", "job_id": "j2"}, TYPES)
    assert bare == JobSpec(script="x", script_type="osis", job_id="j2")
    assert JobSpec.from_valid({"script": "x", "script_type": "python"}, TYPES).job_id


@pytest.mark.parametrize("env_vars", [None, {}])
def test_a_spec_without_env_vars_shares_the_read_only_empty_mapping(env_vars: Any) -> None:
    """No dict is made for a job without env_vars (most jobs): it gets the
    one empty mapping every such spec shares, which refuses writes."""
    data: dict[str, Any] = {"script": "x", "script_type": "osis", "job_id": "j1"}
    if env_vars is not None:
        data["env_vars"] = env_vars
    spec = JobSpec.from_valid(data, TYPES)
    assert spec.env_vars is JobSpec._field_defaults["env_vars"]
    with pytest.raises(TypeError):
        spec.env_vars["A"] = "1"
