"""The verifier: the refund tables are proved; each broken copy is caught with the
shortest counterexample; a counterexample is a run the engine really allows."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm import Engine, Guard, MemoryStore, ToolSpec, WorkflowSpec, define_workflow
from fsm.auditor.diagram import extract
from fsm.auditor.render import to_dot, to_markdown, to_mermaid
from fsm.auditor.verify import (
    AlwaysReaches,
    AtMostOnce,
    HumanOnly,
    InvariantError,
    NoReentryAfter,
    OnlyThrough,
    ToolOnlyAfter,
    ToolOnlyIn,
    verify,
)
from fsm.testing import ScriptedPolicy
from workflows.refund import Shop
from workflows.refund.invariants import INVARIANTS
from workflows.refund.workflow import (
    GUARDS,
    HUMAN_EVENTS,
    PAYLOADS,
    RECORDS,
    TOOLS_BY_STATE,
    TRANSITIONS,
    _Fixed,
    _tools,
    build,
)

START = [("collecting", "details_complete", None, "verifying"),
         ("verifying", "verified", None, "deciding")]
UNAPPROVED = ("`refund_item` runs, no guard established `amount_within_limit`, and no "
              "person has fired `approved`")


def refund_copy(
    shop: Shop | None = None, *, transitions: dict[str, dict[str, str]] | None = None,
    tools_by_state: dict[str, list[str]] | None = None, human: set[str] | None = None,
    tools: Callable[[list[ToolSpec]], list[ToolSpec]] = lambda ts: ts,
    expiry: str | None = "expired",
) -> WorkflowSpec:
    """A copy of the refund workflow with some of its tables replaced."""
    return define_workflow(
        "refund", transitions=transitions or TRANSITIONS,
        tools_by_state=tools_by_state or TOOLS_BY_STATE, initial="collecting",
        tools=tools(_tools(_Fixed(shop or Shop()))),
        human_events=HUMAN_EVENTS if human is None else human,
        guards=GUARDS, payloads=PAYLOADS, records=RECORDS, expiry_event=expiry,
        terminal={"done"}, handed_over_states={"handed_over"}, invariants=INVARIANTS,
    )


def steps(verdict: Any) -> list[tuple[str, str | None, str | None, str]]:
    return [(m.source, m.event, m.tool, m.target) for m in verdict.counterexample]


def test_the_refund_tables_are_proved() -> None:
    report = verify(build())
    assert [v.proved for v in report.verdicts] == [True] * len(INVARIANTS)
    assert report.ok and report.summary == "8 invariants: 8 proved, 0 violated"
    assert report.states == len(build().states)
    kinds = {type(i).__name__ for i in INVARIANTS}
    assert {"ToolOnlyIn", "OnlyThrough", "ToolOnlyAfter", "HumanOnly", "AlwaysReaches",
            "AtMostOnce"} <= kinds


def _with(change: Callable[[dict[str, Any]], None], table: Any) -> Any:
    table = copy.deepcopy(table)
    change(table)
    return table


def _large_to_refunding(t: dict[str, dict[str, str]]) -> None:
    t["deciding"]["large_refund"] = "refunding"
    t["deciding"]["review"] = "awaiting_approval"  # keeps awaiting_approval reachable


def _drop_refund_ok(ts: list[ToolSpec]) -> list[ToolSpec]:
    return [dataclasses.replace(t, emits_events=("refund_failed",))
            if t.name == "refund_item" else t for t in ts]


MUTATIONS = [
    pytest.param(
        dict(tools_by_state=_with(lambda t: t["verifying"].append("refund_item"),
                                  TOOLS_BY_STATE)),
        ToolOnlyIn, "`refund_item` runs in `verifying`",
        [START[0], ("verifying", None, "refund_item", "verifying")],
        id="refund_item-in-verifying"),
    pytest.param(
        dict(transitions=_with(lambda t: t["verifying"].update(fast_track="refunding"),
                               TRANSITIONS)),
        OnlyThrough, "`refunding` is entered and `verified` never fired",
        [START[0], ("verifying", "fast_track", None, "refunding")],
        id="refunding-without-verified"),
    pytest.param(
        dict(transitions=_with(_large_to_refunding, TRANSITIONS)),
        ToolOnlyAfter, UNAPPROVED,
        [*START, ("deciding", "large_refund", None, "refunding"),
         ("refunding", None, "refund_item", "refunding")],
        id="large_refund-straight-to-refunding"),
    pytest.param(
        dict(transitions=_with(lambda t: t["deciding"].update(refund_now="refunding"),
                               TRANSITIONS)),
        ToolOnlyAfter, UNAPPROVED,
        [*START, ("deciding", "refund_now", None, "refunding"),
         ("refunding", None, "refund_item", "refunding")],
        id="unguarded-event-from-deciding-into-refunding"),
    pytest.param(
        dict(transitions=_with(lambda t: t["verifying"].update(skip="refunding"),
                               TRANSITIONS)),
        ToolOnlyAfter, UNAPPROVED,
        [START[0], ("verifying", "skip", None, "refunding"),
         ("refunding", None, "refund_item", "refunding")],
        id="unguarded-event-from-verifying-into-refunding"),
    pytest.param(
        dict(human=set(), expiry=None),
        HumanOnly, "the model fires `approved`",
        [*START, ("deciding", "large_refund", None, "awaiting_approval"),
         ("awaiting_approval", "approved", None, "refunding")],
        id="approved-model-fireable"),
    pytest.param(
        dict(transitions={**TRANSITIONS, "deciding": {**TRANSITIONS["deciding"],
                                                      "hold": "on_hold"},
                          "on_hold": {"refund_ok": "replying"}}),
        AlwaysReaches, "from `on_hold` no path reaches `done` or `handed_over`",
        [*START, ("deciding", "hold", None, "on_hold")],
        id="state-only-a-tool-that-cannot-run-there-can-leave"),
    pytest.param(
        dict(transitions=_with(lambda t: t["refunding"].update(refund_ok="refunding"),
                               TRANSITIONS)),
        AtMostOnce, "`refund_ok` fires a second time",
        [*START, ("deciding", "small_refund", None, "refunding"),
         ("refunding", "refund_ok", "refund_item", "refunding"),
         ("refunding", "refund_ok", "refund_item", "refunding")],
        id="second-refund_ok"),
    pytest.param(
        dict(transitions=_with(lambda t: t["replying"].update(retry="refunding"),
                               TRANSITIONS)),
        NoReentryAfter, "`refunding` is entered again after `refund_ok`",
        [*START, ("deciding", "small_refund", None, "refunding"),
         ("refunding", "refund_ok", "refund_item", "replying"),
         ("replying", "retry", None, "refunding")],
        id="refunding-again-after-refund_ok"),
    pytest.param(
        dict(tools=_drop_refund_ok),
        "FiredOnlyByTools", "the model fires `refund_ok` without any tool running",
        [*START, ("deciding", "small_refund", None, "refunding"),
         ("refunding", "refund_ok", None, "replying")],
        id="refund_ok-no-longer-from-its-tool"),
]


@pytest.mark.parametrize(("change", "kind", "why", "counterexample"), MUTATIONS)
def test_a_broken_copy_is_violated_with_the_shortest_counterexample(
    change: dict[str, Any], kind: Any, why: str, counterexample: list[Any],
) -> None:
    report = verify(refund_copy(**change))
    name = kind if isinstance(kind, str) else kind.__name__
    [verdict] = [v for v in report.verdicts if type(v.invariant).__name__ == name]
    assert not verdict.proved and not report.ok
    assert verdict.why == why
    assert steps(verdict) == counterexample
    text = report.text()
    assert f"VIOLATED  {verdict.invariant.title.replace('`', '')}" in text
    assert f"shortest counterexample ({len(counterexample)} moves)" in text
    md = report.markdown()
    assert f"## {report.verdicts.index(verdict) + 1}. VIOLATED: {verdict.invariant.title}" in md


def test_each_mutation_breaks_only_what_it_should() -> None:
    """The retry edge breaks three invariants (a declined refund can be paid after all);
    refund_item in verifying also runs with nothing decided or approved."""
    def violated(**change: Any) -> set[str]:
        return {type(v.invariant).__name__ for v in verify(refund_copy(**change)).verdicts
                if not v.proved}

    assert violated(tools_by_state=_with(lambda t: t["verifying"].append("refund_item"),
                                         TOOLS_BY_STATE)) == {"ToolOnlyIn", "ToolOnlyAfter"}
    assert violated(human=set(), expiry=None) == {"HumanOnly", "ToolOnlyAfter"}
    assert violated(transitions=_with(lambda t: t["replying"].update(retry="refunding"),
                                      TRANSITIONS)) == {
        "AtMostOnce", "NoReentryAfter", "ToolOnlyAfter"}


def test_the_counterexample_is_a_run_the_engine_allows() -> None:
    """Follow the counterexample of the large_refund mutation: money moves unapproved."""
    shop = Shop().seed_demo()
    spec = refund_copy(shop, transitions=_with(_large_to_refunding, TRANSITIONS))
    [verdict] = [v for v in verify(spec).verdicts if not v.proved]
    refund = {"order_id": "A-1002", "item_id": "headphones-1", "amount_paise": 180_000}
    # The guards need what these read tools return; the verifier lets guards pass.
    readers = {"collecting": "get_order", "verifying": "get_policy"}
    script: list[dict[str, Any]] = []
    for mv in verdict.counterexample:
        if mv.source in readers:
            script.append({"tool": readers.pop(mv.source), "args": {"order_id": "A-1002"}})
        if mv.tool is not None:
            script.append({"tool": mv.tool, "args": refund})
        elif mv.event == "large_refund":
            script.append({"tool": "advance", "args": {
                "event": mv.event, "item_id": "headphones-1", "amount_paise": 180_000}})
        else:
            script.append({"tool": "advance", "args": {"event": mv.event}})
    script.append({"tool": "send_reply", "args": {"text": "Refunded."}})
    store = MemoryStore()
    run = Engine(spec, store, ScriptedPolicy(script)).start("Order A-1002", user="ravi",
                                                            run_id="x")
    assert run.status == "done"
    assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [("A-1002", 180_000)]
    kinds = [e.kind for e in store.events("x")]
    assert "refusal" not in kinds and "decision" not in kinds and "pause" not in kinds
    path = [(e.state_before, e.event) for e in store.events("x") if e.kind == "transition"]
    assert path[:3] == [(m.source, m.event) for m in verdict.counterexample[:3]]


def test_invariants_naming_unknown_things_are_refused_listing_all() -> None:
    with pytest.raises(InvariantError) as info:
        verify(build(), [ToolOnlyIn("refund_itme", "refundng"), HumanOnly("aproved"),
                         ToolOnlyAfter("refund_item", "approved", unless="within_limit"),
                         "not an invariant"])
    assert len(info.value.problems) == 5
    text = str(info.value)
    for fragment in ("unknown tool 'refund_itme'", "unknown state 'refundng'",
                     "unknown event 'aproved'", "unknown fact 'within_limit' (known facts: "
                     "amount_above_limit, amount_within_limit)",
                     "invariants[3] is a str, not an invariant"):
        assert fragment in text


# -- a generated workflow of a few hundred states ----------------------------------------

def big_workflow(n: int) -> WorkflowSpec:
    """``n`` stages with forward, skip and back edges, one approval, one paying state."""
    gate = n // 2
    transitions: dict[str, dict[str, str]] = {}
    for i in range(n):
        if i == gate:
            transitions[f"s{i}"] = {"approved": f"s{i + 1}", "declined": "handed_over"}
            continue
        row = {}
        if i > 0 and i != gate + 1 and i < n - 2:
            row["back"] = f"s{i - 1}"
        if i + 2 < n and not (i < gate < i + 2):
            row["skip"] = f"s{i + 2}"
        if i % 10 == 9:
            row["give_up"] = "handed_over"
        # "go" comes last: a depth-first search would follow it first and find a
        # longer counterexample than the breadth-first one.
        row["go"] = f"s{i + 1}" if i + 1 < n else "done"
        transitions[f"s{i}"] = row
    transitions[f"s{gate + 1}"]["back"] = f"s{gate}"  # planted: a second approval
    tools = [ToolSpec("look", lambda a, c: {}), ToolSpec(
        "pay", lambda a, c: {}, write=True, tags=frozenset({"moves_money"}),
        emits_events=("paid",))]
    transitions[f"s{n - 2}"]["paid"] = f"s{n - 1}"
    return define_workflow(
        "big", transitions=transitions, initial="s0", tools=tools,
        tools_by_state={**{f"s{i}": ["look"] for i in range(n) if i != gate},
                        f"s{n - 2}": ["look", "pay"]},
        human_events={"approved", "declined"}, terminal={"done"},
        handed_over_states={"handed_over"},
    )


def test_a_generated_workflow_of_300_states() -> None:
    n = 300
    spec = big_workflow(n)
    last = f"s{n - 2}"
    report = verify(spec, [
        ToolOnlyIn("pay", last), OnlyThrough(last, "approved"),
        ToolOnlyAfter("pay", "approved"), HumanOnly("approved", "declined"),
        AlwaysReaches("done", "handed_over"), AtMostOnce("approved"),
    ])
    assert report.states == n + 2
    assert [v.proved for v in report.verdicts] == [True] * 5 + [False]
    twice = report.verdicts[-1]
    # s0 → s150 takes 75 skips; then approved, back, approved.
    assert len(twice.counterexample) == n // 4 + 3
    assert steps(twice)[-3:] == [("s150", "approved", None, "s151"),
                                 ("s151", "back", None, "s150"),
                                 ("s150", "approved", None, "s151")]
    d = extract(spec)
    assert len(d.nodes) == n + 2
    assert to_dot(d).count(" -> ") == sum(len(r) for r in spec.transitions.values()) + 1
    assert to_mermaid(d).count(" --> ") == len(d.edges) + 1 + 2
    assert to_markdown(d).count("\n| `s") == len(d.nodes) - 2 + len(d.edges)


# -- the command line --------------------------------------------------------------------

BROKEN = """
import copy
from fsm import define_workflow
from workflows.refund.invariants import INVARIANTS
from workflows.refund.shop import Shop
from workflows.refund.workflow import (GUARDS, HUMAN_EVENTS, PAYLOADS, RECORDS,
    TOOLS_BY_STATE, TRANSITIONS, _Fixed, _tools)
t = copy.deepcopy(TRANSITIONS)
t["deciding"]["large_refund"] = "refunding"
t["deciding"]["review"] = "awaiting_approval"
SPEC = define_workflow("refund", transitions=t, tools_by_state=TOOLS_BY_STATE,
    initial="collecting", tools=_tools(_Fixed(Shop())), human_events=HUMAN_EVENTS,
    guards=GUARDS, payloads=PAYLOADS, records=RECORDS, expiry_event="expired",
    terminal={"done"}, handed_over_states={"handed_over"}, invariants=INVARIANTS)
"""


def test_cli_verify_exits_non_zero_when_violated(tmp_path: Path) -> None:
    (tmp_path / "broken_refund.py").write_text(BROKEN)

    def fsm_verify(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        return subprocess.run([sys.executable, "-m", "fsm", "verify", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env=env)

    ok = fsm_verify("refund")
    assert ok.returncode == 0, ok.stderr
    assert "8 invariants: 8 proved, 0 violated." in ok.stdout
    bad = fsm_verify("broken_refund:SPEC")
    assert bad.returncode == 1, bad.stderr
    assert "VIOLATED  refund_item runs only after a person fires approved, unless a guard " \
           "established amount_within_limit" in bad.stdout
    assert "3. deciding: the model fires large_refund" in bad.stdout
    out = tmp_path / "report.md"
    bad = fsm_verify("broken_refund:SPEC", "-o", str(out))
    assert bad.returncode == 1 and "1 violated" in bad.stdout
    assert out.read_text().startswith("# Verification of workflow `refund`")
    assert "## 3. VIOLATED: `refund_item` runs" in out.read_text()


def test_cli_verify_refuses_a_workflow_with_no_invariants(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from fsm.cli import main

    def fsm_verify(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["fsm", "verify", *args])
        with pytest.raises(SystemExit) as info:
            main()
        out = capsys.readouterr()
        return int(info.value.code or 0), out.out, out.err

    code, out, err = fsm_verify("desk:SPEC")
    assert (code, out) == (1, "")
    assert err == ("error: workflow 'desk' declares no invariants, so fsm verify proves "
                   "nothing; add invariants=(...) to define_workflow, or pass --allow-empty "
                   "to accept that\n")
    code, out, err = fsm_verify("desk:SPEC", "--allow-empty")
    assert code == 0, err
    assert out.endswith("\nno invariants declared: nothing was proved.\n")


def epoch_flow(*again_establishes: str) -> WorkflowSpec:
    """An approved decision, then a second decision before the payment."""
    def always(facts: Any, payload: Any) -> bool:
        return True

    return define_workflow(
        "epoch", initial="deciding", terminal={"done"},
        transitions={"deciding": {"small": "paying", "large": "waiting"},
                     "waiting": {"approved": "rethink", "declined": "done"},
                     "rethink": {"decide_again": "paying"},
                     "paying": {"paid": "done"}},
        tools_by_state={"paying": ["pay"]}, human_events={"approved", "declined"},
        guards={"small": Guard("within the limit", always, establishes=("within",)),
                "decide_again": Guard("a new amount", always,
                                      establishes=again_establishes)},
        tools=[ToolSpec("pay", lambda a, c: {}, write=True, emits=lambda r: "paid",
                        emits_events=("paid",))],
    )


def test_an_approval_does_not_cover_a_later_decision() -> None:
    rule = ToolOnlyAfter("pay", "approved", unless="within")
    [kept] = verify(epoch_flow(), [rule]).verdicts
    assert kept.proved  # the second edge decides nothing new: the approval still counts
    [broken] = verify(epoch_flow("above"), [rule]).verdicts
    assert not broken.proved
    assert steps(broken) == [("deciding", "large", None, "waiting"),
                             ("waiting", "approved", None, "rethink"),
                             ("rethink", "decide_again", None, "paying"),
                             ("paying", None, "pay", "paying")]
