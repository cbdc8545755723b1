"""A handed-over run opens a row at the desk that says, in plain words, why the agent
stopped; a person takes it and closes it with an outcome and a note, all in the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import handover_flows
import pytest

from fsm import (
    Action,
    Effect,
    Engine,
    HandoverRefused,
    PolicyUnavailable,
    SQLiteStore,
    WorkflowDefinitionError,
    define_workflow,
)
from fsm.auditor.audit import audit
from fsm.runtime.claims import claim_event
from fsm.testing import ScriptedPolicy


def adv(event: str) -> dict[str, Any]:
    return {"tool": "advance", "args": {"event": event}}


def ship(parcel: str, last: bool = True) -> dict[str, Any]:
    return {"tool": "ship", "args": {"parcel": parcel, "last": last}}


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(str(tmp_path / "desk.db"))


def start(store: SQLiteStore, actions: list[dict[str, Any]], run_id: str = "p1",
          spec: Any = None, clock: Any = None) -> Engine:
    engine = Engine(spec or handover_flows.WORKFLOW, store, ScriptedPolicy(actions),
                    **({"clock": clock} if clock else {}))
    engine.start("Parcel 7 has not arrived", user="lena", run_id=run_id)
    return engine


@pytest.mark.parametrize(("actions", "cause", "reason"), [
    pytest.param([adv("unclear")], "model_event", "unclear", id="the-model-fired-an-event"),
    pytest.param([{"tool": "hand_to_human", "args": {"summary": "angry"}}], "transferred",
                 "transferred by the model (hand_to_human)", id="transferred"),
    pytest.param([adv("ready"), ship("bad")], "write_failed",
                 "a write failed: ship (ship_failed)", id="a-write-failed"),
    pytest.param([adv("ready"), ship("p1", last=False), ship("bad")], "partial_write",
                 "a write that failed after another succeeded: ship failed (ship_failed) "
                 "after ship succeeded", id="a-write-failed-after-another"),
])
def test_the_reason_is_read_from_the_log(store: SQLiteStore, actions: list[dict[str, Any]],
                                         cause: str, reason: str) -> None:
    start(store, actions)
    run = store.load_run("p1")
    assert run.status == "handed_over"
    (row,) = store.run_handovers("p1")
    assert (row.cause, row.reason, row.user, row.request, row.state) == (
        cause, reason, "lena", "Parcel 7 has not arrived", "with_person")
    (stop,) = [e for e in store.events("p1") if e.kind == "stop"]
    assert stop.detail["handover_id"] == row.handover_id and stop.time == row.handed_at
    (note,) = store.notifications(run_id="p1")
    assert (note.approval_id, note.kind, note.status) == (row.handover_id, "waiting", "pending")
    assert audit(store, "p1").ok, audit(store, "p1").problems


def test_a_person_s_decision_and_an_expiry_are_named(store: SQLiteStore) -> None:
    engine = start(store, [adv("escalate")])
    engine.decide("p1", False, "mara", "not this one")
    assert [(h.cause, h.reason) for h in store.run_handovers("p1")] == [
        ("person", "a person's decision: mara denied")]
    now = [1000.0]
    engine = start(store, [adv("escalate")], run_id="p2", clock=lambda: now[0])
    now[0] += 3600
    assert engine.sweep() == ["p2"]
    assert [(h.cause, h.reason) for h in store.run_handovers("p2")] == [
        ("expired", "expired: nobody decided in time")]
    assert audit(store, "p2").ok


def test_a_write_in_doubt_is_named(store: SQLiteStore) -> None:
    spec = handover_flows.build(retry_safe=False)
    calls = iter([Action(tool="advance", args={"event": "ready"})])

    def then_unavailable(view: Any) -> Action:
        for action in calls:
            return action
        raise PolicyUnavailable("the model server is down")

    Engine(spec, store, then_unavailable).start("Parcel 7", user="lena", run_id="p1")
    run = store.load_run("p1")
    assert (run.status, run.state) == ("model_unavailable", "shipping")
    # What a crash in the middle of the next step leaves: the write claimed (its claim in
    # the log, as a step commits it), never recorded.
    key = f"p1:{run.step + 1}"
    args = {"parcel": "p9", "last": True}
    store.claim_effect(Effect(key=key, run_id="p1", step=run.step + 1, tool="ship",
                              args=args, status="STARTED", started_at=1.0),
                       version=run.version,
                       claim=claim_event(run, step=run.step + 1, time=1.0, tool="ship",
                                         key=key, args=args, bound=None))
    run = Engine(spec, store, then_unavailable).resume("p1")
    assert (run.status, run.reason) == ("handed_over", f"in doubt: ship {key}")
    assert [(h.cause, h.reason) for h in store.run_handovers("p1")] == [
        ("in_doubt", f"in doubt after a write: ship {key} may or may not have happened (its "
                     "result was never recorded)")]
    assert audit(store, "p1").ok, audit(store, "p1").problems
    with pytest.raises(HandoverRefused, match="does not let a run handed over in state "
                                              "'shipping' continue"):
        Engine(spec, store, then_unavailable).close_handover("p1", "sam", "resumed", "shipped it")


def test_take_and_close_are_logged_assigned_and_refused_to_others(store: SQLiteStore) -> None:
    engine = start(store, [adv("unclear")])
    run = engine.take_handover("p1", "sam")
    (row,) = store.run_handovers("p1")
    assert (row.taken_by, run.status) == ("sam", "handed_over")
    version = run.version
    with pytest.raises(HandoverRefused, match="was taken by sam"):
        engine.take_handover("p1", "priya")
    with pytest.raises(HandoverRefused, match="only they close it"):
        engine.close_handover("p1", "priya", "resolved", "done by phone")
    with pytest.raises(HandoverRefused, match="needs a note"):
        engine.close_handover("p1", "sam", "resolved", "  ")
    with pytest.raises(HandoverRefused, match=r"unknown outcome 'fixed' \(allowed: resolved, "
                                              r"resumed, closed\)"):
        engine.close_handover("p1", "sam", "fixed", "done")
    assert store.load_run("p1").version == version  # nothing of the refusals landed
    engine.close_handover("p1", "sam", "resolved", "sent a new parcel by courier")
    (row,) = store.run_handovers("p1")
    assert (row.outcome, row.note, row.closed_by) == ("resolved", "sent a new parcel by "
                                                      "courier", "sam")
    kinds = [(e.kind, e.reviewer, e.detail.get("outcome")) for e in store.events("p1")][-2:]
    assert kinds == [("take", "sam", None), ("close", "sam", "resolved")]
    with pytest.raises(HandoverRefused, match="already closed"):
        engine.close_handover("p1", "sam", "closed", "again")
    assert store.count_handovers() == 0 and audit(store, "p1").ok


def test_a_resumed_run_continues_where_the_workflow_allows_it(store: SQLiteStore) -> None:
    handover_flows.SHIPPED.clear()
    engine = start(store, [adv("unclear"), adv("ready"), ship("p7")])
    run = engine.close_handover("p1", "sam", "resumed", "the address is 4 Elm Street")
    assert (run.status, run.state) == ("done", "done")
    assert handover_flows.SHIPPED == ["p7"]
    told = [m for m in store.messages("p1") if "resumed it" in str(m.get("content"))]
    assert told and "the address is 4 Elm Street" in told[0]["content"]
    close = [e for e in store.events("p1") if e.kind == "close"][0]
    assert close.detail["event"] == "retry"
    assert audit(store, "p1").ok, audit(store, "p1").problems


def test_a_run_handed_over_elsewhere_cannot_be_resumed(store: SQLiteStore) -> None:
    from workflows.refund import Shop, build

    with Shop(":memory:") as shop:
        engine = Engine(build(shop.seed_demo()), store, ScriptedPolicy([
            {"tool": "get_order", "args": {"order_id": "A-1003"}}, adv("details_complete"),
            {"tool": "get_policy", "args": {"order_id": "A-1003"}}, adv("cannot_verify")]))
        engine.start("Order A-1003: the lamp", user="ravi", run_id="r1")
        with pytest.raises(HandoverRefused, match="does not let a run handed over in state "
                                                  "'handed_over' continue"):
            engine.close_handover("r1", "sam", "resumed", "try again")
        assert [(h.cause, h.reason) for h in store.run_handovers("r1")] == [
            ("model_event", "cannot verify")]


def test_a_tampered_desk_row_is_caught_by_the_audit(store: SQLiteStore) -> None:
    engine = start(store, [adv("unclear")])
    engine.close_handover("p1", "sam", "resolved", "called them")
    with store.db.tx() as db:
        db.execute("UPDATE handovers SET closed_by = 'mallory', note = 'nothing'")
    problems = audit(store, "p1").problems
    assert any("outcome, note or closer differs" in p for p in problems), problems


def test_a_hand_over_state_may_only_be_left_by_a_person() -> None:
    with pytest.raises(WorkflowDefinitionError, match="hand-over state 'stuck' may only be "
                                                      "left by human-only events"):
        define_workflow("w", transitions={"a": {"go": "stuck"}, "stuck": {"again": "a"}},
                        tools_by_state={}, initial="a", handed_over_states={"stuck"})


def test_an_approved_request_that_changed_is_named(store: SQLiteStore) -> None:
    from workflows.refund import Shop, build, clerk

    with Shop(":memory:") as shop:
        spec = build(shop.seed_demo())
        Engine(spec, store, clerk).start("Order A-1002: the headphones stopped working",
                                         user="ravi", run_id="big")
        Engine(spec, store, clerk).decide("big", True, "priya", "ok",
                                          amend={"amount_paise": 120_000}, drive=False)
        with store.db.tx() as db:
            db.execute("UPDATE approvals SET approved_args = "
                       "'{\"item_id\":\"headphones-1\",\"amount_paise\":170000}'")
        assert Engine(spec, store, clerk).resume("big").status == "handed_over"
    ((cause, reason),) = [(h.cause, h.reason) for h in store.run_handovers("big")]
    assert cause == "changed" and reason.startswith("what a person approved changed before "
                                                    "it ran: the run's decision")
