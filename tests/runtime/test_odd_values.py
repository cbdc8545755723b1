"""Values that are not plain JSON are recorded as the store reads them back.

A tool may return a dict with integer keys, a tuple, a datetime, NaN; a policy may fail
with a NUL in its message; an operator may ask for an infinite budget. On SQLite and on
PostgreSQL the run goes on, the transcript the engine holds is the one a new process
reads, and the audit finds the log intact.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from fsm import Action, Budgets, Engine, RunError, ToolSpec, define_workflow
from fsm.auditor.audit import audit
from fsm.store import SQLiteStore
from fsm.store.base import Store

ODD_RESULTS = {
    "int keys": {9: "nine", 10: "ten", 2: "two"},
    "float keys": {2.0: "a", 10.0: "b"},
    "tuple, datetime, set, NaN, a huge int": {
        "pair": (1, 2), "when": dt.datetime(2026, 12, 1, 9, 30), "tags": {3},
        "ratio": float("nan"), "big": 2**80, "nul": "a\x00b"},
    "a bare NaN": float("nan"),
}


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def workflow(result: Any, *, write: bool = False) -> Any:
    return define_workflow(
        "odd", transitions={"looking": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"looking": ["look"]}, initial="looking",
        tools=[ToolSpec("look", lambda args, ctx: result, "Look.", NoArgs, write=write,
                        retry_safe=True)],
    )


def look_then_finish(view: Any) -> Action:
    if not any(m.get("role") == "tool" and m.get("tool") == "look" for m in view.messages):
        return Action(tool="look", args={})
    return Action(tool="advance", args={"event": "finish"})


@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
@pytest.mark.parametrize("case", list(ODD_RESULTS))
def test_an_odd_tool_result_is_kept_as_it_reads_back_and_audits_clean(
        any_store: Store, case: str, write: bool) -> None:
    engine = Engine(workflow(ODD_RESULTS[case], write=write), any_store, look_then_finish)
    run = engine.start("go", run_id="r1")
    assert run.status == "done"
    report = audit(any_store, "r1")
    assert report.ok, report.problems
    held = engine._transcripts.of("r1")
    assert held == any_store.messages("r1")  # what a resumed process would read
    result = next(m["result"] for m in held if m.get("role") == "tool" and m["tool"] == "look")
    if case == "int keys":
        assert result == {"2": "two", "9": "nine", "10": "ten"}
    if write:
        effect = any_store.effect("r1:1")
        assert effect is not None and effect.result == result


def test_a_policy_error_with_a_nul_is_recorded(any_store: Store) -> None:
    def broken(view: Any) -> Action:
        raise RuntimeError("bad\x00byte")

    run = Engine(workflow({}), any_store, broken).start("go", run_id="r1")
    assert run.status == "failed" and "bad" in (run.reason or "")
    stop = [e for e in any_store.events("r1") if e.kind == "stop"][-1]
    assert stop.reason == "policy raised RuntimeError: bad\\x00byte"
    assert audit(any_store, "r1").ok


def test_a_refused_tool_name_with_a_nul_is_recorded(any_store: Store) -> None:
    def odd_name(view: Any) -> Action:
        if len(view.messages) < 3:
            return Action(tool="lo\x00ok", args={})
        return Action(tool="advance", args={"event": "finish"})

    run = Engine(workflow({}), any_store, odd_name).start("go", run_id="r1")
    assert run.status == "done"
    refusal = next(e for e in any_store.events("r1") if e.kind == "refusal")
    assert refusal.tool == "lo\\x00ok"
    assert audit(any_store, "r1").ok


def test_an_infinite_or_nan_time_budget_is_refused(any_store: Store) -> None:
    for bad in (math.inf, math.nan):
        with pytest.raises(ValidationError, match="finite"):
            Budgets(max_active_seconds=bad)
    engine = Engine(workflow({}), any_store, look_then_finish, budgets=Budgets(max_steps=1))
    assert engine.start("go", run_id="r1").status == "budget_exhausted"
    with pytest.raises(RunError, match="finite"):
        engine.raise_budgets("r1", {"max_active_seconds": math.inf}, by="ops")
    assert engine.raise_budgets("r1", {"max_steps": 5}, by="ops").status == "running"
    assert engine.resume("r1").status == "done" and audit(any_store, "r1").ok


class Receipt(BaseModel):
    paid: tuple[int, int]
    when: dt.datetime


def test_the_workflows_hooks_get_the_result_as_recorded(tmp_path: Path) -> None:
    """``remember`` and ``emits`` get the result in its JSON form: the value a replay of
    the call reads from its effect row after a crash, so a hook cannot work in the
    process that ran the tool and fail in the one that resumes."""
    seen: list[Any] = []
    receipt = Receipt(paid=(1, 2), when=dt.datetime(2026, 12, 1, 9, 30))

    def remember(args: Any, result: Any, facts: Any) -> dict[str, Any]:
        seen.append(result)
        return {"receipt": result}

    def emits(result: Any) -> str:
        seen.append(result)
        return "finish"

    spec = define_workflow(
        "hooks", transitions={"looking": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"looking": ["pay"]}, initial="looking",
        tools=[ToolSpec("pay", lambda args, ctx: receipt, "Pay.", NoArgs, write=True,
                        retry_safe=True, remember=remember, emits=emits,
                        emits_events=("finish",))],
    )
    with SQLiteStore(str(tmp_path / "hooks.db")) as store:
        run = Engine(spec, store, lambda view: Action(tool="pay", args={})).start("go",
                                                                                run_id="r1")
        assert run.status == "done", run.reason
        effect = store.effect("r1:1")
        assert effect is not None and effect.status == "DONE"
        recorded = {"paid": [1, 2], "when": "2026-12-01T09:30:00"}
        assert effect.result == recorded
        assert seen == [recorded, recorded]
        assert store.load_run("r1").facts["receipt"] == recorded


@pytest.mark.parametrize("facts", [
    {"m": {1: "a", "1": "b"}},  # keys that are one key once written as JSON
    {"ratio": float("nan"), "big": 2**80, "when": dt.date(2026, 12, 1)},
], ids=["colliding keys", "nan, huge int, date"])
def test_odd_facts_audit_clean(any_store: Store, facts: dict[str, Any]) -> None:
    """The audit hashes the snapshot as stored, so facts whose JSON reads back as other
    values (keys that collide, NaN written as null) still audit clean."""
    spec = define_workflow(
        "odd-facts", transitions={"looking": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"looking": ["look"]}, initial="looking",
        tools=[ToolSpec("look", lambda args, ctx: {"ok": True}, "Look.", NoArgs,
                        remember=lambda args, result, known: facts)],
    )
    run = Engine(spec, any_store, look_then_finish).start("go", run_id="f1")
    assert run.status == "done"
    report = audit(any_store, "f1")
    assert report.ok, report.problems


def test_a_clock_that_is_not_finite_saves_nothing(tmp_path: Path) -> None:
    spec = workflow({"ok": True})
    with SQLiteStore(str(tmp_path / "clock.db")) as store:
        engine = Engine(spec, store, look_then_finish, clock=lambda: float("inf"))
        with pytest.raises(ValueError, match="clock returned inf, not a finite time"):
            engine.start("go", run_id="r1")
        assert store.list_runs() == []


#: More digits than Python's JSON reader takes (``sys.get_int_max_str_digits()``).
HUGE = 10**5000


@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
def test_a_result_too_big_to_record_reaches_the_model_as_an_error(
        any_store: Store, write: bool) -> None:
    """A result no store can write and read back (an integer of 5,001 digits, a value
    that contains itself) is an error the model reads, and the run goes on; a new process
    reads it. A write's result is no error, though: the write happened, so its effect row
    says it is done and a person takes over, and the model is never asked again."""
    loop: dict[str, Any] = {"n": 1}
    loop["self"] = loop
    for case, result in {"huge": {"n": HUGE}, "circular": loop}.items():
        engine = Engine(workflow(result, write=write), any_store, look_then_finish)
        run = engine.start("go", run_id=case)
        said = next(m for m in any_store.messages(case) if m.get("role") == "tool"
                    and m["tool"] == "look")
        assert said["error"].startswith("the result of look cannot be recorded: "), said
        assert "result" not in said
        if write:
            assert run.status == "handed_over"
            assert run.reason == f"look ran ({case}:1), but {said['error']}"
            effect = any_store.effect(f"{case}:1")
            assert effect is not None and effect.status == "DONE"
            assert effect.result is None and effect.error == said["error"]
            assert run.used.steps == 1  # the model was not asked again
        else:
            assert run.status == "done", run.reason
        report = audit(any_store, case)
        assert report.ok, report.problems


def test_facts_too_big_to_store_fail_the_run_and_keep_it_readable(any_store: Store) -> None:
    """A ``remember`` hook that returns facts a snapshot cannot hold and read back stops
    the run as failed with one line; the run as committed still loads and audits."""
    spec = define_workflow(
        "huge-facts", transitions={"looking": {"finish": "done"}}, terminal={"done"},
        tools_by_state={"looking": ["look"]}, initial="looking",
        tools=[ToolSpec("look", lambda args, ctx: {"ok": True}, "Look.", NoArgs,
                        remember=lambda args, result, known: {"n": HUGE})],
    )
    run = Engine(spec, any_store, look_then_finish).start("go", run_id="h1")
    assert run.status == "failed"
    assert run.reason is not None and run.reason.startswith(
        "look: its remember hook returned facts that cannot be stored: "), run.reason
    assert "4300" in run.reason
    loaded = any_store.load_run("h1")
    assert loaded.status == "failed" and "n" not in loaded.facts
    report = audit(any_store, "h1")
    assert report.ok, report.problems
