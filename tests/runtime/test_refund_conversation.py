"""The refund conversation: the agent asks for a missing order number, and the refund
then goes as it always does. Driven by a scripted policy and a scripted customer."""

from __future__ import annotations

import pytest

from fsm import Engine, MemoryStore
from fsm.auditor.audit import audit
from fsm.auditor.verify import verify
from fsm.testing import ScriptedCustomer, ScriptedPolicy, talk
from workflows.refund import Shop, build
from workflows.refund.conversation import ASK_ORDER, build_conversation, chat_clerk

KETTLE = "My kettle arrived broken, I want my money back"
SCRIPT = [
    {"final": "Which order is it? Please give me its number."},
    {"tool": "get_order", "args": {"order_id": "A-1001"}},
    {"tool": "advance", "args": {"event": "details_complete"}},
    {"tool": "get_policy", "args": {"order_id": "A-1001"}},
    {"tool": "advance", "args": {"event": "verified"}},
    {"tool": "advance", "args": {"event": "small_refund", "item_id": "kettle-1",
                                 "amount_paise": 35_000}},
    {"tool": "refund_item", "args": {"order_id": "A-1001", "item_id": "kettle-1",
                                     "amount_paise": 35_000}},
    {"tool": "send_reply", "args": {"text": "Your refund of ₹350 is on its way."}},
]


def test_the_agent_asks_for_the_missing_order_number_then_refunds(shop: Shop) -> None:
    store = MemoryStore()
    policy = ScriptedPolicy(SCRIPT)
    customer = ScriptedCustomer(["It is order A-1001, sorry"])
    engine = Engine(build_conversation(shop), store, policy)
    run = engine.start(KETTLE, user="asha")
    assert (run.status, run.state) == ("awaiting_customer", "collecting")
    run = talk(engine, run, customer)
    assert run.status == "done"
    assert customer.asked[0].message == "Which order is it? Please give me its number."
    assert policy.views[1].messages[-1]["content"] == "It is order A-1001, sorry"
    policy.assert_finished()
    assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [("A-1001", 35_000)]
    assert audit(store, run.run_id).ok


@pytest.mark.parametrize("goal, asked", [
    (KETTLE, [ASK_ORDER]),
    ("Order A-1001: the kettle arrived broken", []),
], ids=["no-order-number", "order-number-given"])
def test_the_clerk_asks_only_when_the_order_is_missing(shop: Shop, goal: str,
                                                       asked: list[str]) -> None:
    customer = ScriptedCustomer(["A-1001"])
    engine = Engine(build_conversation(shop), MemoryStore(), chat_clerk)
    run = talk(engine, engine.start(goal, user="asha"), customer)
    assert run.status == "done"
    assert [a.message for a in customer.asked] == asked
    assert [p["order_id"] for p in shop.ledger()] == ["A-1001"]


def test_the_conversation_is_the_refund_workflow_with_one_setting(shop: Shop) -> None:
    refund, chat = build(shop).behaviour(), build_conversation(shop).behaviour()
    assert build(shop).definition_hash == "28dc253ca4e5cf27"
    assert {k for k in set(refund) | set(chat) if refund.get(k) != chat.get(k)} == {
        "name", "asks_customer", "instructions"}
    assert chat["asks_customer"] == ["collecting"]
    assert verify(build_conversation(shop)).ok
