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
    assert len(shown) == 1 and shown[0].startswith(
        f"Cancel order {ORDER_B} (reason: no longer needed); its payment of $2,198.09 is "
        "refunded")
    assert ORDER_A not in shown[0]
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


GIFT, CARD = "gift_card_7794233", "credit_card_9753331"  # the gift card holds $56.00
PROFILE = {"tool": "get_user_details", "args": {"user_id": "olivia_ito_3591"}}


def refused_before_asking(db: MemoryRetail, actions: list[dict[str, Any]]) -> str:
    """The first refusal of a conversation whose customer would say yes to anything,
    checking they were never asked and nothing was written."""
    asked: list[Any] = []

    def customer(request: Any) -> str:
        asked.append(request)
        return "yes"

    store = MemoryStore()
    with Engine(build(db), store, ScriptedPolicy([AUTH, *actions])) as engine:
        run = talk(engine, engine.start_conversation("change", user="o").run, customer)
    assert asked == [] and db.writes() == []
    return next(e.reason or "" for e in store.events(run.run_id) if e.kind == "refusal")


def other_products_item(db: MemoryRetail, product: str, but: str) -> str:
    found = db.call("get_product_details", {"product_id": product})["variants"]
    return next(k for k in found if k != but)


def test_a_gift_card_short_of_the_order_is_refused_before_the_customer_is_asked() -> None:
    args = {"order_id": ORDER_A, "payment_method_id": GIFT}
    why = refused_before_asking(MemoryRetail(), [
        read(ORDER_A), PROFILE, *propose_then_write("modify_pending_order_payment", args)])
    assert why.endswith("gift card 'gift_card_7794233' holds $56.00, short of the order's "
                        "$663.85")


def test_another_customers_payment_method_is_refused_before_the_customer_is_asked() -> None:
    args = {"order_id": ORDER_A, "payment_method_id": "paypal_1234567"}
    why = refused_before_asking(MemoryRetail(), [
        read(ORDER_A), PROFILE, *propose_then_write("modify_pending_order_payment", args)])
    assert "'paypal_1234567' is not a payment method of the customer" in why


def test_an_item_of_another_product_is_refused_before_the_customer_is_asked() -> None:
    db = MemoryRetail()
    # Item 3330317167 of order A is a 5713490933; the new one is a 9743693396.
    new = other_products_item(db, "9743693396", but="3111466194")
    args = {"order_id": ORDER_A, "item_ids": ["3330317167"], "new_item_ids": [new],
            "payment_method_id": CARD}
    why = refused_before_asking(db, [
        read(ORDER_A), {"tool": "get_product_details", "args": {"product_id": "9743693396"}},
        *propose_then_write("modify_pending_order_items", args)])
    assert f"item {new} is a variant of product 9743693396, not of item 3330317167's " \
           "product 5713490933" in why


def test_a_gift_card_short_of_a_price_difference_is_refused_before_the_customer_is_asked(
        ) -> None:
    # Item 1355937109 of order B ($1985.30) for its variant 4510078629 ($2127.62).
    args = {"order_id": ORDER_B, "item_ids": ["1355937109"], "new_item_ids": ["4510078629"],
            "payment_method_id": GIFT}
    why = refused_before_asking(MemoryRetail(), [
        read(ORDER_B), PROFILE,
        {"tool": "get_product_details", "args": {"product_id": "6066914160"}},
        *propose_then_write("modify_pending_order_items", args)])
    assert why.endswith("gift card 'gift_card_7794233' holds $56.00, short of the price "
                        "difference $142.32")


def shown_for(db: MemoryRetail, actions: list[dict[str, Any]]) -> list[str]:
    """What a customer who says no to everything is shown, in order."""
    shown: list[str] = []

    def customer(request: Any) -> str:
        shown.append(request.message)
        return "no"

    with Engine(build(db), MemoryStore(), ScriptedPolicy([AUTH, *actions])) as engine:
        talk(engine, engine.start_conversation("change", user="o").run, customer)
    assert db.writes() == []
    return shown


def propose(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool": "advance", "text": "Shall I?",
            "args": {"event": "propose", "tool": tool, "args": args}}


def test_the_customer_is_shown_the_amounts_of_the_call_from_the_rows_read() -> None:
    """Each write that moves money names the amount, computed by fsm from what the run read
    (τ²-bench's prices: order B's item 1355937109 is $1,985.30, its variant 4510078629
    $2,127.62; order A was paid $663.85)."""
    db = MemoryRetail()
    swap = {"order_id": ORDER_B, "item_ids": ["1355937109"], "new_item_ids": ["4510078629"],
            "payment_method_id": CARD}
    back = {**swap, "item_ids": ["4510078629"], "new_item_ids": ["1355937109"]}
    product = {"tool": "get_product_details", "args": {"product_id": "6066914160"}}
    shown = shown_for(db, [
        read(ORDER_A), read(ORDER_B), product,
        propose("cancel_pending_order", {"order_id": ORDER_A, "reason": "no longer needed"}),
        propose("modify_pending_order_payment", {"order_id": ORDER_A,
                                                 "payment_method_id": CARD}),
        propose("modify_pending_order_items", swap), FINISH])
    assert "its payment of $663.85 is refunded" in shown[0]
    assert f"Pay pending order {ORDER_A} ($663.85) with {CARD} instead" in shown[1]
    assert f"you pay the price difference of $142.32 with {CARD}" in shown[2]
    # Without the new item's price read, no amount is made up.
    unread = shown_for(MemoryRetail(), [read(ORDER_B),
                                        propose("modify_pending_order_items", swap), FINISH])
    assert "the new items' prices were not read" in unread[0] and "$" not in unread[0]
    from workflows.retail.rules import order_summary, variants
    facts = {"orders": {ORDER_B: order_summary({**db.call("get_order_details",
                                                          {"order_id": ORDER_B}),
                                                "items": [{"item_id": "4510078629",
                                                           "product_id": "6066914160",
                                                           "price": 2127.62}]})},
             "variants": variants(db.call("get_product_details",
                                          {"product_id": "6066914160"}))}
    assert "the price difference of $142.32 is refunded to" in confirmation_text(
        "modify_pending_order_items", back, facts)


def test_a_return_names_the_refund_of_the_items_returned() -> None:
    db = MemoryRetail()
    order = db.call("get_order_details", {"order_id": DELIVERED})
    items = [i["item_id"] for i in order["items"][:2]]
    total = sum(round(i["price"] * 100) for i in order["items"][:2])
    shown = shown_for(db, [read(DELIVERED), propose(
        "return_delivered_order_items",
        {"order_id": DELIVERED, "item_ids": items, "payment_method_id": PAYPAL}), FINISH])
    assert f"the refund of ${total // 100:,}.{total % 100:02d} goes to {PAYPAL}" in shown[0]
