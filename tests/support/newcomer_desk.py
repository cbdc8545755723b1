"""A newcomer's own desk, as they first wrote it: it charges a customer's card after the
customer's yes, and a large charge goes to a supervisor first.

It is written the way someone new to fsm writes a workflow: amounts in cents shown with
``money=`` (no ``currency=``), a supervisor state a person releases, a payment gateway
that sometimes answers "try again", and a clerk written as plain rules. The tests drive it
to check that every way it can fail ends where a person can act.

``build(record_escalation=False)`` is the first draft, whose ``escalate`` event records
nothing; ``build(amount_key="amount_cents")`` reads an amount the payload does not carry.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsm import Action, Presentation, ToolContext, ToolSpec, View, WorkflowSpec, define_workflow

#: Charges above this many cents go to a supervisor first.
SUPERVISED_ABOVE = 10_000

TRANSITIONS = {
    "talking": {"propose": "confirming", "escalate": "supervising",
                "nothing_to_do": "done", "give_up": "handed_over"},
    "supervising": {"released": "talking", "refused": "talking"},
    "confirming": {"confirmed": "charging", "declined": "talking"},
    "charging": {"charged": "talking", "charge_failed": "handed_over"},
}
TOOLS_BY_STATE = {"talking": ["get_order"], "charging": ["charge_card"]}
ORDERS = {"N-1001": {"order_id": "N-1001", "customer": "nia", "cents": 27_000},
          "N-1002": {"order_id": "N-1002", "customer": "nia", "cents": 4_500}}


def dollars(cents: int) -> str:
    return f"${cents / 100:,.2f}"


class Gateway:
    """Charges, once per idempotency key. ``fail`` transient errors are raised first
    (the gateway's "try again later"), ``refuse`` makes it decline every charge."""

    def __init__(self, fail: int = 0, refuse: bool = False,
                 error: type[Exception] = TimeoutError) -> None:
        self.error = error
        self.fail = fail
        self.refuse = refuse
        self.calls = 0
        self.charges: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def charge(self, key: str, order_id: str, cents: int) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            if self.fail > 0:
                self.fail -= 1
                raise self.error("the gateway answered 503: try again later")
            if self.refuse:
                return {"charged": False, "why": "card declined"}
            return self.charges.setdefault(key, {"charged": True, "order_id": order_id,
                                                 "cents": cents})


class OrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(pattern=r"^N-\d{4}$")


class ChargeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(pattern=r"^N-\d{4}$")
    cents: int = Field(gt=0)


class Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: str
    args: dict[str, Any]


def _get_order(args: OrderArgs, ctx: ToolContext) -> dict[str, Any]:
    order = ORDERS.get(args.order_id)
    if order is None or order["customer"] != ctx.user:
        raise LookupError(f"no order {args.order_id} of yours")
    return dict(order)


def _said_yes(text: str, asked: dict[str, Any]) -> str | None:
    return "confirmed" if text.strip().lower().strip(".!") in ("yes", "y") else "declined"


def build(gateway: Gateway | None = None, *, record_escalation: bool = True,
          amount_key: str = "cents", retry_safe: bool = True,
          name: str = "newcomer_desk") -> WorkflowSpec:
    """The desk; its charges go to ``gateway`` (a fresh one by default)."""
    gate = gateway if gateway is not None else Gateway()

    def charge_card(args: ChargeArgs, ctx: ToolContext) -> dict[str, Any]:
        assert ctx.key is not None
        return gate.charge(ctx.key, args.order_id, args.cents)

    shown = Presentation(
        summary=lambda tool, args, facts: f"charge {args.get('order_id')} "
                                          f"{dollars(int(args.get('cents') or 0))}",
        amount=lambda tool, args: args.get(amount_key), money=dollars)
    return define_workflow(
        name, transitions=TRANSITIONS, tools_by_state=TOOLS_BY_STATE, initial="talking",
        terminal={"done", "handed_over"}, handed_over_states={"handed_over"},
        human_events={"released", "refused"}, approve_event="released", deny_event="refused",
        tools=[
            ToolSpec("get_order", _get_order, "Fetch an order.", OrderArgs),
            ToolSpec("charge_card", charge_card, "Charge the customer's card.", ChargeArgs,
                     write=True, retry_safe=retry_safe, confirmed_by="proposal",
                     emits=lambda r: "charged" if r.get("charged") else "charge_failed",
                     emits_events=("charged", "charge_failed"), always_emits=True),
        ],
        payloads={"propose": Proposal, "escalate": ChargeArgs},
        records={"propose": "proposal",
                 **({"escalate": "release"} if record_escalation else {})},
        customer_events={"confirmed", "declined"}, asks_customer={"talking"},
        interpret=_said_yes, presentation=shown,
    )


#: ``newcomer_desk:WORKFLOW``: the desk as it is now.
WORKFLOW = build()
#: ``newcomer_desk:MISREAD``: its presentation reads an amount its requests do not carry.
MISREAD = build(amount_key="amount_cents", name="newcomer_misread")


def _last(view: View, tool: str) -> dict[str, Any] | None:
    for msg in reversed(view.messages):
        if msg.get("tool") == tool and "result" in msg:
            return dict(msg["result"])
    return None


def clerk(view: View) -> Action:
    """The newcomer's rules: fetch the order, send a large charge to the supervisor,
    propose the charge, and charge exactly what was proposed."""
    order = _last(view, "get_order")
    if view.state == "charging":
        assert order is not None
        return Action(tool="charge_card", args={"order_id": order["order_id"],
                                                "cents": order["cents"]})
    if _last(view, "charge_card") is not None:
        return Action(tool="advance", args={"event": "nothing_to_do"})
    if order is None:
        return Action(tool="get_order", args={"order_id": "N-1001"})
    args = {"order_id": order["order_id"], "cents": order["cents"]}
    released = any(str(m.get("content", "")).startswith("approved by ")
                   for m in view.messages if m.get("role") == "user")
    if order["cents"] > SUPERVISED_ABOVE and not released:
        return Action(tool="advance", args={"event": "escalate", **args})
    return Action(tool="advance", text=f"I will charge {dollars(order['cents'])} for "
                  f"{order['order_id']}. Go ahead? (yes/no)",
                  args={"event": "propose", "tool": "charge_card", "args": args})


def silent(view: View) -> Any:
    """A policy whose code forgot its ``return``."""
    return None
