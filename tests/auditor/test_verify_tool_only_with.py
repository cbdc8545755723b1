"""``ToolOnlyWith(tool, fact)``: a tool runs only where the last guarded move established
the fact; a later guard that does not establish it is a new decision that drops it."""

from __future__ import annotations

from typing import Any

from fsm import Guard, ToolSpec, define_workflow
from fsm.auditor.verify import ToolOnlyWith, verify


def _spec(decide_pay: str = "paying") -> Any:
    tools = [ToolSpec("pay", lambda a, c: "ok", write=True, emits=lambda r: "done",
                      emits_events=("done",))]
    return define_workflow(
        "toy", initial="open", tools=tools,
        transitions={"open": {"eligible": "paying", "other": decide_pay, "finish": "end"},
                     "paying": {"done": "open"}},
        tools_by_state={"paying": ["pay"]},
        guards={"eligible": Guard("checked", lambda f, p: True, establishes=("ok_to_pay",)),
                "other": Guard("something else", lambda f, p: True)},
        terminal={"end"}, invariants=(ToolOnlyWith("pay", "ok_to_pay"),))


def test_proved_when_only_the_establishing_guard_leads_to_the_tool() -> None:
    report = verify(_spec(decide_pay="open"))
    assert report.ok, report.text()
    assert report.verdicts[0].invariant.title == \
        "`pay` runs only after a guard established `ok_to_pay`"


def test_a_path_through_another_guard_breaks_it() -> None:
    [verdict] = verify(_spec()).verdicts
    assert not verdict.proved
    assert verdict.why == "`pay` runs, and no guard established `ok_to_pay` before"
    assert [mv.event or mv.tool for mv in verdict.counterexample] == ["other", "pay"]


def test_a_later_guard_that_does_not_establish_the_fact_drops_it() -> None:
    tools = [ToolSpec("pay", lambda a, c: "ok", write=True, emits=lambda r: "done",
                      emits_events=("done",))]
    spec = define_workflow(
        "toy", initial="open", tools=tools,
        transitions={"open": {"eligible": "paying", "finish": "end"},
                     "paying": {"done": "open", "amend": "paying"}},
        tools_by_state={"paying": ["pay"]},
        guards={"eligible": Guard("checked", lambda f, p: True, establishes=("ok_to_pay",)),
                "amend": Guard("a new amount", lambda f, p: True)},
        terminal={"end"}, invariants=(ToolOnlyWith("pay", "ok_to_pay"),))
    [verdict] = verify(spec).verdicts
    assert not verdict.proved
    assert [mv.event or mv.tool for mv in verdict.counterexample] == ["eligible", "amend", "pay"]
