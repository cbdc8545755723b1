"""Conversations and deploys: the audit judges a customer's event by the reply that fired
it, fsm check-history replays replies against a candidate definition, and a migration
asks the customer again in the target's terms."""

from __future__ import annotations

import dataclasses

from chat_desk import Ledger, build, clerk

from fsm import Engine, MemoryStore, check_history
from fsm.auditor.conformance import judge
from fsm.migration import migrate, plan_migration
from fsm.testing import ScriptedCustomer, talk


def waiting_to_confirm(ledger: Ledger, store: MemoryStore, spec: object = None) -> str:
    engine = Engine(spec or build(ledger), store, clerk)  # type: ignore[arg-type]
    run = engine.reply(engine.start("cancel", user="asha", run_id="c1").run_id, "A-1001")
    assert (run.status, run.state) == ("awaiting_customer", "confirming")
    return run.run_id


def test_the_audit_judges_a_customer_event_by_the_reply_that_fired_it() -> None:
    ledger, store = Ledger(), MemoryStore()
    engine = Engine(build(ledger), store, clerk)
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001", "yes"]))
    events = store.events(run.run_id)
    assert judge(store, run, events) == []
    without = [e for e in events if not (e.kind == "reply" and e.event == "confirmed")]
    [problem] = judge(store, run, without)
    assert problem.endswith("the customer's event 'confirmed' fired without a reply of the "
                            "customer that fired it")


def test_check_history_replays_who_fired_each_customer_event() -> None:
    ledger, store = Ledger(), MemoryStore()
    engine = Engine(build(ledger), store, clerk)
    talk(engine, engine.start("cancel", user="asha", run_id="c1"),
         ScriptedCustomer(["A-1001", "yes"]))
    assert check_history(store, build(ledger)).ok
    # A candidate in which the model, not the customer, confirms.
    unbound = [dataclasses.replace(t, confirmed_by=None) for t in build(ledger).tools.values()]
    candidate = build(ledger, customer_events={"silent"}, asks_customer={"talking",
                                                                         "confirming"},
                      tools=unbound, invariants=())
    report = check_history(store, candidate)
    assert not report.ok
    assert any("the customer's reply fired 'confirmed'; in the candidate it is not theirs "
               "to fire" in p for p in report.runs[0].problems), report.lines()


def test_a_migration_asks_the_customer_again_under_the_target() -> None:
    ledger, store = Ledger(), MemoryStore()
    one = build(ledger)
    run_id = waiting_to_confirm(ledger, store, one)
    before = store.load_run(run_id)
    two = build(ledger, version="2", earlier=(one,),
                instructions={"talking": "Ask which order; fetch it; propose its cancellation."})
    plan = plan_migration(store, two, runs=[run_id], to="2", by="ops")
    assert plan.ok, plan.lines()
    assert any("waits for its customer again in 'confirming'" in line for line in plan.lines())
    assert migrate(store, two, runs=[run_id], to="2", by="ops").moved == [run_id]
    moved = store.load_run(run_id)
    assert (moved.status, moved.state, moved.definition_hash) == (
        "awaiting_customer", "confirming", two.definition_hash)
    assert moved.pending is not None and before.pending is not None
    assert moved.pending.args == before.pending.args
    assert moved.pending.run_version == moved.version != before.version  # type: ignore
    done = Engine(two, store, clerk).reply(run_id, "yes")
    assert done.status == "done" and [e["order_id"] for e in ledger.entries()] == ["A-1001"]


def test_a_run_waiting_for_its_customer_moves_only_to_a_state_that_asks_them() -> None:
    ledger, store = Ledger(), MemoryStore()
    one = build(ledger)
    run_id = waiting_to_confirm(ledger, store, one)
    two = build(ledger, version="2", earlier=(one,),
                instructions={"talking": "Ask which order; fetch it; propose its cancellation."})
    plan = plan_migration(store, two, runs=[run_id], to="2", by="ops",
                          state_map={"confirming": "cancelling"})
    assert not plan.ok
    assert any("waits for the customer, but 'cancelling' in version 2 is a model state" in p
               for p in plan.all_problems()), plan.lines()
    assert store.load_run(run_id).definition_hash == one.definition_hash
