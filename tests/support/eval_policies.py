"""Refund policies that differ from the demo's clerk on purpose, for replay and eval tests.

- :func:`pays_twice`: the clerk, but after the refund it calls ``refund_item`` once more.
- :func:`skips_policy`: the clerk, but it never reads the refund policy: it declares the
  order verified straight away.
"""

from __future__ import annotations

from fsm import Action, View
from workflows.refund.clerk import clerk


def _tried_again(view: View) -> bool:
    return any(m.get("role") == "tool" and m.get("tool") == "refund_item" and "error" in m
               for m in view.messages)


def pays_twice(view: View) -> Action:
    if view.state == "replying" and not _tried_again(view):
        paid = next(m for m in reversed(view.messages)
                    if m.get("role") == "assistant" and m.get("tool") == "refund_item")
        return Action(tool="refund_item", args=dict(paid["args"]))
    return clerk(view)


def skips_policy(view: View) -> Action:
    if view.state == "verifying":
        return Action(tool="advance", args={"event": "verified"})
    return clerk(view)


def reads_another_order(view: View) -> Action:
    """The clerk, but it first looks at order A-1003, which the recorded runs never read."""
    if view.step == 1:
        return Action(tool="get_order", args={"order_id": "A-1003"})
    return clerk(view)
