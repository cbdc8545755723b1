"""A deterministic, rule-based refund clerk: a policy that reads only the view.

It lets the demo and the tests run offline. It parses the order id from the
customer's message and decides from the tool results in the transcript.
"""

from __future__ import annotations

import re
from typing import Any

from fsm import Action, View
from workflows.refund.workflow import APPROVAL_LIMIT_PAISE, rupees

ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")


def _last_result(view: View, tool: str) -> dict[str, Any] | None:
    for msg in reversed(view.messages):
        if msg.get("role") == "tool" and msg.get("tool") == tool and "result" in msg:
            return msg["result"]
    return None


def _approved(view: View) -> dict[str, Any] | None:
    """What a reviewer approved, when they changed the decision (a lower amount)."""
    said = [m["approved"] for m in view.messages
            if m.get("role") == "user" and isinstance(m.get("approved"), dict)]
    return said[-1] if said else None


def _decision(view: View) -> dict[str, Any] | None:
    """The refund decision the workflow accepted (a refused attempt does not count)."""
    decided, attempt = None, None
    for msg in view.messages:
        if msg.get("tool") != "advance":
            continue
        if msg.get("role") == "assistant":
            args = msg.get("args") or {}
            refund = args.get("event") in ("small_refund", "large_refund")
            attempt = args if refund else None
        elif attempt is not None and "result" in msg:
            decided, attempt = attempt, None
    return decided


def clerk(view: View) -> Action:
    goal = next((m["content"] for m in view.messages if m.get("role") == "user"), "")
    match = ORDER_ID.search(goal)
    return serve(view, match.group(0) if match else "")


def serve(view: View, order_id: str) -> Action:
    """The clerk's next action on the order ``order_id``."""
    order = _last_result(view, "get_order")
    policy = _last_result(view, "get_policy")
    if view.state == "collecting":
        if order is None:
            return Action(tool="get_order", args={"order_id": order_id})
        return Action(tool="advance", args={"event": "details_complete"})
    if view.state == "verifying":
        if policy is None:
            return Action(tool="get_policy", args={"order_id": order_id})
        event = "verified" if policy.get("eligible") else "cannot_verify"
        return Action(tool="advance", args={"event": event})
    if view.state == "deciding":
        return _decide(order or {}, policy or {})
    if view.state == "refunding":
        d = _approved(view) or _decision(view) or {}
        return Action(tool="refund_item", args={
            "order_id": order_id, "item_id": d.get("item_id"),
            "amount_paise": d.get("amount_paise"),
        })
    if view.state == "replying":
        return Action(tool="send_reply", args={"text": _reply(view, order or {}, policy or {})})
    return Action(final="Nothing more to do.")


def _decide(order: dict[str, Any], policy: dict[str, Any]) -> Action:
    amount = int(policy.get("refundable_paise", 0))
    if amount <= 0:
        days = policy.get("days_since_delivery")
        reason = f"delivered {days} days ago, outside the {policy.get('window_days')}-day window"
        return Action(tool="advance", args={"event": "no_refund", "reason": reason})
    event = "small_refund" if amount <= APPROVAL_LIMIT_PAISE else "large_refund"
    return Action(tool="advance", args={
        "event": event, "item_id": order.get("item_id"), "amount_paise": amount,
    })


def _reply(view: View, order: dict[str, Any], policy: dict[str, Any]) -> str:
    item = order.get("item_name", "your item")
    refund = _last_result(view, "refund_item")
    if refund and refund.get("status") == "ok":
        return f"Your refund of {rupees(refund['amount_paise'])} for the {item} is on its way."
    denied = any(
        m.get("role") == "user" and str(m.get("content", "")).startswith("denied by")
        for m in view.messages
    )
    if denied:
        return (f"We are sorry: after review we cannot refund the {item}. "
                "A colleague will contact you with the details.")
    return (f"We are sorry, the {item} was delivered {policy.get('days_since_delivery')} days "
            f"ago, outside our {policy.get('window_days')}-day refund window, so we cannot "
            "refund it.")
