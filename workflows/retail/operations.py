"""The 16 retail tools of τ²-bench as functions over one database transaction.

Each function takes a :class:`Tx` and τ²-bench's arguments, and returns what τ²-bench's
tool returns (orders, users, products and items in τ²-bench's shape, dollars as
floats), or raises ``ValueError`` with τ²-bench's message. They check what τ²-bench's
tools check (status, counts, same-product swaps, payment methods, gift-card balances,
cancel reasons), and no more: what the written policy adds (authentication, ownership,
confirmation, nothing after an item modification) is the workflow's (see
:mod:`workflows.retail.rules`). The expected databases of the benchmark are these same
functions applied to a fresh database.

One deliberate difference: ``modify_pending_order_items`` gives each changed item the
price and options of its own new variant. τ²-bench's tool gives every changed item
those of the *last* new variant (sierra-research/tau2-bench issues 317 and 318, fix
proposed in pull request 322); ``upstream_price_bug=True`` reproduces that, to compare
with τ²-bench's own expected databases.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from decimal import (
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Decimal,
    Inexact,
    InvalidOperation,
    localcontext,
)
from typing import Any, Protocol

from workflows.retail.shapes import Doc, tau2_order, tau2_product, tau2_user, tau2_variant

#: The reasons a pending order may be cancelled for.
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


class Tx(Protocol):
    """One transaction on the retail database: documents in, documents out."""

    def user(self, user_id: str) -> Doc | None: ...
    def order(self, order_id: str) -> Doc | None: ...
    def product(self, product_id: str) -> Doc | None: ...
    def product_names(self) -> dict[str, str]: ...
    def product_of_item(self, item_id: str) -> str | None: ...
    def user_by_email(self, email: str) -> str | None: ...
    def user_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str | None: ...
    def put_user(self, doc: Doc) -> None: ...
    def put_order(self, doc: Doc) -> None: ...


# -- lookups, with τ²-bench's errors ---------------------------------------------------------

def get_order(tx: Tx, order_id: str) -> Doc:
    order = tx.order(order_id)
    if order is None:
        raise ValueError("Order not found")
    return order


def get_user(tx: Tx, user_id: str) -> Doc:
    user = tx.user(user_id)
    if user is None:
        raise ValueError("User not found")
    return user


def _product(tx: Tx, product_id: str) -> Doc:
    product = tx.product(product_id)
    if product is None:
        raise ValueError("Product not found")
    return product


def _variant(tx: Tx, product_id: str, item_id: str) -> Doc:
    variants = _product(tx, product_id)["variants"]
    if item_id not in variants:
        raise ValueError("Variant not found")
    variant: Doc = variants[item_id]
    return variant


def payment_method(user: Doc, payment_method_id: str) -> Doc:
    methods = user["payment_methods"]
    if payment_method_id not in methods:
        raise ValueError("Payment method not found")
    method: Doc = methods[payment_method_id]
    return method


def is_gift_card(method: Doc) -> bool:
    return bool(method.get("source") == "gift_card")


def _count_check(order: Doc, item_ids: list[str], message: Callable[[str], str]) -> None:
    """Every item id listed (duplicates included) is in the order that many times."""
    present = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise ValueError(message(item_id))


def _first_item(order: Doc, item_id: str) -> Doc:
    item = next((i for i in order["items"] if i["item_id"] == item_id), None)
    if item is None:
        raise ValueError(f"Item {item_id} not found")
    return item


def _swap_difference(tx: Tx, order: Doc, item_ids: list[str], new_item_ids: list[str],
                     *, distinct: bool) -> tuple[int, list[Doc]]:
    """The price difference in cents of swapping each item for its new variant."""
    diff, variants = 0, []
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        if distinct and item_id == new_item_id:
            raise ValueError("The new item id should be different from the old item id")
        item = _first_item(order, item_id)
        variant = _variant(tx, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ValueError(f"New item {new_item_id} not found or available")
        diff += variant["price_cents"] - item["price_cents"]
        variants.append(variant)
    return diff, variants


def _adjust_gift_card(tx: Tx, user: Doc, method_id: str, delta_cents: int) -> None:
    method = payment_method(user, method_id)
    if is_gift_card(method):
        method["balance_cents"] += delta_cents
        tx.put_user(user)


# -- reads ------------------------------------------------------------------------------------

def find_user_id_by_email(tx: Tx, email: str) -> str:
    user_id = tx.user_by_email(email)
    if user_id is None:
        raise ValueError("User not found")
    return user_id


def find_user_id_by_name_zip(tx: Tx, first_name: str, last_name: str, zip: str) -> str:
    user_id = tx.user_by_name_zip(first_name, last_name, zip)
    if user_id is None:
        raise ValueError("User not found")
    return user_id


def get_user_details(tx: Tx, user_id: str) -> Doc:
    return tau2_user(get_user(tx, user_id))


def get_order_details(tx: Tx, order_id: str) -> Doc:
    return tau2_order(get_order(tx, order_id))


def get_product_details(tx: Tx, product_id: str) -> Doc:
    return tau2_product(_product(tx, product_id))


def get_item_details(tx: Tx, item_id: str) -> Doc:
    product_id = tx.product_of_item(item_id)
    if product_id is None:
        raise ValueError("Item not found")
    return tau2_variant(_variant(tx, product_id, item_id))


def list_all_product_types(tx: Tx) -> str:
    return json.dumps(tx.product_names(), sort_keys=True)


# -- general ----------------------------------------------------------------------------------

#: Digits kept through a calculation: every sum, difference and product of the numbers
#: the desk works with is exact; a quotient is exact to far below the cent it is rounded to.
_DIGITS = 400


def _power(base: Decimal, exponent: Decimal) -> Decimal:
    # What the characters allow (``**``), bounded: ``9 ** 9 ** 9`` must not stall the desk.
    if abs(exponent) > 64:
        raise OverflowError("exponent too large")
    return base ** exponent


def _divide(a: Decimal, b: Decimal) -> Decimal:
    if not b:
        raise ZeroDivisionError("division by zero")  # 0 / 0 too, as Python says it
    return a / b


def _floor_divide(a: Decimal, b: Decimal) -> Decimal:
    # Python's ``//`` floors (``Decimal``'s truncates toward zero).
    return _divide(a, b).to_integral_value(rounding=ROUND_FLOOR)


_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: _divide, ast.FloorDiv: _floor_divide, ast.Pow: _power,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> Decimal:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return Decimal(str(node.value))  # as written: 0.1 is one tenth, not a binary float
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        result: Decimal = _OPERATORS[type(node.op)](_evaluate(node.left),
                                                    _evaluate(node.right))
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        value: Decimal = _OPERATORS[type(node.op)](_evaluate(node.operand))
        return value
    raise ValueError("Invalid expression")


def _shown(value: Decimal) -> str:
    """``value`` to the cent (half to even), written as τ²-bench writes a float: at least
    one decimal, no trailing zeros (``11.0``, ``6.67``, ``0.5``)."""
    text = format(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN), "f")
    text = text.rstrip("0")
    return text + "0" if text.endswith(".") else text


def calculate(tx: Tx | None, expression: str) -> str:
    """Arithmetic on numbers with ``+ - * / // **`` and parentheses, rounded to 2 decimals
    (τ²-bench evaluates the same characters with Python's ``eval``), computed exactly in
    decimal: ``(2**53+1)-2**53`` is ``1.0``, ``0.1 + 0.2`` is ``0.3``."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    try:
        tree = ast.parse(expression, mode="eval")
        with localcontext() as context:
            context.prec = _DIGITS
            context.traps[Inexact] = False
            return _shown(_evaluate(tree))
    except (SyntaxError, ZeroDivisionError, OverflowError, RecursionError,
            TypeError, InvalidOperation) as exc:
        raise ValueError(f"Invalid expression: {type(exc).__name__}") from None


def transfer_to_human_agents(tx: Tx | None, summary: str) -> str:
    return "Transfer successful"


# -- writes -----------------------------------------------------------------------------------

def cancel_pending_order(tx: Tx, order_id: str, reason: str) -> Doc:
    order = get_order(tx, order_id)
    if order["status"] != "pending":
        raise ValueError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ValueError("Invalid reason")
    user = get_user(tx, order["user_id"])
    refunds = []
    for payment in order["payment_history"]:
        refunds.append({"transaction_type": "refund", "amount_cents": payment["amount_cents"],
                        "payment_method_id": payment["payment_method_id"]})
        _adjust_gift_card(tx, user, payment["payment_method_id"], payment["amount_cents"])
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    tx.put_order(order)
    return tau2_order(order)


def exchange_delivered_order_items(tx: Tx, order_id: str, item_ids: list[str],
                                   new_item_ids: list[str], payment_method_id: str) -> Doc:
    order = get_order(tx, order_id)
    if order["status"] != "delivered":
        raise ValueError("Non-delivered order cannot be exchanged")
    _count_check(order, item_ids, lambda i: f"Number of {i} not found.")
    if len(item_ids) != len(new_item_ids):
        raise ValueError("The number of items to be exchanged should match.")
    diff, _ = _swap_difference(tx, order, item_ids, new_item_ids, distinct=False)
    method = payment_method(get_user(tx, order["user_id"]), payment_method_id)
    if is_gift_card(method) and method["balance_cents"] < diff:
        raise ValueError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference_cents"] = diff
    tx.put_order(order)
    return tau2_order(order)


def _new_address(address1: str, address2: str, city: str, state: str, country: str,
                 zip: str) -> Doc:
    return {"address1": address1, "address2": address2, "city": city, "country": country,
            "state": state, "zip": zip}


def modify_pending_order_address(tx: Tx, order_id: str, address1: str, address2: str,
                                 city: str, state: str, country: str, zip: str) -> Doc:
    order = get_order(tx, order_id)
    if "pending" not in order["status"]:
        raise ValueError("Non-pending order cannot be modified")
    order["address"] = _new_address(address1, address2, city, state, country, zip)
    tx.put_order(order)
    return tau2_order(order)


def modify_pending_order_items(tx: Tx, order_id: str, item_ids: list[str],
                               new_item_ids: list[str], payment_method_id: str, *,
                               upstream_price_bug: bool = False) -> Doc:
    order = get_order(tx, order_id)
    if order["status"] != "pending":
        raise ValueError("Non-pending order cannot be modified")
    _count_check(order, item_ids, lambda i: f"{i} not found")
    if len(item_ids) != len(new_item_ids):
        raise ValueError("The number of items to be exchanged should match")
    diff, variants = _swap_difference(tx, order, item_ids, new_item_ids, distinct=True)
    user = get_user(tx, order["user_id"])
    method = payment_method(user, payment_method_id)
    if is_gift_card(method) and method["balance_cents"] < diff:
        raise ValueError("Insufficient gift card balance to pay for the new item")
    order["payment_history"].append({
        "transaction_type": "payment" if diff > 0 else "refund", "amount_cents": abs(diff),
        "payment_method_id": payment_method_id})
    _adjust_gift_card(tx, user, payment_method_id, -diff)
    for item_id, new_item_id, variant in zip(item_ids, new_item_ids, variants, strict=True):
        item = _first_item(order, item_id)
        source = variants[-1] if upstream_price_bug else variant
        item["item_id"] = new_item_id
        item["price_cents"] = source["price_cents"]
        item["options"] = dict(source["options"])
    order["status"] = "pending (item modified)"
    tx.put_order(order)
    return tau2_order(order)


def modify_pending_order_payment(tx: Tx, order_id: str, payment_method_id: str) -> Doc:
    order = get_order(tx, order_id)
    if "pending" not in order["status"]:
        raise ValueError("Non-pending order cannot be modified")
    user = get_user(tx, order["user_id"])
    method = payment_method(user, payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ValueError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ValueError("The new payment method should be different from the current one")
    amount = history[0]["amount_cents"]
    if is_gift_card(method) and method["balance_cents"] < amount:
        raise ValueError("Insufficient gift card balance to pay for the order")
    history.extend([
        {"transaction_type": "payment", "amount_cents": amount,
         "payment_method_id": payment_method_id},
        {"transaction_type": "refund", "amount_cents": amount, "payment_method_id": old_id},
    ])
    _adjust_gift_card(tx, user, payment_method_id, -amount)
    _adjust_gift_card(tx, user, old_id, amount)
    tx.put_order(order)
    return tau2_order(order)


def modify_user_address(tx: Tx, user_id: str, address1: str, address2: str, city: str,
                        state: str, country: str, zip: str) -> Doc:
    user = get_user(tx, user_id)
    user["address"] = _new_address(address1, address2, city, state, country, zip)
    tx.put_user(user)
    return tau2_user(user)


def return_delivered_order_items(tx: Tx, order_id: str, item_ids: list[str],
                                 payment_method_id: str) -> Doc:
    order = get_order(tx, order_id)
    if order["status"] != "delivered":
        raise ValueError("Non-delivered order cannot be returned")
    method = payment_method(get_user(tx, order["user_id"]), payment_method_id)
    if (not is_gift_card(method)
            and payment_method_id != order["payment_history"][0]["payment_method_id"]):
        raise ValueError("Payment method should be the original payment method")
    _count_check(order, item_ids, lambda i: "Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    tx.put_order(order)
    return tau2_order(order)


#: Every tool: name → function(tx, **arguments).
OPERATIONS: dict[str, Callable[..., Any]] = {
    "calculate": calculate,
    "cancel_pending_order": cancel_pending_order,
    "exchange_delivered_order_items": exchange_delivered_order_items,
    "find_user_id_by_email": find_user_id_by_email,
    "find_user_id_by_name_zip": find_user_id_by_name_zip,
    "get_item_details": get_item_details,
    "get_order_details": get_order_details,
    "get_product_details": get_product_details,
    "get_user_details": get_user_details,
    "list_all_product_types": list_all_product_types,
    "modify_pending_order_address": modify_pending_order_address,
    "modify_pending_order_items": modify_pending_order_items,
    "modify_pending_order_payment": modify_pending_order_payment,
    "modify_user_address": modify_user_address,
    "return_delivered_order_items": return_delivered_order_items,
    "transfer_to_human_agents": transfer_to_human_agents,
}
#: The tools that change the database.
WRITES = frozenset({
    "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
    "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
    "return_delivered_order_items",
})
