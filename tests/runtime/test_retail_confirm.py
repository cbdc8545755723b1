"""What the retail customer confirms is what runs: the text they say yes to is rendered by
fsm from the exact call bound to the yes, whatever the model wrote with its proposal."""

from __future__ import annotations

from typing import Any

import pytest

from fsm import Engine, MemoryStore
from fsm.testing import ScriptedPolicy, talk
from workflows.retail import build
from workflows.retail.confirm import confirmation_text
from workflows.retail.database import MemoryRetail

EMAIL = "olivia.ito5204@example.com"
#: Two pending orders of olivia_ito_3591.
ORDER_A, ORDER_B = "#W5442520", "#W7941031"
AUTH = {"tool": "find_user_id_by_email", "args": {"email": EMAIL}}
FINISH = {"tool": "advance", "args": {"event": "finish"}}
CANCEL_B = {"order_id": ORDER_B, "reason": "no longer needed"}


def read(order: str) -> dict[str, Any]:
    return {"tool": "get_order_details", "args": {"order_id": order}}


def test_the_customer_is_shown_the_call_bound_to_the_yes_not_the_models_words() -> None:
    """The reviewer's case: the model asks about order A while its proposal cancels B. The
    customer, who wants A cancelled, answers what they are shown."""
    db = MemoryRetail()
    shown: list[str] = []

    def customer(request: Any) -> str:
        shown.append(request.message)
        return "yes" if ORDER_A in request.message else "no, that is another order"

    policy = ScriptedPolicy([
        AUTH, read(ORDER_A), read(ORDER_B),
        {"tool": "advance", "text": f"Shall I cancel order {ORDER_A}? Yes or no?",
         "args": {"event": "propose", "tool": "cancel_pending_order", "args": CANCEL_B}},
        {"tool": "cancel_pending_order", "args": CANCEL_B}, FINISH])
    with Engine(build(db), MemoryStore(), policy) as engine:
        run = talk(engine, engine.start_conversation("cancel an order", user="o").run,
                   customer)
    assert shown == [confirmation_text("cancel_pending_order", CANCEL_B, {})]
    assert ORDER_B in shown[0] and ORDER_A not in shown[0]
    # The customer said no to what they were shown: order B was not cancelled.
    assert db.call("get_order_details", {"order_id": ORDER_B})["status"] == "pending"
    assert db.writes() == [] and run.status == "done"


def test_each_write_is_rendered_with_its_ids_and_payment_method() -> None:
    swap = {"order_id": ORDER_A, "item_ids": ["1"], "new_item_ids": ["2"],
            "payment_method_id": "gift_card_7"}
    text = confirmation_text("exchange_delivered_order_items", swap, {})
    assert text.startswith(f"Exchange in delivered order {ORDER_A}: item 1 for item 2;")
    assert "gift_card_7" in text
    ret = confirmation_text("return_delivered_order_items",
                            {"order_id": ORDER_A, "item_ids": ["1", "3"],
                             "payment_method_id": "paypal_1"}, {})
    assert ret.startswith(f"Return item(s) 1, 3 of delivered order {ORDER_A}; the refund "
                          "goes to paypal_1.")


DELIVERED, PAYPAL = "#W5866402", "paypal_8049766"


def first_item(db: MemoryRetail, order: str) -> str:
    return str(db.call("get_order_details", {"order_id": order})["items"][0]["item_id"])


def propose_then_write(tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"tool": "advance", "text": "Yes?",
             "args": {"event": "propose", "tool": tool, "args": args}},
            {"tool": tool, "args": args}, FINISH]


@pytest.mark.parametrize(("tool", "order", "swap", "why"), [
    ("exchange_delivered_order_items", DELIVERED, "self",
     "would be swapped for themselves; a new item must be another variant"),
    ("modify_pending_order_items", ORDER_A, "self",
     "would be swapped for themselves; a new item must be another variant"),
    ("modify_pending_order_items", ORDER_A, "empty", "names no items; nothing would change"),
    ("exchange_delivered_order_items", DELIVERED, "empty",
     "names no items; nothing would change"),
])
def test_a_swap_of_nothing_or_of_an_item_for_itself_is_refused_before_the_customer_is_asked(
        tool: str, order: str, swap: str, why: str) -> None:
    db = MemoryRetail()
    item = first_item(db, order)
    items = [item] if swap == "self" else []
    args = {"order_id": order, "item_ids": items, "new_item_ids": items,
            "payment_method_id": PAYPAL if order == DELIVERED else "credit_card_9753331"}
    asked: list[Any] = []

    def customer(request: Any) -> str:
        asked.append(request)
        return "yes"

    store = MemoryStore()
    policy = ScriptedPolicy([AUTH, read(order), *propose_then_write(tool, args)])
    with Engine(build(db), store, policy) as engine:
        run = talk(engine, engine.start_conversation("swap", user="o").run, customer)
    assert asked == [] and db.writes() == []
    assert db.call("get_order_details", {"order_id": order})["status"] in (
        "pending", "delivered")
    refused = [e.reason or "" for e in store.events(run.run_id) if e.kind == "refusal"]
    assert refused and refused[0].endswith(why)


def test_an_item_kept_beside_one_that_changes_passes_the_guard() -> None:
    from workflows.retail.rules import problem

    order = {"user_id": "u", "status": "pending", "paid_with": "c"}
    args = {"order_id": ORDER_A, "item_ids": ["1", "2"], "new_item_ids": ["1", "3"],
            "payment_method_id": "c"}
    assert problem("u", "modify_pending_order_items", args, order, []) is None
    assert "for themselves" in (problem("u", "modify_pending_order_items",
                                        {**args, "new_item_ids": ["1", "2"]}, order, []) or "")
