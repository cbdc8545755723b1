"""A payout workflow whose one write waits for a person's approval of the call itself,
for the tests of calls pending across a migration or a history check."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsm import ToolSpec, WorkflowSpec, define_workflow


class Amount(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: int = Field(gt=0)


class SmallAmount(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: int = Field(gt=0, le=100)


def payout(paid_out: list[tuple[str | None, int]], *, version: str,
           args: type[BaseModel] = Amount, description: str = "Pay the customer.",
           earlier: tuple[WorkflowSpec, ...] = ()) -> WorkflowSpec:
    def pay(a: Any, ctx: Any) -> dict[str, Any]:
        paid_out.append((ctx.key, a.amount))
        return {"ok": True}

    return define_workflow(
        "payout", version=version, earlier=earlier,
        transitions={"asking": {"ready": "paying"}, "paying": {"paid": "done"}, "done": {}},
        tools_by_state={"paying": ["pay"]}, initial="asking",
        tools=[ToolSpec("pay", pay, description, args, write=True, retry_safe=True,
                        approval=True, emits=lambda r: "paid", emits_events=("paid",))])


PAY = [{"tool": "advance", "args": {"event": "ready"}}, {"tool": "pay", "args": {"amount": 50}}]
