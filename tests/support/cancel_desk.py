"""A second workflow that is not about refunds: a subscription-cancellation desk in euros.

A customer asks to cancel; the model looks the subscription up and either cancels it
or proposes a retention credit, which a person must approve before it is granted.
Used by ``test_other_workflow.py`` to show that fsm speaks only this workflow's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from fsm import Action, Currency, Guard, Presentation, ToolContext, ToolSpec, View, define_workflow


def euros(cents: int) -> str:
    whole, rest = divmod(cents, 100)
    return f"€{whole},{rest:02d}"


class Lookup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account: str = Field(min_length=1)


class Offer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    credit_cents: StrictInt = Field(gt=0)


class Grant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account: str
    credit_cents: StrictInt = Field(gt=0)


GRANTED: list[dict[str, Any]] = []


def look_up(args: Lookup, ctx: ToolContext) -> dict[str, Any]:
    return {"account": args.account, "plan": "premium", "monthly_cents": 1_999}


def grant(args: Grant, ctx: ToolContext) -> dict[str, Any]:
    GRANTED.append(args.model_dump())
    return {"granted": True}


def _summary(tool: str | None, args: dict[str, Any], facts: Mapping[str, Any]) -> str:
    return f"retention credit of {euros(int(args.get('credit_cents', 0)))}"


def lower_credit(tool: str | None, args: dict[str, Any],
                 changes: dict[str, Any]) -> dict[str, Any]:
    """A supervisor may grant a smaller credit than proposed."""
    new, asked = changes.get("credit_cents"), args.get("credit_cents")
    if set(changes) != {"credit_cents"} or not isinstance(new, int) or \
            not isinstance(asked, int) or not 0 < new <= asked:
        raise ValueError("only a lower credit_cents may be approved")
    return {**args, "credit_cents": new}


WORKFLOW = define_workflow(
    "cancellations",
    transitions={
        "looking_up": {"found": "choosing"},
        "choosing": {"propose_credit": "awaiting_supervisor", "cancel": "cancelled"},
        "awaiting_supervisor": {"accept_credit": "granting", "refuse_credit": "cancelled"},
        "granting": {"granted": "kept"},
    },
    terminal={"cancelled", "kept"},
    tools_by_state={"looking_up": ["look_up"], "granting": ["grant_credit"]},
    initial="looking_up",
    tools=[
        ToolSpec("look_up", look_up, "Find the customer's subscription.", Lookup,
                 remember=lambda a, r, f: {"subscription": r}),
        ToolSpec("grant_credit", grant, "Grant the approved credit.", Grant, write=True,
                 retry_safe=True, emits=lambda r: "granted", emits_events=("granted",)),
    ],
    human_events={"accept_credit", "refuse_credit"},
    approve_event="accept_credit", deny_event="refuse_credit",
    guards={"found": Guard("the subscription was found", lambda f, p: "subscription" in f)},
    payloads={"propose_credit": Offer},
    records={"propose_credit": "offer"},
    presentation=Presentation(summary=_summary,
                              amount=lambda tool, args: args.get("credit_cents"), money=euros,
                              currency=Currency(symbol="€", digits=2, minor="cents",
                                                major="euros"),
                              amount_field="credit_cents"),
    amend=lower_credit,
)


def policy(view: View) -> Action:
    """Looks the account up, proposes a €5,00 credit, grants what was approved (a lower
    credit when the supervisor approved one)."""
    if view.state == "looking_up":
        if not any(m.get("tool") == "look_up" and m.get("role") == "tool"
                   for m in view.messages):
            return Action(tool="look_up", args={"account": "acct-7"})
        return Action(tool="advance", args={"event": "found"})
    if view.state == "choosing":
        return Action(tool="advance", args={"event": "propose_credit", "credit_cents": 500})
    approved = [m["approved"] for m in view.messages if isinstance(m.get("approved"), dict)]
    cents = approved[-1].get("credit_cents", 500) if approved else 500
    return Action(tool="grant_credit", args={"account": "acct-7", "credit_cents": cents})
