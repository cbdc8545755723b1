"""The refund workflow end to end: one table of scenarios, replayed by one test.

Each row gives the case (order, user, the supervisor's decisions, budgets), the
policy (the rule-based clerk or a script), and what must have happened: the final
status, the path of states read back from the event log, the shop's ledger and
outbox, and the log itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from refund_scripts import actions, large_refund, small_refund

from fsm import Action, Budgets, Engine, MemoryStore, Usage, WorkflowSpec
from fsm.records import verify_chain
from fsm.testing import ScriptedPolicy, state_path
from workflows.refund import Shop, clerk

FULL_REFUND_PATH = ["collecting", "verifying", "deciding", "refunding", "replying", "done"]
APPROVED_PATH = ["collecting", "verifying", "deciding", "awaiting_approval", "refunding",
                 "replying", "done"]
DECLINED_PATH = ["collecting", "verifying", "deciding", "awaiting_approval", "replying", "done"]

FETCH_AND_VERIFY = ["start", "tool get_order", "transition details_complete",
                    "tool get_policy", "transition verified"]
#: Each write is claimed in the log (a commit of its own) before it runs.
PAY_AND_REPLY = ["claim refund_item", "tool refund_item", "transition refund_ok",
                 "claim send_reply", "tool send_reply", "transition sent", "stop"]


@dataclass(frozen=True)
class Case:
    """A customer's request, and how the supervisor answers pauses (True approves)."""

    order_id: str
    user: str
    decisions: tuple[bool, ...] = ()
    budgets: Budgets | None = None

    @property
    def goal(self) -> str:
        return f"Order {self.order_id}: it is not what I expected, please refund it"


@dataclass(frozen=True)
class Expect:
    #: (order_id, item_id, amount_paise) rows of the shop's ledger.
    ledger: list[tuple[str, str, int]] = field(default_factory=list)
    #: A phrase of each reply in the outbox, in order.
    replies: list[str] = field(default_factory=list)
    #: The log without its ``policy`` rows, as "kind name".
    log: list[str] = field(default_factory=list)
    reason: str | None = None


#: The large refund up to the decision; declined, it replies instead of refunding.
DENIAL_SCRIPT = actions([
    *large_refund()[:5],
    ("send_reply", {"text": "Sorry, we cannot refund the headphones after review."}),
])

# Each action reports 400 tokens; a 1,000-token budget allows three policy calls.
COSTLY_SCRIPT = [
    Action(tool=tool, args=args, usage=Usage(input_tokens=300, output_tokens=100,
                                             cost_micros=50))
    for tool, args in small_refund()[:3]
]

SCENARIOS = [
    pytest.param(
        Case("A-1001", "asha"), clerk, "done", FULL_REFUND_PATH,
        Expect(ledger=[("A-1001", "kettle-1", 35_000)], replies=["refund of ₹350"],
               log=FETCH_AND_VERIFY + ["transition small_refund"] + PAY_AND_REPLY),
        id="small-refund-paid",
    ),
    pytest.param(
        Case("A-1002", "ravi", decisions=(True,)), clerk, "done", APPROVED_PATH,
        Expect(ledger=[("A-1002", "headphones-1", 180_000)], replies=["refund of ₹1,800"],
               log=FETCH_AND_VERIFY + ["transition large_refund", "pause", "decision",
                                       "transition approved"] + PAY_AND_REPLY),
        id="large-refund-approved",
    ),
    pytest.param(
        Case("A-1002", "ravi"), clerk, "awaiting_approval",
        ["collecting", "verifying", "deciding", "awaiting_approval"],
        Expect(log=FETCH_AND_VERIFY + ["transition large_refund", "pause"]),
        id="large-refund-waits-for-a-person",
    ),
    pytest.param(
        Case("A-1003", "meera"), clerk, "done",
        ["collecting", "verifying", "deciding", "replying", "done"],
        Expect(replies=["outside our 30-day refund window"],
               log=FETCH_AND_VERIFY + ["transition no_refund", "claim send_reply",
                                       "tool send_reply",
                                       "transition sent", "stop"]),
        id="outside-window-no-refund",
    ),
    pytest.param(
        Case("A-1004", "kiran"), clerk, "handed_over",
        ["collecting", "verifying", "handed_over"],
        Expect(log=["start", "tool get_order", "transition details_complete",
                    "tool get_policy", "transition cannot_verify", "stop"],
               reason="reached 'handed_over'"),
        id="someone-elses-order-handed-over",
    ),
    pytest.param(
        Case("A-1002", "ravi", decisions=(False,)), clerk, "done", DECLINED_PATH,
        Expect(replies=["after review we cannot refund"],
               log=FETCH_AND_VERIFY + ["transition large_refund", "pause", "decision",
                                       "transition declined", "claim send_reply",
                                       "tool send_reply",
                                       "transition sent", "stop"]),
        id="large-refund-declined-clerk",
    ),
    pytest.param(
        Case("A-1002", "ravi", decisions=(False,)), DENIAL_SCRIPT, "done", DECLINED_PATH,
        Expect(replies=["cannot refund the headphones after review"],
               log=FETCH_AND_VERIFY + ["transition large_refund", "pause", "decision",
                                       "transition declined", "claim send_reply",
                                       "tool send_reply",
                                       "transition sent", "stop"]),
        id="large-refund-declined-scripted",
    ),
    pytest.param(
        Case("A-1001", "asha", budgets=Budgets(max_steps=3)), clerk, "budget_exhausted",
        ["collecting", "verifying"],
        Expect(log=["start", "tool get_order", "transition details_complete",
                    "tool get_policy", "stop"],
               reason="steps budget exhausted: used 3 of 3"),
        id="step-budget-exhausted",
    ),
    pytest.param(
        Case("A-1002", "ravi", decisions=(True,), budgets=Budgets(max_steps=6)), clerk,
        "budget_exhausted", APPROVED_PATH[:-1],
        Expect(ledger=[("A-1002", "headphones-1", 180_000)],
               log=FETCH_AND_VERIFY + ["transition large_refund", "pause", "decision",
                                       "transition approved", "claim refund_item",
                                       "tool refund_item",
                                       "transition refund_ok", "stop"],
               reason="steps budget exhausted: used 6 of 6"),
        id="step-budget-holds-across-the-pause",
    ),
    pytest.param(
        Case("A-1001", "asha", budgets=Budgets(max_steps=None, max_tokens=1000)),
        COSTLY_SCRIPT, "budget_exhausted", ["collecting", "verifying"],
        Expect(log=["start", "tool get_order", "transition details_complete",
                    "tool get_policy", "stop"],
               reason="tokens budget exhausted: used 1200 of 1000"),
        id="token-budget-exhausted",
    ),
]


def _play(case: Case, policy: Any, spec: WorkflowSpec, store: MemoryStore) -> Any:
    if isinstance(policy, list):
        policy = ScriptedPolicy(policy)
    engine = Engine(spec, store, policy)
    run = engine.start(case.goal, user=case.user, run_id=case.order_id, budgets=case.budgets)
    for approved in case.decisions:
        assert run.status == "awaiting_approval"
        run = engine.decide(run.run_id, approved, reviewer="supervisor", note="checked")
    return run


@pytest.mark.parametrize("case, policy, status, path, expect", SCENARIOS)
def test_refund_scenario(case: Case, policy: Any, status: str, path: list[str],
                         expect: Expect, shop: Shop, spec: WorkflowSpec,
                         store: MemoryStore) -> None:
    run = _play(case, policy, spec, store)

    stored = store.load_run(case.order_id)
    assert (run.status, stored.status) == (status, status)
    assert stored.reason == expect.reason
    assert state_path(store, case.order_id) == path
    assert stored.state == path[-1]

    assert [(r["order_id"], r["item_id"], r["amount_paise"]) for r in shop.ledger()] == \
        expect.ledger
    outbox = shop.outbox()
    assert len(outbox) == len(expect.replies)
    for sent, phrase in zip(outbox, expect.replies, strict=True):
        assert phrase in sent["text"]
        assert sent["customer"] == case.user

    events = store.events(case.order_id)
    assert verify_chain(events) is None
    log = [f"{e.kind} {e.event or e.tool or ''}".strip() for e in events if e.kind != "policy"]
    assert log == expect.log
    assert sum(e.kind == "policy" for e in events) == stored.used.steps
    refusals = [e.reason for e in events if e.kind == "refusal"]
    assert refusals == []


def test_refund_is_paid_with_the_step_key_and_reported_to_the_customer(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    run = Engine(spec, store, clerk).start("Order A-1001: broken", user="asha", run_id="r1")

    assert run.status == "done"
    (payment,) = shop.ledger()
    refund = next(e for e in store.events("r1") if e.tool == "refund_item")
    assert payment["idempotency_key"] == f"r1:{refund.step}" == refund.detail["key"]
    assert shop.calls("refund") == [
        {"n": 1, "api": "refund", "idempotency_key": f"r1:{refund.step}",
         "at": shop.calls("refund")[0]["at"]}
    ]
    messages = store.messages("r1")
    assert messages[0] == {"role": "user", "content": "Order A-1001: broken"}
    assert {"role": "tool", "tool": "refund_item",
            "result": {"status": "ok", "payment": "r1:6", "amount_paise": 35_000}} in messages
    assert run.facts["decision"] == {"item_id": "kettle-1", "amount_paise": 35_000}


def test_a_large_refund_waits_with_the_decision_as_the_pending_request(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    run = Engine(spec, store, clerk).start("Order A-1002 please", user="ravi", run_id="r2")

    assert run.status == "awaiting_approval"
    assert run.pending is not None and run.pending.kind == "event"
    assert sorted(run.pending.events) == ["approved", "declined", "expired"]
    assert run.pending.args == {"item_id": "headphones-1", "amount_paise": 180_000}
    (approval,) = store.approvals("r2")
    assert approval.args == run.pending.args and approval.decision is None
    assert shop.ledger() == []


def test_the_clerk_refunds_the_accepted_decision_not_a_later_refused_one(
    shop: Shop, spec: WorkflowSpec, store: MemoryStore
) -> None:
    # A stray decision fired in `refunding` is refused; the clerk must not copy it.
    stray = {"tool": "advance", "args": {"event": "small_refund", "item_id": "kettle-1",
                                         "amount_paise": 100}}

    def policy(view: Any) -> Any:
        if view.state == "refunding" and not any(
            m.get("args") == stray["args"] for m in view.messages
        ):
            return stray
        return clerk(view)

    run = Engine(spec, store, policy).start("Order A-1001: broken", user="asha", run_id="c")

    assert run.status == "done"
    assert [r["amount_paise"] for r in shop.ledger()] == [35_000]
    assert [e.event for e in store.events("c") if e.kind == "refusal"] == ["small_refund"]
