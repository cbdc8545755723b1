"""What the customer confirms: each write in the desk's words, rendered from the exact call.

:func:`confirmation_text` is the retail desk's presentation summary: fsm shows it to the
customer in place of whatever the model wrote with its proposal, so the order, items,
payment method and address the customer says yes to are those of the call bound to the
yes (a changed call is a new proposal, asked again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fsm import Presentation

_ASK = " Yes to go ahead, no to stop."


def _address(args: Mapping[str, Any]) -> str:
    parts = [args.get("address1"), args.get("address2"), args.get("city"), args.get("state"),
             args.get("zip"), args.get("country")]
    return ", ".join(str(p) for p in parts if p)


def _swaps(args: Mapping[str, Any]) -> str:
    pairs = zip(args.get("item_ids") or [], args.get("new_item_ids") or [], strict=False)
    return ", ".join(f"item {old} for item {new}" for old, new in pairs)


def _items(args: Mapping[str, Any]) -> str:
    return ", ".join(str(i) for i in args.get("item_ids") or [])


def confirmation_text(tool: str | None, args: dict[str, Any],
                      facts: Mapping[str, Any]) -> str:
    """The proposal ``tool(args)`` as the customer confirms it (never the model's words)."""
    order = args.get("order_id")
    method = args.get("payment_method_id")
    if tool == "cancel_pending_order":
        return (f"Cancel order {order} (reason: {args.get('reason')}); the payment is "
                f"refunded to its original payment method.{_ASK}")
    if tool == "modify_pending_order_address":
        return f"Ship pending order {order} to {_address(args)}.{_ASK}"
    if tool == "modify_pending_order_payment":
        return f"Pay pending order {order} with {method} instead.{_ASK}"
    if tool == "modify_pending_order_items":
        return (f"Change pending order {order}: {_swaps(args)}; the price difference is "
                f"paid or refunded with {method}. The items of an order are modified only "
                f"once: nothing else of it can change after.{_ASK}")
    if tool == "exchange_delivered_order_items":
        return (f"Exchange in delivered order {order}: {_swaps(args)}; the price difference "
                f"is paid or refunded with {method}.{_ASK}")
    if tool == "return_delivered_order_items":
        return (f"Return item(s) {_items(args)} of delivered order {order}; the refund goes "
                f"to {method}.{_ASK}")
    if tool == "modify_user_address":
        return f"Change the default address of user {args.get('user_id')} to " \
               f"{_address(args)}.{_ASK}"
    return f"{tool} {args}"


PRESENTATION = Presentation(summary=confirmation_text,
                            subject=lambda t, a, f: a.get("order_id") or a.get("user_id"))
