"""What a run waiting for its customer asks, in the lines ``fsm run``, ``fsm resume``,
``fsm reply`` and ``fsm show`` print."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .context import fmt_time

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.records import RunState
    from fsm.records.conversation import AwaitingCustomer


def customer_lines(spec: WorkflowSpec | None, run: RunState) -> list[str]:
    """``waiting``/``asks``/``asked`` lines for a run that waits for its customer (none for
    any other run)."""
    from fsm.records import canonical
    from fsm.records.conversation import AwaitingCustomer
    from fsm.runtime.conversation.judging import asked_hash, summary

    p = run.pending
    if run.status != "awaiting_customer" or not isinstance(p, AwaitingCustomer):
        return []
    lines = [f"waiting  for the customer: {p.message or '(no message)'}"]
    if p.args:
        shown = summary(spec, p, run.facts) if spec is not None else ""
        exact = canonical(p.args.get("args", p.args))
        if exact not in shown:  # the workflow's own words: show the exact call too
            shown = f"{shown} (exactly: {json.dumps(p.args, ensure_ascii=False)})".lstrip()
        lines.append(f"confirm  {shown}")
    until = f"; until {fmt_time(p.expires_at)}" if p.expires_at is not None else ""
    fires = (f"a reply may fire {', '.join(p.events)}" if p.events
             else "the reply goes to the model")
    lines.append(f"asked    {asked_hash(p)[:12]} ({fires}{until})")
    return lines


def customer_data(run: RunState) -> dict[str, Any]:
    """The JSON form of what a run waiting for its customer asks (``{}`` for another)."""
    from fsm.records.conversation import AwaitingCustomer
    from fsm.runtime.conversation.judging import asked_hash

    p: AwaitingCustomer | Any = run.pending
    if run.status != "awaiting_customer" or not isinstance(p, AwaitingCustomer):
        return {}
    return {"asked": asked_hash(p)}
