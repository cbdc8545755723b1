"""The gate: every refusal is an observation and a log event, and nothing runs.

Each row brings a refund run to a state with a script, then gives one action the
gate must refuse; the run stops right after on its step budget.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from refund_scripts import actions, small_refund

from fsm import Budgets, Engine, Guard, MemoryStore, ToolSpec, WorkflowSpec, define_workflow
from fsm.testing import ScriptedPolicy, ToolSpy
from workflows.refund import Shop


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def fire(event: str, **payload: Any) -> dict[str, Any]:
    return {"tool": "advance", "args": {"event": event, **payload}}


#: The small refund of A-1001 up to each state: fetched, verified, decided.
VERIFYING = actions(small_refund()[:2])
DECIDING = actions(small_refund()[:4])
REFUNDING = actions(small_refund()[:5])
DECIDED = "{'order_id': 'A-1001', 'item_id': 'kettle-1', 'amount_paise': 35000}"

REFUSALS = [
    pytest.param(
        [], call("teleport", to="refunding"), "collecting",
        "unknown tool 'teleport' (allowed in state 'collecting': get_order)",
        id="unknown-tool",
    ),
    pytest.param(
        VERIFYING, call("refund_item", order_id="A-1001", item_id="kettle-1",
                        amount_paise=35_000), "verifying",
        "tool 'refund_item' is not allowed in state 'verifying' (allowed: get_order, "
        "get_policy)",
        id="tool-not-allowed-in-state",
    ),
    pytest.param(
        [], call("get_order", order_id="a-1001"), "collecting",
        "bad arguments for 'get_order': order_id: String should match pattern "
        "'^[A-Z]-\\d{4}$'",
        id="bad-arguments",
    ),
    pytest.param(
        [], call("get_order", order_id="A-1001", include="everything"), "collecting",
        "bad arguments for 'get_order': include: Extra inputs are not permitted",
        id="extra-argument",
    ),
    pytest.param(
        VERIFYING, fire("small_refund", item_id="kettle-1", amount_paise=100), "verifying",
        "event 'small_refund' is not allowed in state 'verifying' (allowed: verified, "
        "cannot_verify)",
        id="event-not-allowed-in-state",
    ),
    pytest.param(
        VERIFYING, fire("verified"), "verifying",
        "event 'verified' refused in state 'verifying': guard not met (get_policy said "
        "eligible)",
        id="guard-refuses-unchecked-policy",
    ),
    pytest.param(
        DECIDING, fire("small_refund", item_id="kettle-1", amount_paise=60_000), "deciding",
        "event 'small_refund' refused in state 'deciding': guard not met (amount ≤ ₹500 and "
        "≤ refundable)",
        id="guard-refuses-small-refund-above-limit",
    ),
    pytest.param(
        DECIDING, fire("large_refund", item_id="kettle-1", amount_paise=60_000), "deciding",
        "event 'large_refund' refused in state 'deciding': guard not met (amount > ₹500 and "
        "≤ refundable)",
        id="guard-refuses-more-than-refundable",
    ),
    pytest.param(
        DECIDING, fire("approved"), "deciding",
        "event 'approved' can only be fired by a person, not by the model (allowed: "
        "small_refund, large_refund, no_refund)",
        id="human-only-event",
    ),
    pytest.param(
        REFUNDING, fire("refund_ok"), "refunding",
        "event 'refund_ok' is fired by the tool that reports it, not by the model "
        "(allowed: none)",
        id="tool-reported-event",
    ),
    pytest.param(
        DECIDING, fire("small_refund", item_id="kettle-1", amount_paise=True), "deciding",
        "bad payload for event 'small_refund': amount_paise: Input should be a valid "
        "integer",
        id="payload-amount-true",
    ),
    pytest.param(
        DECIDING, fire("small_refund", item_id="kettle-1", amount_paise="lots"), "deciding",
        "bad payload for event 'small_refund': amount_paise: Input should be a valid "
        "integer",
        id="bad-payload",
    ),
    pytest.param(
        VERIFYING, fire("cannot_verify", reason="no"), "verifying",
        "event 'cannot_verify' takes no payload (got: reason)",
        id="payload-for-event-without-one",
    ),
    pytest.param(
        VERIFYING, {"tool": "advance", "args": {}}, "verifying",
        "advance needs an 'event' argument (allowed: verified, cannot_verify)",
        id="advance-without-event",
    ),
    pytest.param(
        REFUNDING, call("refund_item", order_id="A-1001", item_id="kettle-1",
                        amount_paise=35_001), "refunding",
        f"'refund_item' refused: arguments must equal the decided refund {DECIDED}",
        id="refund-above-the-decided-amount",
    ),
    pytest.param(
        REFUNDING, call("refund_item", order_id="A-1004", item_id="kettle-1",
                        amount_paise=35_000), "refunding",
        f"'refund_item' refused: arguments must equal the decided refund {DECIDED}",
        id="refund-of-another-order",
    ),
    pytest.param(
        [], {"tool": "get_order", "args": "A-1001"}, "collecting",
        "unusable policy output: args: Input should be a valid dictionary",
        id="arguments-not-an-object",
    ),
]


def _run(spec: WorkflowSpec, store: MemoryStore, script: list[Any], **options: Any) -> Any:
    engine = Engine(spec, store, ScriptedPolicy(script),
                    budgets=Budgets(max_steps=len(script)), **options)
    return engine.start("Order A-1001: the kettle is broken", user="asha", run_id="g")


@pytest.mark.parametrize("prefix, action, state, message", REFUSALS)
def test_refusal_is_an_observation_and_nothing_runs(
    prefix: list[Any], action: Any, state: str, message: str, shop: Shop,
    spec: WorkflowSpec, store: MemoryStore,
) -> None:
    spy = ToolSpy(spec, store)
    run = _run(spy.spec, store, prefix + [action])

    step = len(prefix) + 1
    assert run.status == "budget_exhausted"
    assert run.state == state
    tool = action["tool"] if isinstance(action["tool"], str) else None
    assert store.messages("g")[-1] == {"role": "tool", "tool": tool, "error": message}
    at_step = [e for e in store.events("g") if e.step == step]
    # The step budget then stops the run, logged at the same step.
    assert [e.kind for e in at_step] == ["policy", "refusal", "stop"]
    assert at_step[1].reason == message
    assert at_step[1].state_before == at_step[1].state_after == state
    assert [c for c in spy.calls if c.step == step] == []
    assert shop.ledger() == [] and shop.calls() == []


def test_final_answer_outside_a_finishing_state_is_refused(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    run = _run(spec, store, VERIFYING + [{"final": "Your refund is on its way."}])

    assert (run.status, run.state, run.answer) == ("budget_exhausted", "verifying", None)
    message = ("a final answer is not accepted in state 'verifying': the workflow finishes "
               "through its events. Reply with one tool call: get_order or get_policy, or "
               "advance with event verified or cannot_verify.")
    assert store.messages("g")[-2:] == [
        {"role": "assistant", "final": "Your refund is on its way."},
        {"role": "user", "content": message, "runtime": True},
    ]
    assert [e.reason for e in store.events("g") if e.kind == "refusal"] == [message]


def test_policy_of_another_order_does_not_verify(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    # asha's lamp (A-1004, ₹420) must not set the refundable amount of her kettle (₹350).
    script = VERIFYING + [
        call("get_policy", order_id="A-1004"), fire("verified"),
        call("get_policy", order_id="A-1001"), fire("verified"),
        fire("small_refund", item_id="kettle-1", amount_paise=42_000),
    ]
    run = _run(spec, store, script)

    assert run.state == "deciding"
    assert run.facts["policy"]["order_id"] == "A-1001"
    refusals = [e.event for e in store.events("g") if e.kind == "refusal"]
    assert refusals == ["verified", "small_refund"]
    assert shop.ledger() == []


def test_tool_that_raises_gives_type_and_message(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    run = _run(spec, store, [call("get_order", order_id="Z-9999")])

    assert run.status == "budget_exhausted" and run.state == "collecting"
    assert store.messages("g")[-1] == {
        "role": "tool", "tool": "get_order", "error": "LookupError: no order Z-9999",
    }
    (executed,) = [e for e in store.events("g") if e.kind == "tool"]
    assert executed.detail["error"] == "LookupError: no order Z-9999"
    assert "order" not in run.facts


def test_result_over_the_cap_is_truncated_with_an_artifact(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    run = _run(spec, store, VERIFYING, result_cap=40)

    assert run.state == "verifying"  # the guard read the whole result from the facts
    result = store.messages("g")[2]["result"]
    assert set(result) == {"excerpt", "artifact", "chars"}
    assert len(result["excerpt"]) == 40
    full = store.artifact(result["artifact"].removeprefix("artifact:"))
    assert full is not None and len(full) == result["chars"] > 40
    assert full.startswith(result["excerpt"]) and '"item_id": "kettle-1"' in full


# -- repeated calls --------------------------------------------------------------------


class Pair(BaseModel):
    a: int
    b: str


def _lookup_workflow(log: list[dict[str, Any]]) -> WorkflowSpec:
    def lookup(args: Pair, ctx: Any) -> dict[str, Any]:
        log.append(args.model_dump())
        return {"found": args.a}

    return define_workflow(
        "lookups", transitions={"looking": {"found": "answering"}, "answering": {}},
        tools_by_state={"looking": ["lookup"]}, initial="looking",
        tools=[ToolSpec("lookup", lookup, args=Pair)], terminal=set(),
        finish_states={"answering"},
    )


REPEAT = "repeated call: 'lookup' was already called with these arguments in state " \
         "'looking'; use its result above or take another action"


def test_repeated_identical_call_is_refused_then_the_run_fails() -> None:
    executed: list[dict[str, Any]] = []
    store = MemoryStore()
    # Same call three more times, the last with its keys in another order and "1" for 1.
    script = [call("lookup", a=1, b="x"), call("lookup", a=1, b="x"),
              call("lookup", a=1, b="x"), {"tool": "lookup", "args": {"b": "x", "a": "1"}},
              {"final": "never asked"}]
    policy = ScriptedPolicy(script)
    run = Engine(_lookup_workflow(executed), store, policy, max_repeats=3).start(
        "find 1", run_id="loop")

    assert executed == [{"a": 1, "b": "x"}]
    assert run.status == "failed"
    assert run.reason == "repetition loop: lookup repeated with the same arguments"
    assert policy.used == 4
    errors = [m["error"] for m in store.messages("loop") if "error" in m]
    assert errors == [REPEAT] * 3
    kinds = [e.kind for e in store.events("loop")]
    assert kinds.count("refusal") == 3 and kinds[-1] == "stop"


def test_a_different_call_resets_the_repeat_count() -> None:
    executed: list[dict[str, Any]] = []
    store = MemoryStore()
    script = [call("lookup", a=1, b="x"), call("lookup", a=1, b="x"),
              call("lookup", a=2, b="x"), call("lookup", a=1, b="x"),
              fire("found"), call("lookup", a=1, b="x"), {"final": "1 and 2"}]
    run = Engine(_lookup_workflow(executed), store, ScriptedPolicy(script),
                 max_repeats=2).start("find", run_id="r")

    assert run.status == "done" and run.answer == "1 and 2"
    assert executed == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    errors = [m["error"] for m in store.messages("r") if "error" in m]
    assert errors == [REPEAT, REPEAT, "tool 'lookup' is not allowed in state 'answering' "
                      "(allowed: none)"]


def test_the_same_call_is_allowed_again_after_a_transition(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    spy = ToolSpy(spec, store)
    run = _run(spy.spec, store, VERIFYING + [call("get_order", order_id="A-1001")])

    assert [c.state for c in spy.calls] == ["collecting", "verifying"]
    assert [e.kind for e in store.events("g")].count("refusal") == 0
    assert run.state == "verifying"


def test_repeat_detection_can_be_switched_off() -> None:
    executed: list[dict[str, Any]] = []
    script = [call("lookup", a=1, b="x")] * 5 + [fire("found"), {"final": "ok"}]
    run = Engine(_lookup_workflow(executed), MemoryStore(), ScriptedPolicy(script),
                 max_repeats=None).start("find")

    assert run.status == "done"
    assert len(executed) == 5


def test_a_persons_event_refused_by_its_guard_leaves_the_run_waiting() -> None:
    spec = define_workflow(
        "review", transitions={"drafting": {"submit": "in_review"},
                               "in_review": {"approved": "published", "declined": "drafting"},
                               "published": {}},
        tools_by_state={}, initial="drafting", human_events={"approved", "declined"},
        guards={"approved": Guard("the draft has a title", lambda f, p: "title" in f)},
    )
    store = MemoryStore()
    engine = Engine(spec, store, ScriptedPolicy([fire("submit"), fire("submit")]))
    run = engine.start("write it", run_id="d")
    assert (run.status, run.state) == ("awaiting_approval", "in_review")

    run = engine.decide("d", True, reviewer="editor")
    assert (run.status, run.state) == ("awaiting_approval", "in_review")
    kinds = [(e.kind, e.event) for e in store.events("d") if e.step == 1]
    assert kinds[-3:] == [("decision", None), ("refusal", "approved"), ("pause", None)]
    assert len(store.approvals("d")) == 1  # a fresh request, the first one decided

    run = engine.decide("d", False, reviewer="editor", note="needs a title")
    assert (run.status, run.state) == ("awaiting_approval", "in_review")
    assert [e.event for e in store.events("d") if e.kind == "transition"] == [
        "submit", "declined", "submit"]


class Split(BaseModel):
    parts: int


def _author_bugs_workflow(paid: list[int]) -> WorkflowSpec:
    def pay(args: Split, ctx: Any) -> dict[str, Any]:
        paid.append(args.parts)
        return {"paid": args.parts}

    return define_workflow(
        "splitting", transitions={"planning": {"split": "paying"}, "paying": {"paid": "done"}},
        tools_by_state={"paying": ["pay"]}, initial="planning", payloads={"split": Split},
        guards={"split": Guard("each part is at least 10", lambda f, p: 100 / p["parts"] >= 10)},
        records={"split": "plan"}, terminal={"done"},
        tools=[ToolSpec("pay", pay, args=Split, write=True, emits=lambda r: "paid",
                        emits_events=("paid",),
                        check=lambda a, f: None if 100 % a.parts == 0 else "uneven",
                        approval=lambda a, f: 1 / (a.parts - 5) > 1)],
    )


@pytest.mark.parametrize("script, where, reason", [
    pytest.param([fire("split", parts=0)], "the guard of 'split'",
                 "event 'split' in state 'planning': its guard (each part is at least 10) "
                 "raised ZeroDivisionError: division by zero", id="guard"),
    pytest.param([fire("split", parts=5), call("pay", parts=0)], "the check of 'pay'",
                 "the check of 'pay' raised ZeroDivisionError: integer modulo by zero",
                 id="check"),
    pytest.param([fire("split", parts=5), call("pay", parts=5)], "the approval rule of 'pay'",
                 "the approval rule of 'pay' raised ZeroDivisionError: division by zero",
                 id="approval"),
])
def test_author_rules_that_raise_fail_the_run_at_once(script: list[dict[str, Any]], where: str,
                                                     reason: str) -> None:
    """A guard, a check or an approval rule that raises is a bug in the workflow's code:
    the run fails on that step (no model loop), nothing runs, and the log keeps the
    traceback."""
    paid: list[int] = []
    store = MemoryStore()
    run = Engine(_author_bugs_workflow(paid), store,
                 ScriptedPolicy([*script, call("pay", parts=4)])).start("pay", run_id="a")

    assert (run.status, run.reason, run.step) == ("failed", reason, len(script))
    assert paid == []
    stop = store.events("a")[-1]
    assert stop.kind == "stop" and stop.reason == reason
    assert stop.detail["bug"]["in"] == where
    trace = stop.detail["bug"]["traceback"]
    assert trace.startswith("Traceback (most recent call last):") and \
        trace.rstrip().endswith(reason.rsplit(" raised ", 1)[1])
    assert "test_gate.py" in trace  # the author's line, where the bug is
    said = store.messages("a")[-1]
    assert said["role"] == "tool" and said["error"].startswith("the workflow's own code failed")
    assert [e.kind for e in store.events("a")].count("refusal") == 0
