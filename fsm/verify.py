"""The verifier: prove that forbidden sequences cannot happen, or show the shortest one.

A workflow declares its invariants next to its tables, in this vocabulary::

    INVARIANTS = (
        ToolOnlyIn("refund_item", "refunding"),
        OnlyThrough("refunding", "verified"),
        ToolOnlyAfter("refund_item", "approved", when="amount_above_limit"),
        HumanOnly("approved", "declined", "expired"),
        FiredOnlyByTools("refund_ok", "refund_failed", "sent"),
        AlwaysReaches("done", "handed_over"),
        AtMostOnce("refund_ok"),
        NoReentryAfter("refunding", "refund_ok"),
    )

:func:`verify` explores every path of the machine from the initial state — the
edges of :func:`fsm.diagram.extract`, so exactly what the diagram shows: who may
fire each event, the facts each guard establishes, the tools of each state. Each
invariant is a small monitor run alongside the machine; a breadth-first search over
(state, monitor) pairs visits each pair once, so cycles end, and the first breaking
move it finds ends the shortest counterexample. A guard is assumed able to pass
or fail; a tool listed for a non-terminal state is assumed callable there.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import cast

from fsm.diagram import MODEL, PERSON, TOOL_PREFIX, Diagram, extract
from fsm.errors import WorkflowDefinitionError
from fsm.spec import WorkflowSpec


class InvariantError(WorkflowDefinitionError):
    """Invariants that name states, events, tools or facts the workflow does not have."""


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
        parent: dict[str, Move | None] = {self.diagram.initial: None}
        queue = deque([self.diagram.initial])
        while queue:
            for mv in self.moves[queue.popleft()]:
                if mv.target not in parent:
                    parent[mv.target] = mv
                    queue.append(mv.target)
        return {state: _path(parent, state) for state in parent}


def _path(parent: dict[str, Move | None], state: str) -> tuple[Move, ...]:
    moves = []
    mv = parent[state]
    while mv is not None:
        moves.append(mv)
        mv = parent[mv.source]
    return tuple(reversed(moves))


@dataclass(frozen=True)
class Verdict:
    invariant: Invariant
    proved: bool
    #: The shortest path from the initial state whose last move breaks the invariant.
    counterexample: tuple[Move, ...] = ()
    #: What the counterexample breaks, in words.
    why: str = ""
    #: (state, monitor) pairs explored.
    explored: int = 0


#: Field name of an invariant → the kind of name it holds.
_KINDS = {"tool": "tools", "state": "states", "states": "states", "event": "events",
          "events": "events", "when": "facts"}


class Invariant(ABC):
    """A property of every run of a workflow."""

    @property
    @abstractmethod
    def title(self) -> str:
        """The property in words, names in backticks."""

    @abstractmethod
    def check(self, graph: Graph) -> Verdict: ...

    def names(self) -> dict[str, tuple[str, ...]]:
        """Names this invariant refers to, by kind: states, events, tools, facts."""
        out: dict[str, tuple[str, ...]] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            kind, value = _KINDS.get(f.name), getattr(self, f.name)
            if kind and value:
                out[kind] = out.get(kind, ()) + (value if isinstance(value, tuple) else (value,))
        return out


class Monitored(Invariant):
    """An invariant checked by a small monitor carried along every path."""

    def start(self) -> Hashable:
        return None

    @abstractmethod
    def bad(self, m: Hashable, mv: Move) -> str | None:
        """Why ``mv`` breaks the invariant in monitor state ``m``, or ``None``."""

    def step(self, m: Hashable, mv: Move) -> Hashable:
        return m

    def bad_start(self, d: Diagram) -> str | None:
        return None

    def check(self, graph: Graph) -> Verdict:
        why = self.bad_start(graph.diagram)
        if why is not None:
            return Verdict(self, False, (), why, 1)
        start = (graph.diagram.initial, self.start())
        parent: dict[tuple[str, Hashable], tuple[tuple[str, Hashable], Move] | None] = {
            start: None}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            for mv in graph.moves[here[0]]:
                why = self.bad(here[1], mv)
                if why is not None:
                    return Verdict(self, False, _trace(parent, here) + (mv,), why, len(parent))
                nxt = (mv.target, self.step(here[1], mv))
                if nxt not in parent:
                    parent[nxt] = (here, mv)
                    queue.append(nxt)
        return Verdict(self, True, explored=len(parent))


def _trace(parent: dict, here: tuple[str, Hashable]) -> tuple[Move, ...]:
    moves: list[Move] = []
    link = parent[here]
    while link is not None:
        here, mv = link
        moves.append(mv)
        link = parent[here]
    return tuple(reversed(moves))


def _q(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _no_person(mv: Move) -> bool:
    return mv.by != PERSON


# -- the vocabulary ----------------------------------------------------------------------

@dataclass(frozen=True, init=False)
class ToolOnlyIn(Monitored):
    """``tool`` may only run in the given states."""

    tool: str
    states: tuple[str, ...]

    def __init__(self, tool: str, *states: str) -> None:
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "states", tuple(states))

    @property
    def title(self) -> str:
        return f"`{self.tool}` runs only in {_q(self.states)}"


    def bad(self, m: Hashable, mv: Move) -> str | None:
        if mv.tool == self.tool and mv.source not in self.states:
            return f"`{self.tool}` runs in `{mv.source}`"
        return None


@dataclass(frozen=True)
class OnlyThrough(Monitored):
    """Every path into ``state`` passes through ``event`` first."""

    state: str
    event: str

    @property
    def title(self) -> str:
        return f"every path into `{self.state}` passes through `{self.event}`"


    def start(self) -> Hashable:
        return False

    def bad_start(self, d: Diagram) -> str | None:
        if d.initial == self.state:
            return f"runs start in `{self.state}` before any event"
        return None

    def bad(self, m: Hashable, mv: Move) -> str | None:
        seen = m or mv.event == self.event
        if mv.event is not None and mv.target == self.state and not seen:
            return f"`{self.state}` is entered and `{self.event}` never fired"
        return None

    def step(self, m: Hashable, mv: Move) -> Hashable:
        return bool(m) or mv.event == self.event


@dataclass(frozen=True)
class ToolOnlyAfter(Monitored):
    """``tool`` runs only after ``event`` (fired by a person, unless ``by_person=False``).

    With ``when``, only while that guard fact holds, and the event must come after the
    edge that established the fact.
    """

    tool: str
    event: str
    when: str | None = None
    by_person: bool = True

    @property
    def title(self) -> str:
        cond = f", while `{self.when}` holds," if self.when else ""
        who = "a person fires " if self.by_person else ""
        return f"`{self.tool}` runs{cond} only after {who}`{self.event}`"


    def start(self) -> Hashable:
        return (self.when is None, False)  # (the fact holds, the event fired since)

    def bad(self, m: Hashable, mv: Move) -> str | None:
        holds, fired = cast(tuple[bool, bool], m)
        if mv.tool == self.tool and holds and not fired:
            who = "no person has fired" if self.by_person else "nobody has fired"
            if self.when:
                return (f"`{self.tool}` runs while `{self.when}` holds, "
                        f"and {who} `{self.event}` since")
            return f"`{self.tool}` runs, and {who} `{self.event}` before"
        return None

    def step(self, m: Hashable, mv: Move) -> Hashable:
        holds, fired = cast(tuple[bool, bool], m)
        if self.when is not None and self.when in mv.establishes:
            holds, fired = True, False
        if mv.event == self.event and (mv.by == PERSON or not self.by_person):
            fired = True
        return (holds, fired)


@dataclass(frozen=True, init=False)
class HumanOnly(Monitored):
    """Only a person fires these events: never the model, never a tool."""

    events: tuple[str, ...]

    def __init__(self, *events: str) -> None:
        object.__setattr__(self, "events", tuple(events))

    @property
    def title(self) -> str:
        return f"{_q(self.events)} are fired only by a person"


    def bad(self, m: Hashable, mv: Move) -> str | None:
        if mv.event in self.events and _no_person(mv):
            who = f"the result of `{mv.tool}`" if mv.tool else "the model"
            return f"{who} fires `{mv.event}`"
        return None


@dataclass(frozen=True, init=False)
class FiredOnlyByTools(Monitored):
    """These events come only from the results of the tools that report them."""

    events: tuple[str, ...]

    def __init__(self, *events: str) -> None:
        object.__setattr__(self, "events", tuple(events))

    @property
    def title(self) -> str:
        return f"{_q(self.events)} are fired only by the results of their tools"


    def bad(self, m: Hashable, mv: Move) -> str | None:
        if mv.event in self.events and mv.tool is None:
            return f"the {mv.by} fires `{mv.event}` without any tool running"
        return None


@dataclass(frozen=True)
class AtMostOnce(Monitored):
    """``event`` fires at most once per run."""

    event: str

    @property
    def title(self) -> str:
        return f"`{self.event}` fires at most once per run"


    def start(self) -> Hashable:
        return False

    def bad(self, m: Hashable, mv: Move) -> str | None:
        if m and mv.event == self.event:
            return f"`{self.event}` fires a second time"
        return None

    def step(self, m: Hashable, mv: Move) -> Hashable:
        return bool(m) or mv.event == self.event


@dataclass(frozen=True)
class NoReentryAfter(Monitored):
    """Once ``event`` has fired, ``state`` is never entered again."""

    state: str
    event: str

    @property
    def title(self) -> str:
        return f"`{self.state}` is never entered again after `{self.event}`"


    def start(self) -> Hashable:
        return False

    def bad(self, m: Hashable, mv: Move) -> str | None:
        if m and mv.event is not None and mv.target == self.state:
            return f"`{self.state}` is entered again after `{self.event}`"
        return None

    def step(self, m: Hashable, mv: Move) -> Hashable:
        return bool(m) or mv.event == self.event


@dataclass(frozen=True, init=False)
class AlwaysReaches(Invariant):
    """From every reachable state, some path reaches one of these states."""

    states: tuple[str, ...]

    def __init__(self, *states: str) -> None:
        object.__setattr__(self, "states", tuple(states))

    @property
    def title(self) -> str:
        return f"every state can reach {' or '.join(f'`{s}`' for s in self.states)}"


    def check(self, graph: Graph) -> Verdict:
        paths = graph.reachable()
        back: dict[str, set[str]] = {s: set() for s in graph.moves}
        for moves in graph.moves.values():
            for mv in moves:
                back[mv.target].add(mv.source)
        can = set(self.states)
        queue = deque(self.states)
        while queue:
            for src in back.get(queue.popleft(), ()):
                if src not in can:
                    can.add(src)
                    queue.append(src)
        stuck = [s for s in paths if s not in can]
        if not stuck:
            return Verdict(self, True, explored=len(paths))
        why = f"from `{stuck[0]}` no path reaches {' or '.join(f'`{s}`' for s in self.states)}"
        if len(stuck) > 1:
            why += f" (nor from {_q(stuck[1:])})"
        return Verdict(self, False, paths[stuck[0]], why, len(paths))


# -- running and reporting ---------------------------------------------------------------

def check_names(diagram: Diagram, invariants: Iterable[object]) -> None:
    """Raise :class:`InvariantError` listing every invariant that names something unknown."""
    known = {
        "states": {n.name for n in diagram.nodes}, "events": {e.event for e in diagram.edges},
        "tools": set(diagram.tools), "facts": set(diagram.facts),
    }
    problems = []
    for i, inv in enumerate(invariants):
        if not isinstance(inv, Invariant):
            problems.append(f"invariants[{i}] is a {type(inv).__name__}, not an invariant "
                            "(use the classes of fsm.verify)")
            continue
        for kind, names in inv.names().items():
            for name in names:
                if name not in known[kind]:
                    allowed = ", ".join(sorted(known[kind])) or "none"
                    problems.append(f"{type(inv).__name__}: unknown {kind[:-1]} {name!r} "
                                    f"(known {kind}: {allowed})")
    if problems:
        raise InvariantError(diagram.workflow, problems)


#: What the explorer assumes about a run, printed in every Markdown report.
ASSUMPTIONS = (
    "- the model may call any tool listed for a state, any number of times, and fire any "
    "event offered to it;",
    "- a tool's result may fire any event the tool declares, or none;",
    "- a person fires only the approve, deny and expiry events, only in a state that waits "
    "for a person;",
    "- any guard may pass or fail; a guard that passes establishes the facts it declares "
    "(⇒), which hold for the rest of the path.",
)


@dataclass(frozen=True)
class Report:
    workflow: str
    definition_hash: str
    initial: str
    states: int
    moves: int
    verdicts: tuple[Verdict, ...]

    @property
    def ok(self) -> bool:
        return all(v.proved for v in self.verdicts)

    @property
    def summary(self) -> str:
        bad = sum(not v.proved for v in self.verdicts)
        n = len(self.verdicts)
        if n == 0:
            return "no invariants declared: nothing was proved"
        return f"{n} invariants: {n - bad} proved, {bad} violated"

    def text(self) -> str:
        out = [f"Verification of workflow {self.workflow!r} (definition {self.definition_hash})",
               f"Explored every path from {self.initial!r}: {self.states} reachable states, "
               f"{self.moves} moves.", ""]
        for v in self.verdicts:
            out.append(f"{'PROVED' if v.proved else 'VIOLATED':<9} {_plain(v.invariant.title)}")
            if not v.proved:
                out.append(f"          {_plain(v.why)}")
                out.append(f"          shortest counterexample ({len(v.counterexample)} moves):")
                out += [f"            {i}. {mv.describe()}"
                        for i, mv in enumerate(v.counterexample, 1)]
        return "\n".join(out + ["", self.summary + "."]) + "\n"

    def markdown(self) -> str:
        out = [f"# Verification of workflow `{self.workflow}`", "",
               f"Definition `{self.definition_hash}`. Generated by `fsm verify {self.workflow} "
               "--format md`; do not edit by hand.", "",
               f"Every path from `{self.initial}` was explored ({self.states} reachable states, "
               f"{self.moves} moves), with who may fire each event and the facts each guard "
               "establishes (see the workflow's diagram).", "", f"**{self.summary}.**", "",
               "| # | invariant | result |", "|---|---|---|"]
        for i, v in enumerate(self.verdicts, 1):
            out.append(f"| {i} | {v.invariant.title} | "
                       f"{'PROVED' if v.proved else '**VIOLATED**'} |")
        out += ["", "How the paths were explored:", "", *ASSUMPTIONS]
        for i, v in enumerate(self.verdicts, 1):
            if v.proved:
                continue
            out += ["", f"## {i}. VIOLATED: {v.invariant.title}", "", f"{v.why}.", "",
                    f"Shortest counterexample ({len(v.counterexample)} moves):", ""]
            out += [f"{j}. {mv.describe(md=True)}" for j, mv in enumerate(v.counterexample, 1)]
        return "\n".join(out) + "\n"


def _plain(text: str) -> str:
    return text.replace("`", "")


def verify(spec: WorkflowSpec, invariants: Iterable[object] | None = None) -> Report:
    """Check ``invariants`` (default: ``spec.invariants``) against every path of ``spec``."""
    diagram = extract(spec)
    chosen = tuple(spec.invariants if invariants is None else invariants)
    check_names(diagram, chosen)
    graph = Graph(diagram)
    verdicts = tuple(inv.check(graph) for inv in chosen if isinstance(inv, Invariant))
    reached = graph.reachable()
    moves = sum(len(graph.moves[s]) for s in reached)
    return Report(spec.name, spec.definition_hash, spec.initial, len(reached), moves, verdicts)
