"""Workflow code, policies and models that misbehave after a write has run.

A tool's exception that cannot be shown, a result that cannot be written, an ``emits``
that returns what it never declared, a lone surrogate from a model or a file name, a
NUL in an error, a usage that is not one, one engine driving a run from two threads:
each ends or refuses the step with one clear reason, the write runs once, and the run
reads back and audits clean, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fsm import (
    Action,
    ApprovalRefused,
    Budgets,
    Engine,
    Guard,
    PolicyUnavailable,
    RunLocked,
    ToolSpec,
    Usage,
    define_workflow,
)
from fsm.auditor.audit import audit
from fsm.store.base import Store


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Query(BaseModel):
    q: str


class Unshowable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot describe myself")


class Opaque:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


def paying(fn: Any, **options: Any) -> Any:
    """A one-write workflow: ``pay`` (retry-safe), then ``finish``."""
    return define_workflow(
        "misbehaves", transitions={"paying": {"paid": "done", "finish": "done"}},
        terminal={"done"}, tools_by_state={"paying": ["pay"]}, initial="paying",
        tools=[ToolSpec("pay", fn, "Pay.", NoArgs, write=True, retry_safe=True, **options)],
    )


def pay_then_finish(view: Any) -> Action:
    if any(m.get("role") == "tool" and m.get("tool") == "pay" for m in view.messages):
        return Action(tool="advance", args={"event": "finish"})
    return Action(tool="pay", args={})


def settled(store: Store, run_id: str, calls: list[str]) -> Any:
    """The run as a new reader sees it, after the write ran exactly once and was recorded."""
    assert calls == [f"{run_id}:1"], calls
    effect = store.effect(f"{run_id}:1")
    assert effect is not None and effect.status == "DONE", effect
    report = audit(store, run_id)
    assert report.ok, report.problems
    return store.load_run(run_id)


def paid_once(store: Store, run_id: str, outcome: Any, status: str = "done") -> dict[str, Any]:
    """Drive a run whose write raises ``outcome`` (an exception) or returns it, check
    that the write ran once and was recorded and the run stopped as ``status``, and give
    the tool message the model read."""
    calls: list[str] = []

    def pay(args: Any, ctx: Any) -> Any:
        calls.append(ctx.key)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    run = Engine(paying(pay), store, pay_then_finish).start("go", run_id=run_id)
    assert run.status == status, run.reason
    settled(store, run_id, calls)
    return next(m for m in store.messages(run_id) if m["role"] == "tool" and m["tool"] == "pay")


def test_a_write_whose_error_cannot_be_shown_or_stored_is_recorded(any_store: Store) -> None:
    """An exception whose ``str()`` raises, or whose message holds a NUL (no PostgreSQL
    text column takes one) or a lone surrogate: the model reads the error, once."""
    for case, exc, said in [
            ("unshowable", Unshowable(),
             "Unshowable: <Unshowable that cannot be shown: RuntimeError>"),
            ("nul", RuntimeError("card\x00declined"), "RuntimeError: card\\x00declined"),
            ("surrogate", ValueError("a\ud800b"), "ValueError: a\\ud800b")]:
        assert paid_once(any_store, case, exc) == {"role": "tool", "tool": "pay", "error": said}
        assert any_store.effect(f"{case}:1").error == said  # type: ignore[union-attr]


def test_a_write_whose_result_cannot_be_recorded_is_handed_over_not_retried(
        any_store: Store) -> None:
    """A write that returned an object whose ``__repr__`` raises, or a file name that
    ``os.fsdecode`` made with a lone surrogate, did happen: its effect row says done and a
    person takes over, so the model cannot pay again under a new key."""
    for case, result in {"opaque": {"receipt": Opaque()},
                         "surrogate": {"file": os.fsdecode(b"receipt-\xff.pdf")}}.items():
        said = paid_once(any_store, case, result, status="handed_over")
        assert said["error"].startswith("the result of pay cannot be recorded: "), said
        assert "result" not in said
        assert any_store.load_run(case).reason == f"pay ran ({case}:1), but {said['error']}"


@pytest.mark.parametrize("returned", [200, "refunded", ["paid"]], ids=["int", "other", "list"])
def test_an_event_emits_does_not_declare_fails_the_run_after_the_write(
        any_store: Store, returned: Any) -> None:
    """Only the events a tool declares can be fired by it: the tables, the diagrams and
    the verifier say which tool fires what, and a run does not do otherwise."""
    calls: list[str] = []

    def pay(args: Any, ctx: Any) -> Any:
        calls.append(ctx.key)
        return {"status": 200}

    spec = paying(pay, emits=lambda result: returned, emits_events=("paid",))
    run = Engine(spec, any_store, pay_then_finish).start("go", run_id="e1")
    assert run.status == "failed"
    assert run.reason == (f"pay: emits returned {str(returned)!r}, not one of its "
                          "emits_events (paid)")
    assert run.state == "paying"
    assert settled(any_store, "e1", calls).status == "failed"


def test_a_lone_surrogate_from_the_model_is_an_observation_and_its_cost_counts(
        any_store: Store) -> None:
    """Model output holding a lone surrogate (``json.loads('"\\\\ud800"')`` makes one)
    is refused like any unusable output: the step commits, so its cost counts."""
    billed = []

    def model(view: Any) -> Action:
        billed.append(400)
        if len(billed) > 3:
            return Action(tool="advance", args={"event": "finish"},
                          usage=Usage(cost_micros=400))
        bad = [{"tool": "pay", "args": {"q": "\ud800"}}, {"tool": "pa\ud800y", "args": {}},
               {"final": "done \udcff"}][len(billed) - 1]
        return Action(**bad, usage=Usage(cost_micros=400))

    spec = define_workflow(
        "surrogates", transitions={"looking": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"looking": ["pay"]}, initial="looking",
        tools=[ToolSpec("pay", lambda a, c: {"ok": True}, "Look.", Query)])
    run = Engine(spec, any_store, model, budgets=Budgets(max_cost_micros=10_000)).start(
        "go", run_id="s1")
    assert run.status == "done" and run.used.cost_micros == 1600 == sum(billed)
    refusals = [e.reason for e in any_store.events("s1") if e.kind == "refusal"]
    assert len(refusals) == 3 and all("surrogates not allowed" in (r or "") for r in refusals)
    assert audit(any_store, "s1").ok


def test_a_usage_that_is_not_one_fails_the_run_and_a_negative_one_is_clamped(
        any_store: Store) -> None:
    def unavailable(usage: Any) -> Any:
        def policy(view: Any) -> Action:
            raise PolicyUnavailable("down", usage=usage)
        return policy

    spec = paying(lambda a, c: {})
    negative = Usage.model_construct(input_tokens=0, output_tokens=0, cost_micros=-10**9,
                                     calls=1, reported=True, clamped=False)
    run = Engine(spec, any_store, unavailable(negative),
                 budgets=Budgets(max_cost_micros=1000)).start("go", run_id="u1")
    assert run.status == "model_unavailable" and run.used.cost_micros == 0
    run = Engine(spec, any_store, unavailable("lots")).start("go", run_id="u2")
    assert run.status == "failed"
    assert run.reason is not None and run.reason.startswith(
        "policy raised PolicyUnavailable with a usage that is not one: ")
    for run_id in ("u1", "u2"):
        assert audit(any_store, run_id).ok


def test_a_budget_limit_must_be_one_a_snapshot_can_hold() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 9223372036854775807"):
        Budgets(max_steps=10**5000)
    assert Budgets(max_steps=2**63 - 1).max_steps == 2**63 - 1


def test_one_engine_drives_a_run_from_one_thread_at_a_time(any_store: Store) -> None:
    """Two threads resuming one run with one engine (one lease owner, which the store
    lets acquire again): the second is refused, and the write runs once."""
    calls: list[str] = []
    started, release = threading.Event(), threading.Event()

    def pay(args: Any, ctx: Any) -> Any:
        calls.append(ctx.key)
        started.set()
        assert release.wait(30)  # the first thread is inside the write until released
        return {"ok": True}

    engine = Engine(paying(pay), any_store, pay_then_finish)
    engine.start("go", run_id="t1", drive=False)
    out: dict[str, Any] = {}

    def drive(name: str) -> None:
        try:
            out[name] = engine.resume("t1").status
        except RunLocked as exc:
            out[name] = exc

    first = threading.Thread(target=drive, args=("first",))
    first.start()
    assert started.wait(30)
    drive("second")
    release.set()
    first.join()
    assert out["first"] == "done"
    assert "is being driven by another thread of this process" in str(out["second"])
    assert settled(any_store, "t1", calls).status == "done"
    assert engine.resume("t1").status == "done"  # the lease was let go


def test_a_lease_whose_heartbeat_cannot_start_is_given_back(
        any_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """No thread for the heartbeat (a process at its limit): the resume fails, and the
    run is not left held by this process or in the store."""
    import fsm.runtime.leases as leases

    engine = Engine(paying(lambda a, c: {"ok": True}), any_store, pay_then_finish)
    engine.start("go", run_id="h1", drive=False)
    real = leases.Heartbeats.hold

    def no_thread(*args: Any) -> int:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(leases.Heartbeats, "hold", no_thread)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        engine.resume("h1")
    assert any_store.lease("h1") is None
    monkeypatch.setattr(leases.Heartbeats, "hold", real)
    assert engine.resume("h1").status == "done"


class Ask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount_cents: int = Field(gt=0)


def test_an_amended_record_of_a_waiting_state_is_held_to_its_payload_model(
        any_store: Store) -> None:
    spec = define_workflow(
        "amend-state", transitions={"deciding": {"ask": "approving"},
                                    "approving": {"approved": "done", "declined": "done"}},
        tools_by_state={"deciding": []}, initial="deciding", terminal={"done"},
        human_events={"approved", "declined"}, payloads={"ask": Ask}, records={"ask": "asked"},
        amend=lambda tool, args, changes: {**args, **changes})

    def policy(view: Any) -> Action:
        return Action(tool="advance", args={"event": "ask", "amount_cents": 500})

    engine = Engine(spec, any_store, policy)
    engine.start("go", run_id="a1", user="sam")
    for bad in ({"amount_cents": "lots"}, {"note": 1}, {"amount_cents": float("nan")},
                {"amount_cents": 10**5000}):
        with pytest.raises(ApprovalRefused, match="cannot approve with"):
            engine.decide("a1", True, reviewer="priya", amend=bad)
    assert any_store.load_run("a1").status == "awaiting_approval"  # nothing decided
    run = engine.decide("a1", True, reviewer="priya", amend={"amount_cents": 300})
    assert run.status == "done" and run.facts["asked"] == {"amount_cents": 300}
    assert audit(any_store, "a1").ok


def test_workflow_code_reads_the_facts_and_cannot_write_them(any_store: Store) -> None:
    """A tool, a check, an approval rule and a guard get the facts read-only: writing
    into them is an error of that code, and the run's facts change only through
    ``remember`` and records."""
    def look(args: Any, ctx: Any) -> Any:
        ctx.facts["set_by_tool"] = True
        return {"ok": True}

    def check(args: Any, facts: Any) -> None:
        facts["set_by_check"] = True

    def guard(facts: Any, payload: Any) -> bool:
        facts.update(set_by_guard=True)
        return True

    spec = define_workflow(
        "read-only", transitions={"looking": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"looking": ["look", "peek"]}, initial="looking",
        guards={"finish": Guard("always", guard)},
        tools=[ToolSpec("look", look, "Look.", NoArgs),
               ToolSpec("peek", lambda a, c: {}, "Peek.", NoArgs, check=check)])
    def drive(run_id: str, *actions: Action) -> Any:
        script = iter(actions)
        return Engine(spec, any_store, lambda view: next(script)).start("go", run_id=run_id)

    # The tool's error is an answer the model reads; the check's is a bug: the run fails.
    run = drive("f1", Action(tool="look", args={}), Action(tool="peek", args={}))
    assert run.facts == {} and any_store.load_run("f1").facts == {}
    said = [m.get("error", "") for m in any_store.messages("f1") if m["role"] == "tool"]
    assert said[0].startswith("TypeError: 'mappingproxy' object does not support item")
    assert run.status == "failed" and run.reason.startswith(
        "the check of 'peek' raised TypeError: 'mappingproxy' object does not support item")
    run = drive("f2", Action(tool="advance", args={"event": "finish"}))
    assert run.status == "failed" and run.facts == {}
    assert "its guard (always) raised AttributeError: 'mappingproxy' object has no " \
        "attribute" in run.reason
    assert audit(any_store, "f2").ok
    assert audit(any_store, "f1").ok
