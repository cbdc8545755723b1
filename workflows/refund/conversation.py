"""The refund workflow as a conversation: when the customer's message names no order, the
agent asks for the order number, and the run waits for the reply.

The tables, tools, guards and invariants are the refund workflow's; one setting differs:
``collecting`` is a state that asks the customer (``asks_customer``), so there the
model's plain text goes to the customer and their answer comes back as a user message.
The refund workflow itself is unchanged (its definition hash is the one its runs record).
"""

from __future__ import annotations

import re

from fsm import Action, View, WorkflowSpec, define_workflow
from workflows.refund.clerk import serve
from workflows.refund.shop import AnyShop
from workflows.refund.workflow import INSTRUCTIONS, ShopSource, definition

ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")

#: The question the clerk asks when it does not know the order.
ASK_ORDER = "Which order is it about? Please give me its number (like A-1001)."


def build_conversation(shop: AnyShop | ShopSource | None = None) -> WorkflowSpec:
    """The refund conversation, bound to ``shop`` (default: the run's database's shop)."""
    return define_workflow(
        "refund_chat", **{
            **definition(shop),
            "asks_customer": {"collecting"},
            "instructions": {**INSTRUCTIONS, "collecting": (
                "Find the order the customer means and fetch it with get_order, then fire "
                "details_complete. If they gave no order number, ask them for it in plain "
                "text (no tool call) and wait for their answer.")},
        })


def chat_clerk(view: View) -> Action:
    """The refund clerk, who asks for the order number when the customer gave none."""
    said = [str(m.get("content", "")) for i, m in enumerate(view.messages)
            if m.get("role") == "user" and (i == 0 or m.get("from") == "customer")]
    found = [m.group(0) for text in said for m in [ORDER_ID.search(text)] if m]
    if not found:
        if view.state == "collecting":
            return Action(final=ASK_ORDER)
        return Action(final="Nothing more to do.")
    return serve(view, found[0])


#: The registered workflow ``refund_chat``, bound to the shop of the current database.
WORKFLOW = build_conversation()
#: The default policy ``fsm run refund_chat`` uses.
POLICY = chat_clerk
