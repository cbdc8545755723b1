"""The definition hash covers every field that changes what a run does, from one list."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from fsm import Guard, ToolSpec, WorkflowSpec, define_workflow
from fsm.definition.spec import HASHED_FIELDS, HASHED_WHEN_ON, HASHED_WHEN_SET, UNHASHED_FIELDS


class Payload(BaseModel):
    amount: int


class OtherPayload(BaseModel):
    amount: int
    reason: str


def always(facts: Any, payload: Any) -> bool:
    return True


LOOKUP = ToolSpec("lookup", lambda args, ctx: None, "Look something up.")
WRITE = ToolSpec("write", lambda args, ctx: {"ok": True}, "Write it down.", write=True,
                 emits=lambda r: None, emits_events=("finish",))


def _lower(tool: Any, args: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """An ``amend`` hook: what a reviewer may change is behaviour too."""
    return {**args, **changes}


def base(**changes: Any) -> dict[str, Any]:
    """Every hashed field set to something, so that each can be changed on its own."""
    tables: dict[str, Any] = {
        "name": "w",
        "transitions": {
            "start": {"go": "work"},
            "work": {"finish": "done", "ask": "review", "give_up": "handed_over",
                     "again": "start", "close": "closed", "hold": "holding"},
            "holding": {"resume": "work"},
            "review": {"approved": "work", "declined": "handed_over", "expired": "handed_over"},
            "closed": {},
        },
        "tools_by_state": {"start": ["lookup"], "work": ["lookup", "write"]},
        "initial": "start",
        "terminal": {"done"},
        "handed_over_states": {"handed_over"},
        "finish_states": {"closed"},
        "human_events": {"approved", "declined", "expired"},
        "guards": {"go": Guard("the order is known", always)},
        "payloads": {"ask": Payload},
        "records": {"ask": "request"},
        "tools": [LOOKUP, WRITE],
        "instructions": {"work": "Do the work."},
        "system_prompt": "You are a clerk.",
        "expiry_event": None,
        "approve_event": "approved",
        "deny_event": "declined",
        "approval_ttl_seconds": 3600,
        "settings": {"limit": 500},
    }
    return {**tables, **changes}


def build(**changes: Any) -> WorkflowSpec:
    tables = base(**changes)
    return define_workflow(tables.pop("name"), **tables)


def tool(**changes: Any) -> list[ToolSpec]:
    return [LOOKUP, dataclasses.replace(WRITE, **changes)]


VARIANTS = [
    pytest.param({"name": "w2"}, {"name"}, id="name"),
    pytest.param({"transitions": {**base()["transitions"],
                                  "holding": {"resume": "work", "drop": "handed_over"}}},
                 {"transitions"}, id="transitions"),
    pytest.param({"tools_by_state": {"start": ["lookup"], "work": ["write"]}},
                 {"tools_by_state"}, id="tools_by_state"),
    pytest.param({"initial": "work"}, {"initial"}, id="initial"),
    pytest.param({"terminal": {"done", "closed"}}, {"terminal"}, id="terminal"),
    pytest.param({"handed_over_states": {"handed_over", "done"}}, {"handed_over_states"},
                 id="handed_over_states"),
    pytest.param({"finish_states": {"closed", "work"}}, {"finish_states"},
                 id="finish_states"),
    pytest.param({"human_events": {"approved", "declined", "expired", "resume"}},
                 {"human_events"}, id="human_events"),
    pytest.param({"guards": {"go": Guard("the order is paid", always)}}, {"guards"},
                 id="guard-description"),
    pytest.param({"guards": {"go": Guard("the order is known", always,
                                         establishes=("known",))}},
                 {"guards"}, id="guard-establishes"),
    pytest.param({"guards": {}}, {"guards"}, id="guard-removed"),
    pytest.param({"payloads": {"ask": OtherPayload}}, {"payloads"}, id="payloads"),
    pytest.param({"records": {"ask": "question"}}, {"records"}, id="records"),
    pytest.param({"tools": tool(write=False)}, {"tools"}, id="tool-write"),
    pytest.param({"tools": tool(retry_safe=True)}, {"tools"}, id="tool-retry_safe"),
    pytest.param({"tools": tool(tags=frozenset({"moves_money"}))}, {"tools"}, id="tool-tags"),
    pytest.param({"tools": tool(approval=True)}, {"tools"}, id="tool-approval"),
    pytest.param({"tools": tool(approval=lambda a, f: True)}, {"tools"},
                 id="tool-approval-predicate"),
    pytest.param({"tools": tool(check=lambda a, f: None)}, {"tools"}, id="tool-check"),
    pytest.param({"tools": tool(remember=lambda a, r, f: {})}, {"tools"},
                 id="tool-remember"),
    pytest.param({"tools": tool(emits=None, emits_events=())}, {"tools"}, id="tool-emits_events"),
    pytest.param({"tools": tool(description="Write it all down.")}, {"tools"},
                 id="tool-description"),
    pytest.param({"tools": tool(args=Payload)}, {"tools"}, id="tool-args"),
    pytest.param({"instructions": {"work": "Do the work well."}}, {"instructions"},
                 id="instructions"),
    pytest.param({"system_prompt": "You are a careful clerk."}, {"system_prompt"},
                 id="system_prompt"),
    pytest.param({"expiry_event": "expired"}, {"expiry_event"}, id="expiry_event"),
    pytest.param({"approve_event": "expired"}, {"approve_event"}, id="approve_event"),
    pytest.param({"deny_event": "expired"}, {"deny_event"}, id="deny_event"),
    pytest.param({"approve_event": "declined", "deny_event": "approved"},
                 {"approve_event", "deny_event"}, id="approve-and-deny-swapped"),
    pytest.param({"approval_ttl_seconds": 7200}, {"approval_ttl_seconds"},
                 id="approval_ttl_seconds"),
    pytest.param({"settings": {"limit": 600}}, {"settings"}, id="settings"),
    pytest.param({"amend": _lower}, {"amend"}, id="amend"),
]


@pytest.mark.parametrize("changes, fields", VARIANTS)
def test_changing_a_behaviour_field_changes_the_hash(
    changes: dict[str, Any], fields: set[str],
) -> None:
    before, after = build(), build(**changes)
    differ = {f for f in HASHED_FIELDS if before.behaviour()[f] != after.behaviour()[f]}
    assert differ == fields
    assert after.definition_hash != before.definition_hash


def test_every_hashed_field_is_changed_by_some_variant() -> None:
    covered = set().union(*(p.values[1] for p in VARIANTS))
    assert covered == set(HASHED_FIELDS)


def test_every_field_of_the_spec_is_hashed_or_says_why_not() -> None:
    assert set(HASHED_FIELDS).isdisjoint(UNHASHED_FIELDS)
    assert set(HASHED_WHEN_SET).isdisjoint(set(HASHED_FIELDS) | set(UNHASHED_FIELDS))
    assert set(HASHED_FIELDS) | set(HASHED_WHEN_SET) | set(HASHED_WHEN_ON) \
        | set(UNHASHED_FIELDS) == set(WorkflowSpec.model_fields)


def _yes(text: str, asked: dict[str, Any]) -> str | None:
    return "confirmed" if text.strip().lower() == "yes" else "declined"


def _no(text: str, asked: dict[str, Any]) -> str | None:
    return "declined"


def talking(**changes: Any) -> WorkflowSpec:
    """A workflow that talks with its customer, each conversation field set."""
    class Proposal(BaseModel):
        tool: str
        args: dict[str, Any]

    tables: dict[str, Any] = {
        "transitions": {
            "asking": {"propose": "confirming", "left": "handed_over"},
            "confirming": {"confirmed": "writing", "declined": "asking",
                           "left": "handed_over"},
            "writing": {"finish": "done"},
        },
        "tools_by_state": {"writing": ["write"]},
        "initial": "asking", "terminal": {"done"}, "handed_over_states": {"handed_over"},
        "payloads": {"propose": Proposal}, "records": {"propose": "proposal"},
        "tools": [dataclasses.replace(WRITE, confirmed_by="proposal")],
        "customer_events": {"confirmed", "declined", "left"},
        "asks_customer": {"asking"}, "interpret": _yes,
        "reply_ttl_seconds": 600, "reply_expiry_event": "left",
    }
    tables.update(changes)
    return define_workflow("talking", **tables)


CONVERSATION_VARIANTS = [
    pytest.param({"interpret": _no}, {"interpret"}, id="interpret"),
    pytest.param({"reply_ttl_seconds": 60}, {"reply_ttl_seconds"}, id="reply_ttl_seconds"),
    pytest.param({"asks_customer": {"asking", "writing"},
                  "transitions": {"asking": {"propose": "confirming", "left": "handed_over"},
                                  "confirming": {"confirmed": "writing",
                                                 "declined": "asking", "left": "handed_over"},
                                  "writing": {"finish": "done", "left": "handed_over"}}},
                 {"asks_customer", "transitions"}, id="asks_customer"),
    pytest.param({"customer_events": {"confirmed", "declined", "left", "withdrawn"},
                  "transitions": {"asking": {"propose": "confirming", "left": "handed_over",
                                             "withdrawn": "handed_over"},
                                  "confirming": {"confirmed": "writing",
                                                 "declined": "asking", "left": "handed_over"},
                                  "writing": {"finish": "done"}}},
                 {"customer_events", "transitions"},
                 id="customer_events"),
    pytest.param({"tools": [dataclasses.replace(WRITE, confirmed_by="proposal",
                                                always_emits=True)]}, {"tools"},
                 id="tool-always_emits"),
]


@pytest.mark.parametrize("changes, fields", CONVERSATION_VARIANTS)
def test_changing_a_conversation_field_changes_the_hash(
    changes: dict[str, Any], fields: set[str],
) -> None:
    before, after = talking().behaviour(), talking(**changes).behaviour()
    differ = {f for f in set(before) | set(after) if before.get(f) != after.get(f)}
    assert differ == fields
    assert talking(**changes).definition_hash != talking().definition_hash


def test_conversation_fields_are_hashed_only_when_set() -> None:
    """A workflow that never talks with its customer hashes as it did before they existed:
    the refund workflow's hash is the one its runs have recorded all along."""
    from workflows.refund import WORKFLOW

    assert not set(HASHED_WHEN_SET) & set(build().behaviour())
    # "servers" is not a conversation field: it is set by a workflow with tool servers.
    assert set(HASHED_WHEN_SET) - {"confirm_event", "servers"} <= set(talking().behaviour())
    assert "confirmed_by" not in build().behaviour()["tools"]["write"]
    assert talking().behaviour()["tools"]["write"]["confirmed_by"] == "proposal"
    assert WORKFLOW.definition_hash == "28dc253ca4e5cf27"


def test_the_hash_is_stable_and_ignores_what_does_not_change_behaviour() -> None:
    from fsm.auditor.verify import ToolOnlyIn

    spec = build()
    assert build().definition_hash == spec.definition_hash
    # A fresh function with the same role, and invariants, leave the hash alone.
    same = build(tools=[LOOKUP, dataclasses.replace(WRITE, fn=lambda args, ctx: {})],
                 invariants=(ToolOnlyIn("write", "work"),))
    assert same.definition_hash == spec.definition_hash
    assert len(spec.definition_hash) == 16
