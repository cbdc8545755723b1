"""A subscription-cancellation desk: a workflow with two states that wait for a person,
one decided by approve/deny, the other only by naming its events."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fsm import ADVANCE, Action, View, define_workflow


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account: str


SPEC = define_workflow(
    "desk",
    transitions={
        "reading": {"cancel_requested": "confirming", "dispute": "disputed"},
        # approve / deny decide this state...
        "confirming": {"approved": "cancelled", "declined": "kept", "refer": "legal"},
        # ...and only a named event decides this one.
        "disputed": {"resolved": "cancelled", "dropped": "kept"},
    },
    tools_by_state={}, initial="reading",
    terminal={"cancelled", "kept"}, handed_over_states={"legal"},
    human_events={"approved", "declined", "refer", "resolved", "dropped"},
    payloads={"cancel_requested": Request, "dispute": Request},
    records={"cancel_requested": "request", "dispute": "request"},
)


def policy(view: View) -> Action:
    """A rule: a message mentioning a dispute is disputed; anything else is a request."""
    goal = str(view.messages[0]["content"])
    account = goal.split()[-1]
    event = "dispute" if "dispute" in goal else "cancel_requested"
    return Action(tool=ADVANCE, args={"event": event, "account": account})


def meta() -> dict[str, Any]:
    """What ``fsm run desk:SPEC --policy desk:policy`` would record at the start."""
    return {"workflow_ref": "desk:SPEC", "policy": "desk:policy"}
