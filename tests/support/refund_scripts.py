"""Scripted refund runs: the tool calls a well-behaved model makes, step by step.

Each script is a fresh list of ``(tool, args)`` pairs, the form the fake OpenAI
server's ``call(name, args)`` takes; :func:`actions` turns one into the
``{"tool": ..., "args": ...}`` dicts a :class:`~fsm.testing.ScriptedPolicy` replays.
Slice a script to stop a run in a given state: ``[:2]`` ends in ``verifying``,
``[:4]`` in ``deciding``, ``[:5]`` after the decision.
"""

from __future__ import annotations

from typing import Any

Step = tuple[str, dict[str, Any]]

SMALL_REPLY = "Your refund of ₹350 for the electric kettle is on its way."
LARGE_REPLY = "Your refund is on its way."


def refund_script(order_id: str, item_id: str, amount_paise: int, decision: str,
                  reply: str) -> list[Step]:
    """Fetch the order, verify it, decide, refund ``item_id`` and reply ``reply``."""
    return [
        ("get_order", {"order_id": order_id}),
        ("advance", {"event": "details_complete"}),
        ("get_policy", {"order_id": order_id}),
        ("advance", {"event": "verified"}),
        ("advance", {"event": decision, "item_id": item_id, "amount_paise": amount_paise}),
        ("refund_item", {"order_id": order_id, "item_id": item_id,
                         "amount_paise": amount_paise}),
        ("send_reply", {"text": reply}),
    ]


def small_refund(reply: str = SMALL_REPLY) -> list[Step]:
    """Order A-1001: the kettle, ₹350, refunded without a person (``small_refund``)."""
    return refund_script("A-1001", "kettle-1", 35_000, "small_refund", reply)


def large_refund(reply: str = LARGE_REPLY) -> list[Step]:
    """Order A-1002: the headphones, ₹1,800 (``large_refund``: a person approves after
    step 5, before ``refund_item``)."""
    return refund_script("A-1002", "headphones-1", 180_000, "large_refund", reply)


def actions(steps: list[Step]) -> list[dict[str, Any]]:
    """``steps`` as ``{"tool": ..., "args": ...}`` dicts."""
    return [{"tool": tool, "args": args} for tool, args in steps]
