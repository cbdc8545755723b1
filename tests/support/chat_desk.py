"""A desk that talks with its customer: it asks which order to cancel, proposes the
cancellation, and cancels only after the customer's explicit yes to exactly that.

``fsm run chat_desk:WORKFLOW GOAL --policy chat_desk:clerk`` drives it from the command
line; the cancellations go to the file ``$CHAT_LEDGER`` (one JSON line each, kept once
per idempotency key), so that processes killed and resumed share one ledger.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsm import Action, ToolContext, ToolSpec, View, WorkflowSpec, define_workflow
from fsm.auditor.verify import (
    AlwaysReaches,
    ConfirmedWrites,
    CustomerOnly,
    NothingAfter,
    ToolOnlyIn,
)

ORDERS = {
    "A-1001": {"order_id": "A-1001", "customer": "asha", "status": "pending",
               "item": "kettle"},
    "A-1002": {"order_id": "A-1002", "customer": "asha", "status": "delivered",
               "item": "headphones"},
    "B-2001": {"order_id": "B-2001", "customer": "ravi", "status": "pending",
               "item": "lamp"},
}

TRANSITIONS = {
    "talking": {"propose": "confirming", "nothing_to_do": "done", "silent": "closed",
                "give_up": "handed_over"},
    "confirming": {"confirmed": "cancelling", "declined": "talking", "silent": "closed"},
    "cancelling": {"cancelled": "talking", "cancel_failed": "handed_over"},
}
TOOLS_BY_STATE = {
    "talking": ["get_order"],
    "cancelling": ["cancel_order"],
}
CUSTOMER_EVENTS = {"confirmed", "declined", "silent"}
YES = {"yes", "y", "yes please", "yes, go ahead", "go ahead", "confirm", "confirmed"}


class Ledger:
    """Cancelled orders: in the file ``path`` (shared by processes), else in memory."""

    def __init__(self, path: str | None = None) -> None:
        self.path = Path(path) if path else None
        self._lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def entries(self) -> list[dict[str, Any]]:
        if self.path is None:
            return list(self._lines)
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def cancel(self, key: str, order_id: str, reason: str) -> dict[str, Any]:
        with self._lock:
            for entry in self.entries():
                if entry["key"] == key:
                    return entry  # the same key: cancelled once
            entry = {"key": key, "order_id": order_id, "reason": reason}
            if self.path is None:
                self._lines.append(entry)
            else:
                with self.path.open("a") as f:
                    f.write(json.dumps(entry) + "\n")
            return entry


class OrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(pattern=r"^[A-Z]-\d{4}$", description="the order id, e.g. A-1001")


class CancelArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(pattern=r"^[A-Z]-\d{4}$")
    reason: str = Field(description="why", pattern=r"^(no longer needed|ordered by mistake)$")


class Proposal(BaseModel):
    """A write proposed to the customer: the tool and its exact arguments."""

    model_config = ConfigDict(extra="forbid")
    tool: str
    args: dict[str, Any]


def explicit_yes(text: str, asked: dict[str, Any]) -> str | None:
    """``confirmed`` only for an explicit yes; anything else declines the proposal."""
    said = " ".join(text.lower().split()).strip(".!")
    return "confirmed" if said in YES else "declined"


def _get_order(args: OrderArgs, ctx: ToolContext) -> dict[str, Any]:
    order = ORDERS.get(args.order_id)
    if order is None:
        raise LookupError(f"no order {args.order_id}")
    if order["customer"] != ctx.user:
        return {"order_id": args.order_id, "yours": False}
    return {**order, "yours": True}


def build(ledger: Ledger | None = None, name: str = "chat_desk", **changes: Any) -> WorkflowSpec:
    """The desk; its cancellations go to ``ledger`` (default: ``$CHAT_LEDGER``)."""

    def ledger_of(ctx: ToolContext) -> Ledger:
        return ledger if ledger is not None else ctx.resource("ledger")

    def cancel_order(args: CancelArgs, ctx: ToolContext) -> dict[str, Any]:
        assert ctx.key is not None
        order = ORDERS.get(args.order_id)
        if order is None or order["customer"] != ctx.user or order["status"] != "pending":
            return {"cancelled": False, "why": "only a pending order of yours can be cancelled"}
        return {"cancelled": True, **ledger_of(ctx).cancel(ctx.key, args.order_id, args.reason)}

    tables: dict[str, Any] = dict(
        transitions=TRANSITIONS, tools_by_state=TOOLS_BY_STATE, initial="talking",
        terminal={"done"}, handed_over_states={"closed", "handed_over"},
        tools=[
            ToolSpec("get_order", _get_order, "Fetch an order.", OrderArgs,
                     remember=lambda a, r, f: {"order": r}),
            ToolSpec("cancel_order", cancel_order, "Cancel a pending order.", CancelArgs,
                     write=True, retry_safe=True, confirmed_by="proposal",
                     emits=lambda r: "cancelled" if r.get("cancelled") else "cancel_failed",
                     emits_events=("cancelled", "cancel_failed"), always_emits=True),
        ],
        payloads={"propose": Proposal}, records={"propose": "proposal"},
        customer_events=CUSTOMER_EVENTS, asks_customer={"talking"}, interpret=explicit_yes,
        reply_ttl_seconds=3600, reply_expiry_event="silent",
        resources={"ledger": lambda location: Ledger(os.environ.get("CHAT_LEDGER"))},
        instructions={"talking": "Find out which order the customer wants cancelled, fetch "
                                 "it, then propose cancel_order with its exact arguments.",
                      "cancelling": "Call cancel_order with exactly the confirmed proposal."},
        invariants=(
            ConfirmedWrites("cancel_order"), CustomerOnly("confirmed", "declined", "silent"),
            ToolOnlyIn("cancel_order", "cancelling"), NothingAfter(event="cancel_failed"),
            AlwaysReaches("done", "closed", "handed_over"),
        ),
    )
    tables.update(changes)
    return define_workflow(name, **tables)


WORKFLOW = build()

ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")


def _said(view: View) -> list[str]:
    return [str(m.get("content", "")) for m in view.messages
            if m.get("role") == "user" and not m.get("runtime")]


def _order(view: View) -> dict[str, Any] | None:
    for msg in reversed(view.messages):
        if msg.get("role") == "tool" and msg.get("tool") == "get_order" and "result" in msg:
            result: dict[str, Any] = msg["result"]
            return result
    return None


def clerk(view: View) -> Action:
    """A rule-based clerk: asks for the order number when it has none, fetches the order,
    proposes its cancellation and cancels exactly what the customer confirmed."""
    if view.state == "cancelling":
        proposal = _last_proposal(view) or {}
        return Action(tool="cancel_order", args=dict(proposal.get("args") or {}))
    if any(m.get("tool") == "cancel_order" and "result" in m for m in view.messages):
        return Action(tool="advance", args={"event": "nothing_to_do"})
    if any(m.get("event") == "declined" for m in view.messages):
        return Action(tool="advance", args={"event": "nothing_to_do"})
    found = [m.group(0) for text in _said(view) for m in [ORDER_ID.search(text)] if m]
    if not found:
        return Action(final="Which order would you like to cancel? Please give its number "
                            "(like A-1001).")
    order = _order(view)
    if order is None or order.get("order_id") != found[-1]:
        return Action(tool="get_order", args={"order_id": found[-1]})
    args = {"order_id": found[-1], "reason": "no longer needed"}
    return Action(tool="advance", text=f"I will cancel order {found[-1]} (no longer needed). "
                  "Shall I go ahead? Please answer yes or no.",
                  args={"event": "propose", "tool": "cancel_order", "args": args})


def _last_proposal(view: View) -> dict[str, Any] | None:
    for msg in reversed(view.messages):
        if msg.get("role") == "assistant" and msg.get("tool") == "advance" and \
                (msg.get("args") or {}).get("event") == "propose":
            return dict(msg["args"])
    return None


POLICY = clerk


def held_clerk(view: View) -> Action:
    """The clerk, holding the run at step ``$CHAT_HOLD_STEP``: it writes the file
    ``$CHAT_HOLD.waiting`` and waits (up to a minute) until ``$CHAT_HOLD`` exists, so that
    another process can meet the run in the middle of that step."""
    hold = os.environ.get("CHAT_HOLD")
    if hold and str(view.step) == os.environ.get("CHAT_HOLD_STEP"):
        Path(hold + ".waiting").touch()
        deadline = time.monotonic() + 60
        while not os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.01)
    return clerk(view)


def _approved() -> WorkflowSpec:
    """The desk whose cancellation also waits for a person's approval."""
    import dataclasses

    tools = {t.name: t for t in WORKFLOW.tools.values()}
    tools["cancel_order"] = dataclasses.replace(tools["cancel_order"], approval=True)
    return build(name="chat_desk_approved", tools=list(tools.values()))


#: ``chat_desk:APPROVED``: the cancellation needs the customer's yes and a person's approval.
APPROVED = _approved()
