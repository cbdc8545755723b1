"""Versions of a workflow: labels, earlier versions kept beside the current one, and
the JSON a store records of each definition."""

from __future__ import annotations

import json

import pytest
from deploykit import V2_REFUND_DESCRIPTION, revised, v1, v2

from fsm import WorkflowDefinitionError, define_workflow
from fsm.definition.versions import Shape, definition_body, definition_record
from fsm.records import DefinitionRecord


def tiny(version: str = "", **changes: object) -> object:
    tables: dict[str, object] = {"transitions": {"a": {"go": "b"}, "b": {}}, "tools_by_state": {},
                                 "initial": "a"}
    tables.update(changes)
    return define_workflow("tiny", version=version, **tables)  # type: ignore[arg-type]


def test_a_label_names_a_hash_without_changing_it() -> None:
    assert v1().version == "1" and v1().label == "1"
    unlabelled = revised(v1(), version="")
    assert unlabelled.definition_hash == v1().definition_hash
    assert unlabelled.label == unlabelled.definition_hash


def test_a_workflow_keeps_earlier_versions_oldest_first() -> None:
    one, two = v1(), v2()
    assert [v.label for v in two.versions] == ["1", "2"]
    assert two.version_for(one.definition_hash).label == "1"  # type: ignore[union-attr]
    assert two.version_for(two.definition_hash) is two
    assert two.version_for("0" * 16) is None
    assert two.named("1").definition_hash == one.definition_hash  # type: ignore[union-attr]
    assert two.named(one.definition_hash).label == "1"  # type: ignore[union-attr]
    assert two.named("current") is two and two.named("3") is None
    # The earlier versions a kept version keeps are kept too, each hash once.
    three = revised(two, version="3", instructions={**two.instructions, "done": "x"},
                    earlier=(two, one))
    assert [v.label for v in three.versions] == ["1", "2", "3"]


def test_version_two_changes_a_description_and_adds_a_state() -> None:
    one, two = v1(), v2()
    assert two.definition_hash != one.definition_hash
    assert "escalated" in two.states and "escalated" not in one.states
    assert two.tools["refund_item"].description == V2_REFUND_DESCRIPTION


def test_bad_versions_are_refused_listing_every_problem() -> None:
    other = tiny("1")
    with pytest.raises(WorkflowDefinitionError) as info:
        revised(v1(), version=" current", earlier=(other, v1(), "v0"))  # type: ignore[arg-type]
    problems = info.value.problems
    assert any("version ' current' cannot be a label" in p for p in problems), problems
    assert any("earlier version '1' is of workflow 'tiny', not 'refund'" in p
               for p in problems), problems
    assert any("earlier[2] is str, not a WorkflowSpec" in p for p in problems), problems
    assert any("version labels used twice: '1'" in p for p in problems), problems


def test_an_earlier_version_with_the_same_hash_is_refused() -> None:
    with pytest.raises(WorkflowDefinitionError) as info:
        revised(v1(), version="2", earlier=(v1(),))
    assert "earlier version '1' has the same definition hash as this one" in str(info.value)


def test_the_record_holds_the_tables_schemas_and_invariants_as_json() -> None:
    spec = v2()
    record = definition_record(spec, now=12.5)
    assert (record.workflow, record.version, record.definition_hash, record.recorded_at) == (
        "refund", "2", spec.definition_hash, 12.5)
    body = json.loads(json.dumps(record.body))  # plain JSON, as a store keeps it
    assert body["transitions"]["verifying"]["escalate"] == "escalated"
    assert body["tools"]["refund_item"]["parameters"]["properties"]["amount_paise"]
    assert {"kind": "ToolOnlyIn", "tool": "refund_item", "states": ["refunding"],
            "title": "`refund_item` runs only in `refunding`"} in body["invariants"]
    assert body["version"] == "2" and "escalated" in body["states"]
    assert definition_body(spec) is definition_body(spec)  # built once per spec


def test_a_shape_read_back_from_a_record_says_what_the_spec_says() -> None:
    spec = v1()
    shape = Shape.of_record(DefinitionRecord.model_validate_json(
        definition_record(spec).model_dump_json()))
    assert shape == Shape.of(spec)
    assert shape.label == "1" and shape.initial == "collecting"
    assert shape.waits_for_person("awaiting_approval") and not shape.waits_for_person("deciding")
    assert shape.fired_by_tools("refund_ok") == {"refund_item"}
    assert shape.tools_by_state["refunding"] == ("refund_item",)
    with pytest.raises(ValueError, match="is not a definition body"):
        Shape.read("h", {"name": "x"})
