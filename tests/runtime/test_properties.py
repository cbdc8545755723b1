"""Safety contracts under hostile policies (hypothesis).

Whatever the policy says, and however a supervisor answers, what actually
happened (the shop's ledger, a spy on every tool, the event log) must obey the
tables: tools only in their states, no refund without ``verified``, none above
₹500 without a person's ``approved``, the refunded amount is the decided one and
no more than the item's price, at most one refund per item, and the engine never
raises.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refund_scripts import actions, small_refund

from fsm import Budgets, Engine, MemoryStore, RunState
from fsm.records import FINAL_STATUSES, verify_chain
from fsm.testing import JUNK_OUTPUTS, MeddlingPolicy, RandomPolicy, ScriptedPolicy, ToolSpy
from workflows.refund import APPROVAL_LIMIT_PAISE, TOOLS_BY_STATE, Shop, build, clerk
from workflows.refund.shop import DEMO_ORDERS
from workflows.refund.workflow import REFUND_WINDOW_DAYS

USERS = ["asha", "ravi", "meera", "kiran"]
SETTINGS = settings(max_examples=50, deadline=None)


def _play(policy_for: Any, order_id: str, user: str, max_steps: int,
          decisions: list[bool]) -> tuple[Shop, MemoryStore, ToolSpy, RunState]:
    shop = Shop().seed_demo()
    store = MemoryStore()
    spy = ToolSpy(build(shop), store)
    engine = Engine(spy.spec, store, policy_for(spy.spec),
                    budgets=Budgets(max_steps=max_steps))
    run = engine.start(f"Order {order_id}: please refund it", user=user, run_id="p")
    for approved in decisions:
        if run.status != "awaiting_approval":
            break
        run = engine.decide("p", approved, reviewer="supervisor", note="checked")
    return shop, store, spy, run


def _check_contracts(shop: Shop, store: MemoryStore, spy: ToolSpy, run: RunState) -> None:
    events = store.events("p")
    assert verify_chain(events) is None
    assert run.status in FINAL_STATUSES | {"awaiting_approval"}

    # A tool runs only in a state whose TOOLS_BY_STATE row names it: what really ran,
    # and what the log says ran.
    for c in spy.calls:
        assert c.tool in TOOLS_BY_STATE.get(c.state, []), c
    for e in events:
        if e.kind == "tool":
            assert e.tool in TOOLS_BY_STATE.get(e.state_before or "", []), e

    ledger = shop.ledger()
    assert len(shop.calls("refund")) <= 1
    assert all(n == 1 for n in Counter((r["order_id"], r["item_id"]) for r in ledger).values())
    for row in ledger:
        _check_refund(row, run, events, store)


def _check_refund(row: dict[str, Any], run: RunState, events: list[Any],
                  store: MemoryStore) -> None:
    customer, item_id, _name, price, days = DEMO_ORDERS[row["order_id"]]
    assert (customer, item_id) == (run.user, row["item_id"])
    assert days <= REFUND_WINDOW_DAYS and 0 < row["amount_paise"] <= price

    paid_at = next(i for i, e in enumerate(events)
                   if e.kind == "tool" and e.tool == "refund_item"
                   and e.detail.get("key") == row["idempotency_key"])
    before = [(e.kind, e.event) for e in events[:paid_at]]
    assert ("transition", "verified") in before

    decision = run.facts["decision"]
    assert decision == {"item_id": row["item_id"], "amount_paise": row["amount_paise"]}
    assert run.facts["order"]["order_id"] == row["order_id"]
    if row["amount_paise"] > APPROVAL_LIMIT_PAISE:
        assert ("transition", "approved") in before
        (approval,) = [a for a in store.approvals("p", pending_only=False)
                       if a.decision == "approved"]
        assert approval.args == decision


@SETTINGS
@given(
    rng=st.randoms(use_true_random=False), order_id=st.sampled_from(sorted(DEMO_ORDERS)),
    user=st.sampled_from(USERS), max_steps=st.integers(1, 40),
    decisions=st.lists(st.booleans(), max_size=2),
)
def test_random_policy_cannot_break_the_tables(
    rng: random.Random, order_id: str, user: str, max_steps: int, decisions: list[bool]
) -> None:
    shop, store, spy, run = _play(lambda spec: RandomPolicy.for_spec(spec, rng=rng),
                                  order_id, user, max_steps, decisions)
    _check_contracts(shop, store, spy, run)


@SETTINGS
@given(
    rng=st.randoms(use_true_random=False), order_id=st.sampled_from(sorted(DEMO_ORDERS)),
    user=st.sampled_from(USERS), max_steps=st.integers(4, 30),
    rate=st.floats(0.05, 0.7), decisions=st.lists(st.booleans(), max_size=2),
)
def test_a_meddling_clerk_cannot_break_the_tables(
    rng: random.Random, order_id: str, user: str, max_steps: int, rate: float,
    decisions: list[bool],
) -> None:
    def policy_for(spec: Any) -> MeddlingPolicy:
        chaos = RandomPolicy.for_spec(spec, rng=rng)
        return MeddlingPolicy(clerk, rng=rng, rate=rate, chaos=chaos)

    shop, store, spy, run = _play(policy_for, order_id, user, max_steps, decisions)
    _check_contracts(shop, store, spy, run)


def test_hostile_policies_reach_the_money() -> None:
    """The properties above mean something only if hostile runs do get to refunding."""
    reached: Counter[str] = Counter()
    for seed in range(40):
        rng = random.Random(seed)

        def policy_for(spec: Any, rng: random.Random = rng) -> MeddlingPolicy:
            return MeddlingPolicy(clerk, rng=rng, rate=0.3,
                                  chaos=RandomPolicy.for_spec(spec, rng=rng))

        order_id = ["A-1001", "A-1002"][seed % 2]
        shop, store, spy, run = _play(policy_for, order_id, DEMO_ORDERS[order_id][0], 30,
                                      [True])
        _check_contracts(shop, store, spy, run)
        reached.update({e.state_after for e in store.events("p") if e.kind == "transition"})
        reached["paid"] += len(shop.ledger())
    assert reached["refunding"] >= 10 and reached["paid"] >= 10


@pytest.mark.parametrize("junk", JUNK_OUTPUTS, ids=lambda j: repr(j)[:40])
@pytest.mark.parametrize("prefix", [0, 2, 4, 5], ids=["collecting", "verifying", "deciding",
                                                      "refunding"])
def test_junk_output_never_raises_and_changes_nothing(junk: Any, prefix: int) -> None:
    steps = actions(small_refund())[:prefix]
    shop = Shop().seed_demo()
    store = MemoryStore()
    spy = ToolSpy(build(shop), store)
    run = Engine(spy.spec, store, ScriptedPolicy(steps + [junk, junk]),
                 budgets=Budgets(max_steps=prefix + 2)).start("A-1001", user="asha",
                                                               run_id="p")

    assert run.status == "budget_exhausted"
    assert len(spy.calls) == sum(s["tool"] != "advance" for s in steps)
    junk_steps = [e for e in store.events("p") if e.step > prefix]
    assert [e.kind for e in junk_steps] == ["policy", "refusal", "policy", "refusal", "stop"]
    assert shop.ledger() == []
    _check_contracts(shop, store, spy, run)


def test_a_policy_that_raises_fails_the_run_without_raising() -> None:
    def broken(view: Any) -> Any:
        raise ZeroDivisionError("division by zero")

    shop = Shop().seed_demo()
    store = MemoryStore()
    run = Engine(build(shop), store, broken).start("A-1001", user="asha", run_id="p")

    assert run.status == "failed"
    assert run.reason == "policy raised ZeroDivisionError: division by zero"
    assert [e.kind for e in store.events("p")] == ["start", "policy", "stop"]
