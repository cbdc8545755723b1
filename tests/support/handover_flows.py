"""A parcel desk that is not about refunds, with every way a run can be handed over, and a
hand-over state a person may resume from (``retry``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fsm import ToolContext, ToolSpec, define_workflow


class Parcel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    parcel: str
    last: bool = True


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str


SHIPPED: list[str] = []


def look(args: Parcel, ctx: ToolContext) -> dict[str, Any]:
    return {"parcel": args.parcel, "weight_g": 900}


def hand_to_human(args: Note, ctx: ToolContext) -> dict[str, Any]:
    return {"transferred": True}


def ship(args: Parcel, ctx: ToolContext) -> dict[str, Any]:
    if args.parcel == "bad":
        return {"status": "failed"}
    SHIPPED.append(args.parcel)
    return {"status": "ok", "last": args.last}


def _shipped(result: dict[str, Any]) -> str | None:
    if result.get("status") != "ok":
        return "ship_failed"
    return "shipped" if result.get("last") else None


def build(*, retry_safe: bool = True) -> Any:
    """The parcel desk; ``retry_safe=False`` makes a crashed ``ship`` a write in doubt."""
    return define_workflow(
        "parcels",
        transitions={
            "checking": {"unclear": "with_person", "ready": "shipping",
                         "transferred": "with_person", "escalate": "review"},
            "review": {"approved": "shipping", "declined": "with_person",
                       "lapsed": "with_person"},
            "shipping": {"shipped": "done", "ship_failed": "with_person"},
            "with_person": {"retry": "checking"},
        },
        tools_by_state={"checking": ["look", "hand_to_human"], "shipping": ["ship"]},
        initial="checking", terminal={"done"}, handed_over_states={"with_person"},
        human_events={"approved", "declined", "lapsed", "retry"}, expiry_event="lapsed",
        approval_ttl_seconds=60,
        tools=[
            ToolSpec("look", look, "Look a parcel up.", Parcel),
            ToolSpec("hand_to_human", hand_to_human, "Give the customer to a person.", Note,
                     emits=lambda r: "transferred", emits_events=("transferred",)),
            ToolSpec("ship", ship, "Ship a parcel.", Parcel, write=True,
                     retry_safe=retry_safe, emits=_shipped,
                     emits_events=("shipped", "ship_failed")),
        ],
    )


WORKFLOW = build()
