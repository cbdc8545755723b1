"""The machine as a graph of moves: what can happen in each state, and who does it."""

from __future__ import annotations

from dataclasses import dataclass

from fsm.auditor.diagram import MODEL, PERSON, TOOL_PREFIX, Diagram
from fsm.reach import path_to, reach


@dataclass(frozen=True)
class Move:
    """One thing that can happen in a state: a tool call, an event, or both."""

    source: str
    target: str
    #: The event fired, or ``None`` for a tool call that fires none.
    event: str | None
    #: The tool called (whose result fires ``event``, if any).
    tool: str | None
    #: ``"model"``, ``"person"`` or ``"tool"``: who fires the event (or calls the tool).
    by: str
    guard: str | None = None
    establishes: tuple[str, ...] = ()
    #: The tool call waits for a person's approval first.
    approved_call: bool = False

    def describe(self, md: bool = False) -> str:
        q = (lambda s: f"`{s}`") if md else (lambda s: s)
        if self.tool is not None:
            text = f"{q(self.source)}: the model calls {q(self.tool)}"
            if self.approved_call:
                text += " (after a person approves the call)"
            if self.event is not None:
                text += f"; its result fires {q(self.event)}"
        elif self.by == PERSON:
            text = f"{q(self.source)}: a person fires {q(self.event or '')}"
        else:
            text = f"{q(self.source)}: the model fires {q(self.event or '')}"
        if self.event is not None:
            if self.guard:
                text += f" [{self.guard}]"
            if self.establishes:
                text += f" ⇒ {', '.join(self.establishes)}"
            text += f" → {q(self.target)}"
        return text


class Graph:
    """Every move of every state of a diagram, in table order."""

    def __init__(self, diagram: Diagram) -> None:
        self.diagram = diagram
        self.moves: dict[str, list[Move]] = {n.name: [] for n in diagram.nodes}
        nodes = {n.name: n for n in diagram.nodes}
        for node in diagram.nodes:
            if node.terminal:
                continue  # the run has ended: nothing more happens
            for tool in node.tools:
                self.moves[node.name].append(Move(
                    node.name, node.name, None, tool, MODEL,
                    approved_call=tool in node.approval_tools))
        for e in diagram.edges:
            for who in e.firers:
                by_tool = who[len(TOOL_PREFIX):] if who.startswith(TOOL_PREFIX) else None
                self.moves[e.source].append(Move(
                    e.source, e.target, e.event, by_tool, "tool" if by_tool else who, e.guard,
                    e.establishes,
                    approved_call=by_tool in nodes[e.source].approval_tools,
                ))

    def reachable(self) -> dict[str, tuple[Move, ...]]:
        """Each reachable state → the shortest path to it, in breadth-first order."""
        parent = reach([self.diagram.initial],
                       lambda state: ((mv.target, mv) for mv in self.moves[state]))
        return {state: path_to(parent, state) for state in parent}
