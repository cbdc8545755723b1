"""Each step of a run judged against the definition in force at that step.

A run lives on the definition it started on until a ``migrated`` event moves it to
another; the store keeps every definition it has seen (as JSON, by hash), so the audit
reads the tables in force at each step from the store, without importing any workflow
code. A step is judged by what the tables say: the run starts in the initial state, a
tool runs only in a state whose row names it, an event moves the machine only along a
row of its tables, a person's event follows a person's decision, a customer's event
follows the customer's reply that fired it (or the expiry of the wait), a tool's event follows
a call of a tool that declares it, and a migration starts from the definition in force
and moves the run along its own map. A definition no record holds (a run started
before stores kept definitions) leaves its steps unjudged.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsm.definition.versions import Shape
from fsm.records import Event, RunState
from fsm.store.roles import Definitions


@dataclass
class _Walk:
    """Where the judging is: the definition in force and the last call or decision."""

    hash: str
    shape: Shape | None
    #: The tool event of the current step whose result may fire the next transition.
    tool: Event | None = None
    #: The step of the last person's decision (or expiry), if any.
    decided: int | None = None
    #: (step, event) of the last customer's reply (or expiry) that fired an event.
    replied: tuple[int, str] | None = None


def in_force_at_start(run: RunState, events: list[Event]) -> str:
    """The definition a run started on: its first migration's source, else its own."""
    first = next((e for e in events if e.kind == "migrated"), None)
    return str(first.detail.get("from_hash")) if first is not None else run.definition_hash


def judge(store: Definitions, run: RunState, events: list[Event]) -> list[str]:
    """Every step of ``events`` that the definition in force at it does not allow."""
    shapes: dict[str, Shape | None] = {}

    def shape(h: str) -> Shape | None:
        if h not in shapes:
            record = store.definition(h)
            try:
                shapes[h] = Shape.of_record(record) if record is not None else None
            except ValueError:
                shapes[h] = None
        return shapes[h]

    start = in_force_at_start(run, events)
    walk = _Walk(start, shape(start))
    out: list[str] = []
    for e in events:
        if e.kind == "migrated":
            out += _migrated(e, walk, store)
            walk = _Walk(str(e.detail.get("to_hash")), shape(str(e.detail.get("to_hash"))))
        elif walk.shape is not None:
            out += _step(e, walk, walk.shape)
    if walk.hash != run.definition_hash:
        out.append(f"the run names definition {run.definition_hash}, but its log leaves it "
                   f"on {walk.hash} (the snapshot was changed outside a step)")
    return out


def _step(e: Event, walk: _Walk, s: Shape) -> list[str]:
    where = f"event seq {e.seq}"
    if e.kind == "start" and e.seq == 0 and e.state_after != s.initial:
        return [f"{where}: the run starts in {e.state_after!r}, but version {s.label} starts "
                f"runs in {s.initial!r}"]
    if e.kind == "decision" or (e.kind == "close" and e.detail.get("event")):
        walk.decided = e.step  # a person decided, or resumed the run from the desk
    elif e.kind in ("reply", "unanswered", "opening") and e.event:
        walk.replied = (e.step, e.event)
    elif e.kind == "tool" and e.tool:
        walk.tool = e
        allowed = s.tools_by_state.get(e.state_before or "", ())
        if e.tool not in allowed:
            return [f"{where}: tool {e.tool!r} ran in {e.state_before!r}, where version "
                    f"{s.label} allows {', '.join(allowed) or 'no tool'}"]
    elif e.kind == "transition":
        return _transition(e, walk, s, where)
    return []


def _transition(e: Event, walk: _Walk, s: Shape, where: str) -> list[str]:
    event, before = e.event or "", e.state_before or ""
    tool, walk.tool = walk.tool, None
    if s.events_from(before).get(event) != e.state_after:
        return [f"{where}: {event!r} moved {before!r} → {e.state_after!r}, which the tables "
                f"of version {s.label} do not have"]
    if event in s.human_events and walk.decided != e.step:
        return [f"{where}: the person's event {event!r} fired without a person's decision"]
    if event in s.customer_events and walk.replied != (e.step, event):
        return [f"{where}: the customer's event {event!r} fired without a reply of the "
                "customer that fired it"]
    tools = s.fired_by_tools(event)
    if tools and (tool is None or tool.step != e.step or tool.tool not in tools):
        return [f"{where}: {event!r} is fired only by the results of "
                f"{', '.join(sorted(tools))}, and none ran before it"]
    return []


def _migrated(e: Event, walk: _Walk, store: Definitions) -> list[str]:
    where = f"event seq {e.seq}"
    d = e.detail
    out = []
    if d.get("from_hash") != walk.hash:
        out.append(f"{where}: the migration starts from definition {d.get('from_hash')}, but "
                   f"the run was on {walk.hash}")
    to = str(d.get("to_hash"))
    if store.definition(to) is None:
        out.append(f"{where}: the migration moves the run to definition {to}, which the "
                   "store does not hold")
    found = d.get("map")
    state_map: dict[str, str] = found if isinstance(found, dict) else {}
    before = e.state_before or ""
    if state_map.get(before, before) != e.state_after:
        out.append(f"{where}: the migration moved {before!r} → {e.state_after!r}, but its "
                   f"map sends {before!r} to {state_map.get(before, before)!r}")
    return out
