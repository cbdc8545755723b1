"""The retail tools behave as τ²-bench's: same results, same checks, same messages, and
the same expected databases (but for the item-price fix, which is named and optional)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from paths import ROOT

from workflows.retail import data
from workflows.retail.database import MemoryRetail
from workflows.retail.operations import OPERATIONS, WRITES, calculate

EXPECTED = json.loads((ROOT / "bench" / "taubench_expected.json").read_text())
TASKS = {t["id"]: t for t in data.tasks()}


def expected(task_id: str, *, upstream_price_bug: bool = False) -> str:
    db = MemoryRetail(upstream_price_bug=upstream_price_bug)
    for action in TASKS[task_id]["evaluation_criteria"]["actions"] or []:
        try:
            db.call(action["name"], action["arguments"])
        except ValueError:
            pass  # a failed call changes nothing, as in τ²-bench
    return db.hash()


def test_the_sixteen_tools_are_tau2_benchs() -> None:
    assert sorted(OPERATIONS) == sorted([
        "calculate", "cancel_pending_order", "exchange_delivered_order_items",
        "find_user_id_by_email", "find_user_id_by_name_zip", "get_item_details",
        "get_order_details", "get_product_details", "get_user_details",
        "list_all_product_types", "modify_pending_order_address", "modify_pending_order_items",
        "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
        "transfer_to_human_agents"])
    assert len(WRITES) == 7


# Tasks whose reference actions cover every write, failed calls (2, 64, 105), the items
# fix (21, 36), and τ²-bench's float noise in item modifications (15, 3).
@pytest.mark.parametrize("task_id", ["0", "2", "3", "15", "16", "21", "22", "36", "64",
                                     "105"])
def test_upstream_mode_reproduces_tau2_benchs_own_expected_database(task_id: str) -> None:
    assert expected(task_id, upstream_price_bug=True) == \
        EXPECTED["tasks"][task_id]["hash_in_cents"]


def test_the_item_fix_gives_each_item_its_own_variant() -> None:
    """Task 21 swaps running shoes and a keyboard in one call: τ²-bench's tool gives both
    the keyboard's price and options; the desk gives each its own."""
    args = TASKS["21"]["evaluation_criteria"]["actions"][-1]["arguments"]
    assert args["new_item_ids"] == ["4107812777", "1421289881"]
    fixed, bugged = MemoryRetail(), MemoryRetail(upstream_price_bug=True)
    items = {}
    for db in (fixed, bugged):
        items[db] = db.call("modify_pending_order_items", args)["items"]
    shoes = fixed.call("get_item_details", {"item_id": "4107812777"})
    keyboard = fixed.call("get_item_details", {"item_id": "1421289881"})
    by_id = {i["item_id"]: i for i in items[fixed]}
    assert (by_id["4107812777"]["price"], by_id["4107812777"]["options"]) == \
        (shoes["price"], shoes["options"])
    assert (by_id["1421289881"]["price"], by_id["1421289881"]["options"]) == \
        (keyboard["price"], keyboard["options"])
    bugged_shoes = {i["item_id"]: i for i in items[bugged]}["4107812777"]
    assert (bugged_shoes["price"], bugged_shoes["options"]) == \
        (keyboard["price"], keyboard["options"])
    # Both charge the same difference: only the items' records differ.
    assert [p for p in fixed.dump()["orders"]["#W9911714"]["payment_history"]] == \
        [p for p in bugged.dump()["orders"]["#W9911714"]["payment_history"]]
    assert expected("21") != EXPECTED["tasks"]["21"]["hash_in_cents"]


def call_error(tool: str, **args: Any) -> str:
    with pytest.raises(ValueError) as info:
        MemoryRetail().call(tool, args)
    return str(info.value)


@pytest.mark.parametrize(("tool", "args", "message"), [
    ("find_user_id_by_email", {"email": "nobody@example.com"}, "User not found"),
    ("get_product_details", {"product_id": "1"}, "Product not found"),
    ("get_item_details", {"item_id": "1"}, "Item not found"),
    ("cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"},
     "Non-pending order cannot be cancelled"),
    ("cancel_pending_order", {"order_id": "#W6247578", "reason": "changed my mind"},
     "Invalid reason"),
    ("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["4983901480"],
                                      "payment_method_id": "paypal_1"},
     "Payment method not found"),
    ("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["1"],
                                      "payment_method_id": "credit_card_9513926"},
     "Some item not found"),
    ("exchange_delivered_order_items", {"order_id": "#W2378156",
                                        "item_ids": ["4983901480"],
                                        "new_item_ids": ["4983901480", "1"],
                                        "payment_method_id": "credit_card_9513926"},
     "The number of items to be exchanged should match."),
    ("modify_pending_order_items", {"order_id": "#W6247578", "item_ids": ["3799046073"],
                                    "new_item_ids": ["3799046073"],
                                    "payment_method_id": "credit_card_9513926"},
     "The new item id should be different from the old item id"),
    ("modify_pending_order_payment", {"order_id": "#W6247578",
                                      "payment_method_id": "credit_card_9513926"},
     "The new payment method should be different from the current one"),
])
def test_tau2_benchs_checks_and_messages(tool: str, args: dict[str, Any], message: str) -> None:
    assert call_error(tool, **args) == message


def test_calculate_is_arithmetic_only() -> None:
    assert calculate(None, "(2 + 3) * 4 / 3") == "6.67"
    assert calculate(None, "-1.5 + 2") == "0.5"
    assert calculate(None, "2 ** 3 + 7 // 2") == "11.0"
    for bad, why in [("__import__('os')", "Invalid characters in expression"),
                     ("2 **", "Invalid expression: SyntaxError"),
                     ("9 ** 9 ** 9", "Invalid expression: OverflowError"),
                     ("(1)(2)", "Invalid expression"),
                     ("1 / 0", "Invalid expression: ZeroDivisionError"),
                     ("(1 +", "Invalid expression: SyntaxError")]:
        with pytest.raises(ValueError) as info:
            calculate(None, bad)
        assert str(info.value) == why


@pytest.mark.parametrize(("expression", "shown"), [
    ("(2**53+1)-2**53", "1.0"), ("2 ** 53 + 1", "9007199254740993.0"), ("0.1 + 0.2", "0.3"),
    ("1.1 * 3", "3.3"), ("-7 // 2", "-4.0"), ("7 // -2", "-4.0"), ("100 - 99.99", "0.01"),
    ("2 ** 0.5", "1.41"), ("10 ** 20 + 0.01", "100000000000000000000.01"),
])
def test_calculate_computes_exactly_in_decimal(expression: str, shown: str) -> None:
    """No binary-float artefacts: τ²-bench's ``eval`` keeps integers exact too."""
    assert calculate(None, expression) == shown


def test_calculate_says_a_division_by_zero_as_python_does() -> None:
    for bad in ("1 / 0", "0 / 0", "1 // 0"):
        with pytest.raises(ValueError, match="Invalid expression: ZeroDivisionError"):
            calculate(None, bad)


def test_a_modification_after_items_were_modified_is_let_through_by_tau2_benchs_tools() -> None:
    """What the policy forbids and τ²-bench's tools allow: the desk's rules refuse it
    (tests/runtime/test_retail_desk.py); the tools alone, like τ²-bench's, do not."""
    db = MemoryRetail()
    order = db.call("get_order_details", {"order_id": "#W6247578"})
    item = order["items"][0]
    product = db.call("get_product_details", {"product_id": item["product_id"]})
    other = next(v for k, v in product["variants"].items()
                 if k != item["item_id"] and v["available"])
    db.call("modify_pending_order_items", {"order_id": "#W6247578",
                                           "item_ids": [item["item_id"]],
                                           "new_item_ids": [other["item_id"]],
                                           "payment_method_id": "credit_card_9513926"})
    changed = db.call("modify_pending_order_address", {
        "order_id": "#W6247578", "address1": "1 Main", "address2": "", "city": "Austin",
        "state": "TX", "country": "USA", "zip": "73301"})
    assert changed["status"] == "pending (item modified)"
    assert changed["address"]["city"] == "Austin"
