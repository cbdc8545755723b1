"""What the customer confirms: each write in the desk's words, rendered from the exact call.

:func:`confirmation_text` is the retail desk's presentation summary: fsm shows it to the
customer in place of whatever the model wrote with its proposal, so the order, items,
payment method and address the customer says yes to are those of the call bound to the
yes (a changed call is a new proposal, asked again). The amounts shown (the payment a
cancellation refunds, a return's refund, a swap's price difference) are computed from the
rows the run read; an amount the run has not read is said to be unknown, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fsm import Presentation
from workflows.retail.rules import items_total, swap_difference
from workflows.retail.shapes import money

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


def _order(args: Mapping[str, Any], facts: Mapping[str, Any]) -> Mapping[str, Any]:
    """The order the call names, as the run read it (empty when it was not read)."""
    return (facts.get("orders") or {}).get(args.get("order_id")) or {}


def _difference(args: Mapping[str, Any], facts: Mapping[str, Any]) -> str:
    """What a swap costs, from the prices the run read: paid, refunded, or none."""
    method = args.get("payment_method_id")
    diff = swap_difference(facts, args, _order(args, facts))
    if diff is None:
        return (f"the price difference (the new items' prices were not read) is paid or "
                f"refunded with {method}")
    if diff > 0:
        return f"you pay the price difference of {money(diff)} with {method}"
    if diff < 0:
        return f"the price difference of {money(-diff)} is refunded to {method}"
    return f"the prices are the same: nothing is paid or refunded ({method})"


def confirmation_text(tool: str | None, args: dict[str, Any],
                      facts: Mapping[str, Any]) -> str:
    """The proposal ``tool(args)`` as the customer confirms it (never the model's words)."""
    order = args.get("order_id")
    method = args.get("payment_method_id")
    read = _order(args, facts)
    if tool == "cancel_pending_order":
        paid = read.get("paid_cents")
        refund = "its payment" if paid is None else f"its payment of {money(paid)}"
        return (f"Cancel order {order} (reason: {args.get('reason')}); {refund} is "
                f"refunded to the payment method that paid for it.{_ASK}")
    if tool == "modify_pending_order_address":
        return f"Ship pending order {order} to {_address(args)}.{_ASK}"
    if tool == "modify_pending_order_payment":
        paid = read.get("paid_cents")
        amount = "" if paid is None else f" ({money(paid)})"
        return (f"Pay pending order {order}{amount} with {method} instead; the original "
                f"payment is refunded.{_ASK}")
    if tool == "modify_pending_order_items":
        return (f"Change pending order {order}: {_swaps(args)}; {_difference(args, facts)}. "
                f"The items of an order are modified only once: nothing else of it can "
                f"change after.{_ASK}")
    if tool == "exchange_delivered_order_items":
        return (f"Exchange in delivered order {order}: {_swaps(args)}; "
                f"{_difference(args, facts)}.{_ASK}")
    if tool == "return_delivered_order_items":
        total = items_total(read, args.get("item_ids"))
        refund = "the refund" if total is None else f"the refund of {money(total)}"
        return (f"Return item(s) {_items(args)} of delivered order {order}; {refund} goes "
                f"to {method}.{_ASK}")
    if tool == "modify_user_address":
        return f"Change the default address of user {args.get('user_id')} to " \
               f"{_address(args)}.{_ASK}"
    return f"{tool} {args}"


PRESENTATION = Presentation(summary=confirmation_text,
                            subject=lambda t, a, f: a.get("order_id") or a.get("user_id"))
