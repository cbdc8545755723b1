"""The verifier proves "no write without the customer's yes to exactly this action" and
"nothing after a hand-over" over the tables; broken tables are caught with their shortest
counterexample. Diagrams draw customer events as their own kind."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from chat_desk import TRANSITIONS, Ledger, build

from fsm import Engine, MemoryStore, ToolSpec, WorkflowSpec
from fsm.auditor.diagram import CUSTOMER, extract, overlay
from fsm.auditor.render import to_dot, to_markdown, to_mermaid
from fsm.auditor.verify import (
    ConfirmedWrites,
    CustomerOnly,
    InvariantError,
    NothingAfter,
    verify,
)
from fsm.errors import WorkflowDefinitionError
from fsm.testing import ScriptedCustomer, talk


@pytest.fixture
def desk() -> WorkflowSpec:
    return build(Ledger())


def verdict(spec: WorkflowSpec, invariant: Any) -> Any:
    [v] = verify(spec, [invariant]).verdicts
    return v


def moves(v: Any) -> list[str]:
    return [mv.describe() for mv in v.counterexample]


def test_the_desk_proves_its_invariants(desk: WorkflowSpec) -> None:
    report = verify(desk)
    assert report.ok, report.text()
    assert "PROVED    cancel_order runs only after the customer's yes to exactly that call, " \
        "one call per yes" in report.text()
    md = report.markdown()
    assert "a write bound to a proposal (confirmed_by) runs only while the customer's yes" in md
    assert verdict(desk, ConfirmedWrites()).proved  # every write


def test_a_write_not_bound_to_the_proposal_is_caught(desk: WorkflowSpec) -> None:
    loose = dataclasses.replace(desk.tools["cancel_order"], confirmed_by=None)
    spec = build(Ledger(), tools=[desk.tools["get_order"], loose], invariants=())
    v = verdict(spec, ConfirmedWrites("cancel_order"))
    assert not v.proved
    assert v.why.startswith("`cancel_order` runs on a yes it is not bound to")
    assert moves(v) == [
        "talking: the model fires propose → confirming",
        "confirming: the customer's reply fires confirmed → cancelling",
        "cancelling: the model calls cancel_order; its result fires cancelled → talking",
    ]


def test_a_write_the_model_reaches_without_asking_is_caught(desk: WorkflowSpec) -> None:
    loose = dataclasses.replace(desk.tools["cancel_order"], confirmed_by=None)
    tools_by_state = {"talking": ["get_order", "cancel_order"], "cancelling": ["cancel_order"]}
    spec = build(Ledger(), tools=[desk.tools["get_order"], loose], invariants=(),
                 tools_by_state=tools_by_state)
    v = verdict(spec, ConfirmedWrites())
    assert v.why == "`cancel_order` runs, and the customer has not confirmed it"
    assert moves(v) == ["talking: the model calls cancel_order"]
    # Bound, the same table is proved: the runtime refuses the call without the yes.
    bound = build(Ledger(), invariants=(), tools_by_state=tools_by_state)
    assert verdict(bound, ConfirmedWrites()).proved


def test_an_event_the_model_could_fire_is_caught(desk: WorkflowSpec) -> None:
    v = verdict(desk, CustomerOnly("confirmed", "give_up"))
    assert not v.proved and v.why == "the model fires `give_up`"
    assert moves(v) == ["talking: the model fires give_up → handed_over"]


def transfer_desk(**tool: Any) -> WorkflowSpec:
    """The desk with a hand-over tool in ``talking``."""
    desk = build(Ledger())
    transfer = ToolSpec("transfer_to_human_agents", lambda a, c: {"ok": True}, "Hand over.",
                        write=True, emits=lambda r: "transferred",
                        emits_events=("transferred",), **tool)
    transitions = {**TRANSITIONS, "talking": {**TRANSITIONS["talking"],
                                              "transferred": "handed_over"}}
    return build(Ledger(), transitions=transitions, invariants=(),
                 tools=[*desk.tools.values(), transfer],
                 tools_by_state={"talking": ["get_order", "transfer_to_human_agents"],
                                 "cancelling": ["cancel_order"]})


def test_nothing_after_a_transfer_is_proved_only_when_the_transfer_always_ends_the_run() -> None:
    maybe = verdict(transfer_desk(), NothingAfter(tool="transfer_to_human_agents"))
    assert not maybe.proved
    assert moves(maybe)[0] == "talking: the model calls transfer_to_human_agents"
    assert maybe.why.endswith("after `transfer_to_human_agents`")
    always = verdict(transfer_desk(always_emits=True),
                     NothingAfter(tool="transfer_to_human_agents"))
    assert always.proved, always.why


def test_invariants_of_conversations_name_what_the_workflow_has() -> None:
    with pytest.raises(WorkflowDefinitionError, match="unknown tool 'refund_all'"):
        build(Ledger(), invariants=(ConfirmedWrites("refund_all"),))
    with pytest.raises(InvariantError, match="unknown event 'yes'"):
        verify(build(Ledger()), [CustomerOnly("yes")])
    with pytest.raises(TypeError, match="NothingAfter takes a tool or an event"):
        NothingAfter()


def test_counterexamples_are_runs_the_engine_really_allows() -> None:
    """The loose desk's counterexample, replayed: the unbound write runs on a yes to
    another call (the audit of the table's weakness is real, not an artefact)."""
    ledger = Ledger()
    desk = build(ledger)
    loose = dataclasses.replace(desk.tools["cancel_order"], confirmed_by=None)
    spec = build(ledger, tools=[desk.tools["get_order"], loose], invariants=())
    from fsm.testing import ScriptedPolicy

    x = {"order_id": "A-1001", "reason": "no longer needed"}
    y = {"order_id": "A-1001", "reason": "ordered by mistake"}
    policy = ScriptedPolicy([
        {"tool": "advance", "args": {"event": "propose", "tool": "cancel_order", "args": x}},
        {"tool": "cancel_order", "args": y},
        {"tool": "advance", "args": {"event": "nothing_to_do"}},
    ])
    engine = Engine(spec, MemoryStore(), policy)
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["yes"]))
    assert run.status == "done"
    assert [e["reason"] for e in ledger.entries()] == ["ordered by mistake"]


# -- diagrams ----------------------------------------------------------------------------

def test_customer_events_are_drawn_as_their_own_kind(desk: WorkflowSpec) -> None:
    d = extract(desk)
    by_customer = {(e.source, e.event) for e in d.edges if e.firers == (CUSTOMER,)}
    assert by_customer == {("confirming", "confirmed"), ("confirming", "declined"),
                           ("confirming", "silent"), ("talking", "silent")}
    assert d.node("confirming").marks == ("customer",)
    assert "asks" in d.node("talking").marks and "confirmed" in d.node("cancelling").marks
    dot = to_dot(d)
    assert "confirmed</b><br/><i>by customer</i>" in dot
    confirmed_edge = next(line for line in dot.splitlines() if "confirming -> cancelling" in
                          line)
    assert 'style=bold' in confirmed_edge and "#047857" in confirmed_edge
    assert "✉ waits for the customer" in dot and "cancel_order (write, needs the customer's " \
        "yes)" in dot
    mermaid = to_mermaid(d)
    assert "classDef customer" in mermaid and "class confirming customer" in mermaid
    assert "confirming --> cancelling : confirmed · by customer" in mermaid
    md = to_markdown(d)
    assert "| `confirming` | `confirmed` | — | `cancelling` | customer | — |" in md
    assert "only the customer's reply fires this event" in md


def test_a_workflow_that_never_talks_draws_no_customer_legend(spec: WorkflowSpec) -> None:
    d = extract(spec)  # the refund workflow
    assert not d.converses
    for text in (to_dot(d), to_mermaid(d), to_markdown(d)):
        assert "customer's reply" not in text and "classDef customer" not in text


def test_a_conversation_drawn_on_its_run(desk: WorkflowSpec) -> None:
    store = MemoryStore()
    from chat_desk import clerk

    engine = Engine(desk, store, clerk)
    run = engine.reply(engine.start("cancel", user="asha").run_id, "A-1001")
    assert (run.status, run.state) == ("awaiting_customer", "confirming")
    drawn = overlay(run.run_id, store.events(run.run_id))
    assert drawn.status == "awaiting_customer" and drawn.current == "confirming"
    lines = [line.what for line in drawn.log]
    assert "asked the customer" in lines and "the customer replied (reply 1)" in lines
    assert "asked the customer to confirm a proposal" in lines
    assert "◉ now here (awaiting_customer)" in to_dot(extract(desk, drawn))
