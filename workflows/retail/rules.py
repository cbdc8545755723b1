"""The written policy's rules that τ²-bench's tools leave out, as pure checks.

Each rule answers "why may this write not run?" from what the desk knows of the order
and the customer, or ``None`` when it may. The same function judges a proposal from the
run's facts (the orders the run has read, as :func:`order_summary` keeps them) and a
write from the database rows, inside the write's own transaction
(:func:`write_problem`): so the customer is never asked to confirm a write the policy
forbids, and a write never runs on an order that changed since it was read.

The rules:

- only the authenticated customer's orders and address are changed;
- an order must have been read (``get_order_details``) before a write to it is proposed;
- cancel and modify only a ``pending`` order: once its items were modified
  (``pending (item modified)``) nothing of it changes any more;
- return and exchange only a ``delivered`` order;
- a cancellation gives one of the two reasons the policy allows;
- a return's refund goes to the payment method that paid for the order, or to one of
  the customer's gift cards;
- a modification, exchange or return names at least one item, a swap pairs each item with
  one new item, and changes at least one of them;
- what τ²-bench's tool would refuse, as far as the run read it: another customer's payment
  method, a new item of another product, a gift card short of what it pays;
- a transfer to a human agent only when the customer asked for one, or the desk has
  acted for them already (a write done), or what it read shows it cannot act (an order
  of theirs in a status none of its writes changes) (:func:`transfer_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.retail.operations import CANCEL_REASONS, Tx

#: The writes to a pending order, and those to a delivered one.
PENDING_WRITES = frozenset({"cancel_pending_order", "modify_pending_order_address",
                            "modify_pending_order_payment", "modify_pending_order_items"})
DELIVERED_WRITES = frozenset({"return_delivered_order_items",
                              "exchange_delivered_order_items"})
#: The writes that swap items for other variants, position by position.
SWAPS = frozenset({"modify_pending_order_items", "exchange_delivered_order_items"})


class PolicyRefusal(Exception):
    """A write or a read the written policy does not allow; the message says why."""


def cents(dollars: Any) -> int | None:
    """A τ²-bench amount (dollars, a number) in integer cents; ``None`` when it is not a
    number (a recorded conversation may leave it out)."""
    if isinstance(dollars, bool) or not isinstance(dollars, int | float):
        return None
    return int(round(dollars * 100))


def order_summary(order: Mapping[str, Any]) -> dict[str, Any]:
    """What the desk keeps of an order it has read (τ²-bench's shape in): its owner,
    status, the method and amount of its first payment, and each item's product and
    price in cents."""
    history = order.get("payment_history") or []
    return {"user_id": order.get("user_id"), "status": order.get("status"),
            "paid_with": history[0]["payment_method_id"] if history else None,
            "paid_cents": cents(history[0].get("amount")) if history else None,
            "items": {i["item_id"]: [i.get("product_id"), cents(i.get("price"))]
                      for i in order.get("items") or [] if "item_id" in i}}


def payment_methods(user: Mapping[str, Any]) -> dict[str, int | None]:
    """A customer's payment methods: a gift card's balance in cents, ``None`` for others
    (τ²-bench's shape in)."""
    return {k: cents(m.get("balance")) if m.get("source") == "gift_card" else None
            for k, m in (user.get("payment_methods") or {}).items()}


def variants(product: Mapping[str, Any]) -> dict[str, list[Any]]:
    """A product's items: item id → [product id, price in cents] (τ²-bench's shape in)."""
    return {k: [product.get("product_id"), cents(v.get("price"))]
            for k, v in (product.get("variants") or {}).items() if isinstance(v, dict)}


def gift_cards(user: Mapping[str, Any]) -> list[str]:
    """The ids of a customer's gift cards (either shape of a user)."""
    return sorted(k for k, m in (user.get("payment_methods") or {}).items()
                  if m.get("source") == "gift_card")


def problem(user_id: str | None, tool: str, args: Mapping[str, Any],
            order: Mapping[str, Any] | None, cards: list[str] | None) -> str | None:
    """Why the policy forbids ``tool(args)`` for the customer ``user_id``, or ``None``.

    ``order`` is the summary of the order the write names (``None``: not read, or no
    such order); ``cards`` the customer's gift cards (``None``: not known).
    """
    if user_id is None:
        return "no customer is authenticated: find their user id by email, or by name and zip"
    if tool == "modify_user_address":
        if args.get("user_id") != user_id:
            return (f"user {args.get('user_id')!r} is not the authenticated customer "
                    f"{user_id!r}; only their own address may be changed")
        return None
    order_id = args.get("order_id")
    if order is None:
        return (f"order {order_id!r} has not been read in this conversation: read it with "
                "get_order_details and check its status first")
    if order["user_id"] != user_id:
        return (f"order {order_id!r} belongs to another customer; only the authenticated "
                f"customer's orders may be changed")
    return _status_problem(tool, order_id, order) or _argument_problem(tool, args, order,
                                                                       cards)


def _status_problem(tool: str, order_id: Any, order: Mapping[str, Any]) -> str | None:
    status = order["status"]
    if tool in PENDING_WRITES and status != "pending":
        if status == "pending (item modified)":
            return (f"the items of order {order_id!r} were modified already: the policy "
                    "allows no further change or cancellation of it")
        return f"order {order_id!r} is {status!r}; only a pending order may be changed"
    if tool in DELIVERED_WRITES and status != "delivered":
        return (f"order {order_id!r} is {status!r}; only a delivered order may be returned "
                "or exchanged")
    return None


def _items_problem(tool: str, args: Mapping[str, Any]) -> str | None:
    """A swap or return of no items, or a swap of every item for itself (τ²-bench's tools
    would run them, and a modification of nothing still uses up the order's one). An item
    kept as it is beside others that change is a no-op τ²-bench's own reference
    conversations make, and passes."""
    order_id = args.get("order_id")
    old = list(args.get("item_ids") or [])
    if tool in SWAPS or tool == "return_delivered_order_items":
        if not old:
            return f"the {tool} of order {order_id!r} names no items; nothing would change"
    if tool not in SWAPS:
        return None
    new = list(args.get("new_item_ids") or [])
    if len(new) != len(old):
        return (f"{len(old)} item(s) of order {order_id!r} would be swapped for {len(new)} "
                "new item(s); each item needs exactly one new item")
    if old == new:
        return (f"item(s) {', '.join(sorted(set(old)))} of order {order_id!r} would be "
                "swapped for themselves; a new item must be another variant")
    return None


def _argument_problem(tool: str, args: Mapping[str, Any], order: Mapping[str, Any],
                      cards: list[str] | None) -> str | None:
    items = _items_problem(tool, args)
    if items is not None:
        return items
    if tool == "cancel_pending_order" and args.get("reason") not in CANCEL_REASONS:
        return (f"the reason {args.get('reason')!r} is not one the policy allows "
                f"(allowed: {', '.join(repr(r) for r in CANCEL_REASONS)})")
    if tool == "return_delivered_order_items":
        method = args.get("payment_method_id")
        if method != order["paid_with"] and method not in (cards or []):
            known = "" if cards is not None else (
                " (the customer's gift cards are not known yet: read get_user_details)")
            return (f"a refund goes to the payment method that paid for the order "
                    f"({order['paid_with']!r}) or to one of the customer's gift cards, not "
                    f"to {method!r}{known}")
    return None


# -- the two places the rules are applied ---------------------------------------------------

def proposal_problem(facts: Mapping[str, Any], tool: str, args: Mapping[str, Any]) -> str | None:
    """The rules applied to a proposal, from what the run has read; then what τ²-bench's
    tool would refuse, as far as the run has read it (:func:`refused_anyway`)."""
    orders = facts.get("orders") or {}
    order = orders.get(args.get("order_id")) if "order_id" in args else None
    why = problem(facts.get("user_id"), tool, args, order, facts.get("gift_cards"))
    if why is None and order is not None:
        why = refused_anyway(facts, tool, args, order)
    return why


def refused_anyway(facts: Mapping[str, Any], tool: str, args: Mapping[str, Any],
                   order: Mapping[str, Any]) -> str | None:
    """A write τ²-bench's tool would refuse, known from what the run read: a payment
    method not among the customer's (their profile read), a new item of another product
    (the new item's product read), a gift card short of what it pays (its balance and
    the new items' prices read). Checked before the customer is asked."""
    methods = facts.get("payment_methods")
    method = args.get("payment_method_id")
    if method is not None and methods is not None and method not in methods:
        return (f"{method!r} is not a payment method of the customer (theirs: "
                f"{', '.join(sorted(methods))})")
    if tool in SWAPS:
        return _swap_refused(facts, args, order, methods)
    balance = (methods or {}).get(method) if method is not None else None
    paid = order.get("paid_cents")
    if tool == "modify_pending_order_payment" and balance is not None and paid is not None \
            and balance < paid:
        return (f"gift card {method!r} holds ${balance / 100:.2f}, short of the order's "
                f"${paid / 100:.2f}")
    return None


def items_total(order: Mapping[str, Any], item_ids: Any) -> int | None:
    """The price in cents of the order's items ``item_ids`` (each as often as it is
    named), or ``None`` when one of them is not an item of the order as read."""
    items = order.get("items") or {}
    total = 0
    for item in item_ids or []:
        price = (items.get(item) or [None, None])[1]
        if price is None:
            return None
        total += price
    return total


def swap_difference(facts: Mapping[str, Any], args: Mapping[str, Any],
                    order: Mapping[str, Any]) -> int | None:
    """What a swap costs the customer in cents (the new items' prices less the old ones';
    negative: a refund), or ``None`` when a price is not known from what the run read."""
    known = facts.get("variants") or {}
    old_items = order.get("items") or {}
    diff = 0
    for old, new in zip(args.get("item_ids") or [], args.get("new_item_ids") or [],
                        strict=False):
        was, now = old_items.get(old), known.get(new)
        if was is None or now is None or None in (was[1], now[1]):
            return None
        diff += now[1] - was[1]
    return diff


def _swap_refused(facts: Mapping[str, Any], args: Mapping[str, Any], order: Mapping[str, Any],
                  methods: Mapping[str, int | None] | None) -> str | None:
    known = facts.get("variants") or {}
    old_items = order.get("items") or {}
    for old, new in zip(args.get("item_ids") or [], args.get("new_item_ids") or [],
                        strict=False):
        was, now = old_items.get(old), known.get(new)
        if was is not None and now is not None and None not in (was[0], now[0]) \
                and was[0] != now[0]:
            return (f"item {new} is a variant of product {now[0]}, not of item {old}'s "
                    f"product {was[0]}; an item is swapped only for a variant of its own "
                    "product")
    diff = swap_difference(facts, args, order)
    balance = (methods or {}).get(str(args.get("payment_method_id")))
    if diff is not None and balance is not None and balance < diff:
        return (f"gift card {args.get('payment_method_id')!r} holds ${balance / 100:.2f}, "
                f"short of the price difference ${diff / 100:.2f}")
    return None


#: The statuses of an order some write of the desk changes.
ACTIONABLE = frozenset({"pending", "delivered"})


def transfer_problem(facts: Mapping[str, Any]) -> str | None:
    """Why the desk may not hand the customer to a human agent now, or ``None``.

    The policy: "transfer the user to a human agent if and only if the request cannot be
    handled within the scope of your actions". A transfer passes when the customer asked
    for a human in their words (``asked_for_human``), when the desk has done a write for
    them (what is left is outside its actions), or when an order of theirs it read is in a
    status none of its writes changes (cancelled, processed, returned or exchanged, or
    already modified). Otherwise the desk could still act: it is refused."""
    if "asked_for_human" in facts or facts.get("writes_done"):
        return None
    user = facts.get("user_id")
    for summary in (facts.get("orders") or {}).values():
        if summary.get("user_id") == user and summary.get("status") not in ACTIONABLE:
            return None
    return ("the customer has not asked for a human agent, and the desk has neither acted "
            "for them nor read an order it cannot change: help them with the desk's own "
            "actions, or tell them what you cannot do and ask whether they want a human "
            "agent; nothing ran")


def write_problem(tx: Tx, user_id: str | None, tool: str, args: Mapping[str, Any]) -> None:
    """The rules applied to a write, from the rows it is about to change; raises
    :class:`PolicyRefusal`."""
    order = None
    if "order_id" in args:
        doc = tx.order(str(args["order_id"]))
        if doc is None:
            return  # the tool itself says "Order not found"
        order = {"user_id": doc["user_id"], "status": doc["status"],
                 "paid_with": (doc["payment_history"] or [{}])[0].get("payment_method_id")}
    user = tx.user(user_id) if user_id else None
    cards = gift_cards(user) if user is not None else []
    why = problem(user_id, tool, args, order, cards)
    if why is not None:
        raise PolicyRefusal(why)


def read_problem(tx: Tx, user_id: str | None, tool: str, args: Mapping[str, Any]) -> None:
    """Only the authenticated customer's own details and orders are shown; raises
    :class:`PolicyRefusal`."""
    if tool == "get_user_details" and args.get("user_id") != user_id:
        raise PolicyRefusal(f"user {args.get('user_id')!r} is not the authenticated customer "
                            f"{user_id!r}; the policy shows only their own details")
    if tool == "get_order_details":
        doc = tx.order(str(args.get("order_id")))
        if doc is not None and doc["user_id"] != user_id:
            raise PolicyRefusal(f"order {args.get('order_id')!r} is not an order of the "
                                "authenticated customer; the policy shows only their own")
