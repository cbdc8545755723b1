"""Two releases of the refund workflow, for the deploy tests.

Version 1 is the refund workflow as it ships. Version 2 adds a state (``escalated``: the
model may escalate an order it cannot verify, and reply from there) and changes the
description of ``refund_item``. :func:`release` builds what a release's code defines:
release 1 defines version 1 only; release 2 defines version 2 and keeps version 1.

A worker process imports ``deploykit:WORKFLOW``; ``$DEPLOY_RELEASE`` (1 or 2) says which
release it runs, so one fleet can hold old and new workers at once, as during a rolling
deploy. ``deploykit:POLICY`` is the clerk (a little slow with ``$FLEET_SLEEP``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from fsm import ToolSpec, WorkflowSpec, define_workflow
from fsm.policy import View
from workflows.refund import build, clerk
from workflows.refund.workflow import TOOLS_BY_STATE, TRANSITIONS

#: The description ``refund_item`` has in version 2.
V2_REFUND_DESCRIPTION = "Refund one item through the payment gateway, in paise."


def revised(spec: WorkflowSpec, *, version: str, earlier: tuple[WorkflowSpec, ...] = (),
            **changes: Any) -> WorkflowSpec:
    """``spec`` defined again with ``changes`` (define_workflow's arguments)."""
    fields: dict[str, Any] = {
        "transitions": spec.transitions, "tools_by_state": {
            s: list(t) for s, t in spec.tools_by_state.items()},
        "initial": spec.initial, "tools": list(spec.tools.values()),
        "human_events": spec.human_events, "guards": spec.guards, "payloads": spec.payloads,
        "records": spec.records, "instructions": spec.instructions,
        "system_prompt": spec.system_prompt,
        "terminal": spec.terminal - spec.handed_over_states,
        "handed_over_states": spec.handed_over_states, "finish_states": spec.finish_states,
        "expiry_event": spec.expiry_event, "approve_event": spec.approve_event,
        "deny_event": spec.deny_event, "approval_ttl_seconds": spec.approval_ttl_seconds,
        "invariants": spec.invariants, "settings": spec.settings,
        "presentation": spec.presentation, "resources": spec.resources, "amend": spec.amend,
    }
    fields.update(changes)
    return define_workflow(spec.name, version=version, earlier=earlier, **fields)


def with_tool(spec: WorkflowSpec, tool: str, **changes: Any) -> list[ToolSpec]:
    """``spec``'s tools with ``tool`` changed."""
    return [dataclasses.replace(t, **changes) if t.name == tool else t
            for t in spec.tools.values()]


def v1(shop: Any = None) -> WorkflowSpec:
    return build(shop)


def v2(shop: Any = None, *, keep_v1: bool = True) -> WorkflowSpec:
    """Version 2: the ``escalated`` state, and a new description of ``refund_item``."""
    base = v1(shop)
    transitions = {**TRANSITIONS,
                   "verifying": {**TRANSITIONS["verifying"], "escalate": "escalated"},
                   "escalated": {"sent": "done"}}
    return revised(
        base, version="2", earlier=(base,) if keep_v1 else (),
        transitions=transitions, tools_by_state={**TOOLS_BY_STATE, "escalated": ["send_reply"]},
        tools=with_tool(base, "refund_item", description=V2_REFUND_DESCRIPTION),
        instructions={**base.instructions,
                      "escalated": "Tell the customer a person will look at the order."},
    )


def release(number: str, shop: Any = None) -> WorkflowSpec:
    """What the code of release ``number`` defines."""
    if number == "1":
        return v1(shop)
    if number == "2":
        return v2(shop)
    raise ValueError(f"no release {number!r} (1 or 2)")


WORKFLOW = release(os.environ.get("DEPLOY_RELEASE", "2"))


def POLICY(view: View) -> Any:  # noqa: N802 - the name fsm looks for beside WORKFLOW
    time.sleep(float(os.environ.get("FLEET_SLEEP", "0")))
    return clerk(view)


# -- candidates for fsm check-history ---------------------------------------------------------

def renamed_tool(shop: Any = None) -> WorkflowSpec:
    """``refund_item`` renamed ``issue_refund``."""
    from fsm.auditor.verify import ToolOnlyAfter, ToolOnlyIn

    base = v1(shop)
    invariants = tuple(
        ToolOnlyIn("issue_refund", "refunding") if isinstance(i, ToolOnlyIn) else
        ToolOnlyAfter("issue_refund", "approved", unless="amount_within_limit")
        if isinstance(i, ToolOnlyAfter) else i for i in base.invariants)
    return revised(base, version="renamed-tool",
                   tools=with_tool(base, "refund_item", name="issue_refund"),
                   tools_by_state={**TOOLS_BY_STATE, "refunding": ["issue_refund"]},
                   invariants=invariants)


def removed_state(shop: Any = None) -> WorkflowSpec:
    """No ``awaiting_approval``: a large refund is handed over to a person instead."""
    from fsm.auditor.verify import HumanOnly, ToolOnlyAfter

    base = v1(shop)
    transitions = {s: dict(ev) for s, ev in TRANSITIONS.items() if s != "awaiting_approval"}
    transitions["deciding"]["large_refund"] = "handed_over"
    return revised(base, version="removed-state", transitions=transitions, human_events=(),
                   expiry_event=None,
                   invariants=tuple(i for i in base.invariants
                                    if not isinstance(i, ToolOnlyAfter | HumanOnly)))


#: The tighter approval limit of :func:`tighter_guard` (₹300, in paise).
TIGHTER_LIMIT = 30_000


def tighter_guard(shop: Any = None) -> WorkflowSpec:
    """Refunds above ₹300 (not ₹500) need a person."""
    from fsm import Guard
    from workflows.refund.workflow import GUARDS, _decision_ok

    def within(f: Any, p: dict[str, Any]) -> bool:
        return _decision_ok(f, p, large=False) and p.get("amount_paise", 0) <= TIGHTER_LIMIT

    def above(f: Any, p: dict[str, Any]) -> bool:
        return (_decision_ok(f, p, large=False) or _decision_ok(f, p, large=True)) \
            and p.get("amount_paise", 0) > TIGHTER_LIMIT

    guards = {**GUARDS,
              "small_refund": Guard("amount ≤ ₹300 and ≤ refundable", within,
                                    establishes=("amount_within_limit",)),
              "large_refund": Guard("amount > ₹300 and ≤ refundable", above,
                                    establishes=("amount_above_limit",))}
    return revised(v1(shop), version="tighter-guard", guards=guards)


RENAMED_TOOL = renamed_tool()
REMOVED_STATE = removed_state()
TIGHTER_GUARD = tighter_guard()
ADDITIVE = v2(keep_v1=False)
