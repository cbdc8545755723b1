"""The machine as a graph of moves: what can happen in each state, and who does it."""

from __future__ import annotations

from dataclasses import dataclass

from fsm._reach import path_to, reach
from fsm.auditor.diagram import CUSTOMER, MODEL, PERSON, TOOL_PREFIX, Diagram, Node


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
    #: The fact key of the proposal a call runs on (its tool's ``confirmed_by``): the
    #: runtime refuses it unless the customer confirmed exactly that call.
    bound: str | None = None
    #: The tool is a write.
    write: bool = False
    #: The event enters a state that waits for the customer, who is shown the record kept
    #: under this key (``""``: a state entered without a record).
    shows: str | None = None
    #: The customer's reply confirms the proposal the run waits on (the confirm event).
    confirms: bool = False
    #: The customer did not reply in time (the expiry event): no yes is held any more.
    expires: bool = False

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
        elif self.by == CUSTOMER:
            text = f"{q(self.source)}: the customer's reply fires {q(self.event or '')}"
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
        bound = dict(diagram.bindings)
        writes = set(diagram.writes)
        for node in diagram.nodes:
            if node.terminal:
                continue  # the run has ended: nothing more happens
            for tool in node.tools:
                if self._always_leaves(diagram, node, tool):
                    continue  # its result always fires an event that leaves: no loop
                self.moves[node.name].append(Move(
                    node.name, node.name, None, tool, MODEL,
                    approved_call=tool in node.approval_tools, bound=bound.get(tool),
                    write=tool in writes))
        for e in diagram.edges:
            shows = (e.record or "") if nodes[e.target].waits_for_customer else None
            for who in e.firers:
                by_tool = who[len(TOOL_PREFIX):] if who.startswith(TOOL_PREFIX) else None
                customer = who == CUSTOMER
                self.moves[e.source].append(Move(
                    e.source, e.target, e.event, by_tool, "tool" if by_tool else who, e.guard,
                    e.establishes,
                    approved_call=by_tool in nodes[e.source].approval_tools,
                    bound=bound.get(by_tool or ""), write=by_tool in writes, shows=shows,
                    confirms=customer and e.event == diagram.confirm_event
                    and nodes[e.source].waits_for_customer,
                    expires=customer and e.event == diagram.expiry_event,
                ))

    @staticmethod
    def _always_leaves(diagram: Diagram, node: Node, tool: str) -> bool:
        """Whether every result of ``tool`` in ``node`` moves the run on: the tool always
        fires an event, and each event it declares leaves ``node`` with no guard."""
        declared = dict(diagram.always_emits).get(tool)
        if declared is None:
            return False
        fired = [e for e in diagram.edges_from(node.name) if f"{TOOL_PREFIX}{tool}" in e.firers]
        return bool(fired) and all(e.guard is None for e in fired) and \
            {e.event for e in fired} >= set(declared)

    def reachable(self, start: str | None = None) -> dict[str, tuple[Move, ...]]:
        """Each state reachable from ``start`` (default: the initial state) → the shortest
        path to it, in breadth-first order."""
        parent = reach([self.diagram.initial if start is None else start],
                       lambda state: ((mv.target, mv) for mv in self.moves[state]))
        return {state: path_to(parent, state) for state in parent}
