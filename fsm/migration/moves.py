"""A run's path so far as moves of another definition: what the verifier continues from
when it proves a migration (see :func:`fsm.auditor.verify.verify_from`)."""

from __future__ import annotations

from collections.abc import Mapping

from fsm.auditor.diagram import CUSTOMER, MODEL, PERSON
from fsm.auditor.graph import Move
from fsm.definition.spec import WorkflowSpec
from fsm.records import Event


def history_moves(target: WorkflowSpec, events: list[Event],
                  state_map: Mapping[str, str]) -> list[Move]:
    """The moves a run's log records, in ``target``'s words: its states renamed by the
    maps of the migrations it went through and then by ``state_map``; who fired each event
    and what its guard establishes as ``target`` says."""
    moves: list[Move] = []
    held: Event | None = None  # a tool call whose result may fire the next transition
    for e in events:
        if e.kind == "migrated":
            renamed = e.detail.get("map") or {}
            moves = [_renamed(mv, renamed) for mv in moves]
        elif e.kind == "tool" and not e.detail.get("error") and e.tool:
            if held is not None:
                moves.append(_call(held))
            held = e
        elif e.kind == "transition" and e.event:
            tool = None
            if held is not None and held.step == e.step and held.tool in target.tools \
                    and e.event in target.tools[held.tool].emits_events:
                tool = held.tool
            elif held is not None:
                moves.append(_call(held))
            held = None
            moves.append(_transition(target, e, tool))
    if held is not None:
        moves.append(_call(held))
    return [_renamed(mv, state_map) for mv in moves]


def _call(e: Event) -> Move:
    state = e.state_before or ""
    return Move(state, state, None, e.tool, MODEL)


def _transition(target: WorkflowSpec, e: Event, tool: str | None) -> Move:
    event = e.event or ""
    by = "tool" if tool else PERSON if event in target.human_events else \
        CUSTOMER if event in target.customer_events else MODEL
    g = target.guards.get(event)
    return Move(e.state_before or "", e.state_after or "", event, tool, by,
                g.description if g else None, g.establishes if g else ())


def _renamed(mv: Move, names: Mapping[str, str]) -> Move:
    return Move(names.get(mv.source, mv.source), names.get(mv.target, mv.target), mv.event,
                mv.tool, mv.by, mv.guard, mv.establishes, mv.approved_call)
