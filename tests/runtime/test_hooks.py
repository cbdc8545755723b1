"""Engine hooks and the public step iterator: what each hook sees, what a raising hook
does to a run (nothing), and driving a run one commit at a time."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

import pytest

from fsm import Engine, Hooks, MemoryStore, Outcome, RunLocked, StopDriving, WorkflowSpec
from fsm.errors import UsageError
from fsm.observability.faults import FaultPoints, fault
from fsm.observability.hooks import (
    CommitInfo,
    DriveInfo,
    PauseInfo,
    PolicyCallInfo,
    PolicyResultInfo,
    SimulatedCrash,
    StopInfo,
    ToolCallInfo,
    ToolResultInfo,
    in_scope,
    install,
    installed,
    scope,
    uninstall,
)
from fsm.records import verify_chain
from fsm.testing.faults import FaultInjector, from_environ
from workflows.refund import Shop, clerk

SMALL = "Order A-1001: the kettle arrived broken, please refund it"
LARGE = "Order A-1002: my headphones stopped working, I want my money back"


class Recorder(Hooks):
    """Every view, in order, as (point, view)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def before_drive(self, drive: DriveInfo) -> None:
        self.seen.append(("before_drive", drive))

    def after_drive(self, drive: DriveInfo) -> None:
        self.seen.append(("after_drive", drive))

    def before_policy(self, call: PolicyCallInfo) -> None:
        self.seen.append(("before_policy", call))

    def after_policy(self, result: PolicyResultInfo) -> None:
        self.seen.append(("after_policy", result))

    def before_tool(self, call: ToolCallInfo) -> None:
        self.seen.append(("before_tool", call))

    def after_tool(self, result: ToolResultInfo) -> None:
        self.seen.append(("after_tool", result))

    def before_commit(self, commit: CommitInfo) -> None:
        self.seen.append(("before_commit", commit))

    def after_commit(self, commit: CommitInfo) -> None:
        self.seen.append(("after_commit", commit))

    def on_pause(self, pause: PauseInfo) -> None:
        self.seen.append(("on_pause", pause))

    def on_stop(self, stop: StopInfo) -> None:
        self.seen.append(("on_stop", stop))

    def points(self, name: str) -> list[Any]:
        return [v for p, v in self.seen if p == name]


def _paid(shop: Shop) -> list[tuple[str, int]]:
    return [(r["order_id"], r["amount_paise"]) for r in shop.ledger()]


def test_every_hook_sees_a_frozen_view_of_a_paused_decided_and_paid_run(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    rec = Recorder()
    engine = Engine(spec, store, clerk, hooks=[rec])
    run = engine.start(LARGE, user="ravi", run_id="r")
    assert run.status == "awaiting_approval"
    [pause] = rec.points("on_pause")
    assert (pause.run_id, pause.status, pause.state) == ("r", "awaiting_approval",
                                                         "awaiting_approval")
    assert pause.approval_id == run.pending.approval_id  # type: ignore[union-attr]
    run = engine.decide("r", True, reviewer="supervisor", note="ok")
    assert run.status == "done" and _paid(shop) == [("A-1002", run.facts["decision"]
                                                     ["amount_paise"])]

    # One policy call per step the run counts, each with its tokens and its outcome.
    calls, results = rec.points("before_policy"), rec.points("after_policy")
    assert len(calls) == len(results) == store.load_run("r").used.steps
    assert all(c.policy == "workflows.refund.clerk.clerk" for c in calls)
    assert [r.outcome for r in results] == ["action"] * len(results)
    assert [c.step for c in calls] == [r.step for r in results]
    # Each tool call, with its call id (a write's key) and its arguments' hash.
    tools = rec.points("before_tool")
    assert [t.tool for t in tools] == ["get_order", "get_policy", "refund_item",
                                       "send_reply"]
    refund = next(t for t in tools if t.tool == "refund_item")
    assert refund.write and refund.claimed and refund.call_id.startswith("r:")
    assert store.effect(refund.call_id) is not None
    assert len(refund.args_hash) == 64
    assert [r.error for r in rec.points("after_tool")] == [None] * 4
    # Every commit, before and after, with the events it logged and the versions.
    before, after = rec.points("before_commit"), rec.points("after_commit")
    assert len(before) == len(after)
    assert [a.run_version for a in after] == sorted(a.run_version for a in after)
    assert after[-1].run_version == store.load_run("r").version
    logged = [e.kind for a in after for e in a.events]
    assert logged == [e.kind for e in store.events("r") if e.kind != "claim"]
    assert any(e.kind == "decision" for a in after for e in a.events)
    [stop] = rec.points("on_stop")
    assert (stop.status, stop.state) == ("done", "done")
    # Two driven segments: the start's and the decision's.
    assert [(d.kind, d.status) for d in rec.points("after_drive")] == [
        ("resume", "awaiting_approval"), ("decide", "done")]
    assert all(v.definition_hash == spec.definition_hash for _, v in rec.seen)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stop.status = "failed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        after[-1].events[-1].detail["rows"] = {}  # type: ignore[index]


class Raising(Hooks):
    def before_commit(self, commit: CommitInfo) -> None:
        raise RuntimeError("the hook's own bug")

    def after_tool(self, result: ToolResultInfo) -> None:
        raise ValueError("another")


def test_a_raising_hook_is_logged_and_the_run_keeps_its_guarantees(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="fsm.observability.hooks"):
        run = Engine(spec, store, clerk, hooks=[Raising()]).start(SMALL, user="asha",
                                                                  run_id="r")
    assert (run.status, _paid(shop)) == ("done", [("A-1001", 35_000)])
    assert verify_chain(store.events("r")) is None
    lines = [r.getMessage() for r in caplog.records]
    assert any("Raising failed in before_commit (run r)" in line for line in lines)
    assert any("Raising failed in after_tool" in line for line in lines)


class StopAfter(Hooks):
    def __init__(self, commits: int) -> None:
        self.left = commits

    def after_commit(self, commit: CommitInfo) -> None:
        self.left -= 1
        if self.left == 0:
            raise StopDriving(f"stop {commit.run_id}", run_id=commit.run_id)


def test_stop_driving_from_after_commit_stops_after_that_commit(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    engine = Engine(spec, store, clerk, hooks=[StopAfter(3)])  # create, then two steps
    with pytest.raises(StopDriving):
        engine.start(SMALL, user="asha", run_id="r")
    run = store.load_run("r")
    assert (run.status, run.step) == ("running", 2)
    assert store.lease("r") is None  # given back
    assert Engine(spec, store, clerk).resume("r").status == "done"
    assert _paid(shop) == [("A-1001", 35_000)]


class CrashAfterTool(Hooks):
    def after_tool(self, result: ToolResultInfo) -> None:
        if result.tool == "refund_item":
            raise SimulatedCrash


def test_a_simulated_crash_from_a_hook_rolls_the_step_back_and_resume_pays_once(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    engine = Engine(spec, store, clerk, hooks=[CrashAfterTool()])
    with pytest.raises(SimulatedCrash):
        engine.start(SMALL, user="asha", run_id="r")
    assert _paid(shop) == [("A-1001", 35_000)]  # the tool ran; its step did not commit
    assert not any(e.kind == "tool" and e.tool == "refund_item" for e in store.events("r"))
    run = Engine(spec, store, clerk).resume("r")
    assert run.status == "done"
    assert _paid(shop) == [("A-1001", 35_000)]  # replayed under its key, not paid again


def test_steps_yields_after_each_commit_and_step_drives_one(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    engine = Engine(spec, store, clerk)
    engine.start(SMALL, user="asha", run_id="r", drive=False)
    one = engine.step("r")
    assert isinstance(one, Outcome)
    assert (one.step, one.status, one.version) == (1, "running", store.load_run("r").version)
    assert store.lease("r") is None  # let go after the step
    outcomes = []
    for outcome in engine.steps("r"):
        outcomes.append(outcome)
        assert store.load_run("r").version == outcome.version  # committed already
        with pytest.raises(RunLocked):
            Engine(spec, store, clerk).resume("r")  # held while iterating
    assert [o.step for o in outcomes] == list(range(2, 2 + len(outcomes)))
    assert (outcomes[-1].status, outcomes[-1].state) == ("done", "done")
    assert engine.step("r") is None  # nothing left to drive
    assert list(engine.steps("r")) == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcomes[0].status = "x"  # type: ignore[misc]


def test_breaking_out_of_steps_leaves_the_run_to_be_resumed(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    engine = Engine(spec, store, clerk)
    engine.start(SMALL, user="asha", run_id="r", drive=False)
    for outcome in engine.steps("r"):
        if outcome.step == 2:
            break
    assert store.lease("r") is None
    assert store.load_run("r").step == 2
    assert Engine(spec, store, clerk).resume("r").status == "done"


def test_scoped_hooks_join_the_engines_made_inside_the_scope_and_no_others(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    rec = Recorder()
    before = Engine(spec, store, clerk)
    with scope(rec) as scoped:
        assert scoped == (rec,) == in_scope()
        inside = Engine(spec, store, clerk, hooks=[rec])  # given twice: called once
        elsewhere: list[tuple[Any, ...]] = []
        thread = threading.Thread(target=lambda: elsewhere.append(in_scope()))
        thread.start()
        thread.join()
    after = Engine(spec, store, clerk)
    assert elsewhere == [()] and in_scope() == ()  # another thread's scope is its own
    before.start(SMALL, user="asha", run_id="a")
    after.start(SMALL, user="asha", run_id="c")
    assert rec.seen == []
    inside.start(SMALL, user="asha", run_id="b")
    assert {v.run_id for _, v in rec.seen} == {"b"}
    assert len({(p, id(v)) for p, v in rec.seen}) == len(rec.seen)  # each view seen once


def test_the_old_spellings_warn_and_still_work(
        shop: Shop, spec: WorkflowSpec, store: MemoryStore) -> None:
    rec, added = Recorder(), Recorder()
    before = Engine(spec, store, clerk)
    with pytest.warns(DeprecationWarning, match=r"hooks.install is deprecated.*scope"):
        install(rec)
    try:
        with pytest.warns(DeprecationWarning, match="hooks.installed is deprecated"):
            assert installed() == (rec,)
        after = Engine(spec, store, clerk)
    finally:
        with pytest.warns(DeprecationWarning, match="hooks.uninstall is deprecated"):
            uninstall(rec)
    assert in_scope() == ()
    with pytest.warns(DeprecationWarning, match=r"Engine.add_hook is deprecated.*hooks=\[hook\]"):
        before.add_hook(added)
    before.start(SMALL, user="asha", run_id="a")
    after.start(SMALL, user="asha", run_id="b")
    assert {v.run_id for _, v in rec.seen} == {"b"}
    assert {v.run_id for _, v in added.seen} == {"a"}
    from fsm.testing import faults

    injector = faults.FaultInjector("after_commit@999")
    with scope():  # the deprecated call changes this block's scope only
        with pytest.warns(DeprecationWarning,
                          match=r"fsm\.testing\.faults\.install is deprecated"):
            faults.install(injector)
        assert in_scope() == (injector,)
        with pytest.warns(DeprecationWarning):
            faults.install(None)
        assert in_scope() == ()
    assert in_scope() == ()


def test_a_hooks_object_is_checked_and_fault_specs_are_parsed() -> None:
    with pytest.raises(TypeError, match="subclass fsm.Hooks"):
        with scope(object()):  # type: ignore[arg-type]
            pass
    assert from_environ({}) is None and from_environ({"FSM_FAULT": " "}) is None
    injector = from_environ({"FSM_FAULT": "after_commit@3,before_policy@*:stop"})
    assert injector is not None
    assert injector.points == [("after_commit", "3", ""), ("before_policy", "*", "stop")]
    injector.point("after_commit", 2)  # not named at this step: nothing happens
    with pytest.raises(UsageError, match="allowed: POINT@STEP"):
        FaultInjector("after_commit@3:freeze")


def test_a_fault_point_outside_the_engine_asks_the_fault_points_in_scope() -> None:
    class Points(FaultPoints):
        def __init__(self) -> None:
            self.seen: list[tuple[str, int]] = []

        def point(self, point: str, step: int) -> None:
            self.seen.append((point, step))

    points = Points()
    fault("sweep_locked", 0)  # nothing in scope: nothing happens
    with scope(Recorder(), points):  # a plain hook is not asked
        fault("sweep_locked", 0)
    fault("migration_locked", 0)
    assert points.seen == [("sweep_locked", 0)]
    assert isinstance(FaultInjector("after_commit@3"), FaultPoints)
