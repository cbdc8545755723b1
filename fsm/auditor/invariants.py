"""The invariant vocabulary: small monitors run alongside the machine by :mod:`fsm.auditor.verify`.

Each invariant names states, events, tools or facts of a workflow; a breadth-first
search over (state, monitor) pairs finds the shortest path that breaks it, if any.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import cast

from fsm._reach import closure, path_to, reach
from fsm.auditor.diagram import PERSON, Diagram
from fsm.auditor.graph import Graph, Move

#: Field name of an invariant → the kind of name it holds.
_KINDS = {"tool": "tools", "state": "states", "states": "states", "event": "events",
          "events": "events", "unless": "facts", "tools": "tools"}


class Invariant(ABC):
    """A property of every run of a workflow."""

    @property
    @abstractmethod
    def title(self) -> str:
        """The property in words, names in backticks."""

    @abstractmethod
    def check(self, graph: Graph) -> Verdict: ...

    def check_from(self, graph: Graph, state: str, history: Iterable[Move]) -> Verdict:
        """The invariant over every path that continues a run which took the moves of
        ``history`` and is now in ``state`` (a migrated run). An invariant without a
        monitor is checked over every path from the initial state instead."""
        return self.check(graph)

    def references(self) -> dict[str, tuple[str, ...]]:
        """Names this invariant refers to, by kind: states, events, tools, facts.

        ``define_workflow`` checks them against the workflow's tables.
        """
        out: dict[str, tuple[str, ...]] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            kind, value = _KINDS.get(f.name), getattr(self, f.name)
            if kind and value:
                out[kind] = out.get(kind, ()) + (value if isinstance(value, tuple) else (value,))
        return out


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

    def allows(self, m: Hashable, mv: Move) -> bool:
        """Whether ``mv`` can happen in monitor state ``m`` (the runtime refuses it
        otherwise, so no path goes on through it). Default: every move can."""
        return True

    def check(self, graph: Graph) -> Verdict:
        why = self.bad_start(graph.diagram)
        if why is not None:
            return Verdict(self, False, (), why, 1)
        return self._search(graph, graph.diagram.initial, self.start())

    def check_from(self, graph: Graph, state: str, history: Iterable[Move]) -> Verdict:
        m = self.start()
        for mv in history:  # what the run's own path established, in the monitor
            m = self.step(m, mv)
        return self._search(graph, state, m)

    def _search(self, graph: Graph, state: str, start: Hashable) -> Verdict:
        parent = reach(
            [(state, start)],
            lambda here: (((mv.target, self.step(here[1], mv)), mv)
                          for mv in graph.moves[here[0]] if self.allows(here[1], mv)),
        )
        # Breadth-first order: the first breaking move found ends a shortest path.
        for here in parent:
            for mv in graph.moves[here[0]]:
                if not self.allows(here[1], mv):
                    continue
                why = self.bad(here[1], mv)
                if why is not None:
                    return Verdict(self, False, path_to(parent, here) + (mv,), why, len(parent))
        return Verdict(self, True, explored=len(parent))


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

    With ``unless``, a path on which a guard positively established that fact (e.g.
    ``amount_within_limit``) may run the tool without the event. A path on which no
    guard established it needs the event: the condition is never assumed. A guard
    that establishes facts starts a new decision, so what an earlier decision was
    granted (the fact, the event) does not carry over to it.
    """

    tool: str
    event: str
    unless: str | None = None
    by_person: bool = True

    @property
    def title(self) -> str:
        who = "a person fires " if self.by_person else ""
        text = f"`{self.tool}` runs only after {who}`{self.event}`"
        if self.unless:
            text += f", unless a guard established `{self.unless}`"
        return text

    def start(self) -> Hashable:
        return (False, False)  # (the unless-fact was established, the event fired since)

    def bad(self, m: Hashable, mv: Move) -> str | None:
        exempt, fired = cast(tuple[bool, bool], m)
        if mv.tool == self.tool and not exempt and not fired:
            who = "no person has fired" if self.by_person else "nobody has fired"
            if self.unless:
                return (f"`{self.tool}` runs, no guard established `{self.unless}`, "
                        f"and {who} `{self.event}`")
            return f"`{self.tool}` runs, and {who} `{self.event}` before"
        return None

    def step(self, m: Hashable, mv: Move) -> Hashable:
        exempt, fired = cast(tuple[bool, bool], m)
        if mv.establishes:
            exempt, fired = self.unless in mv.establishes, False
        if mv.event == self.event and (mv.by == PERSON or not self.by_person):
            fired = True
        return (exempt, fired)


@dataclass(frozen=True)
class ToolOnlyWith(Monitored):
    """``tool`` runs only where the last guarded move established ``fact``: every guard
    is a new decision, so a fact an earlier guard established does not carry over a later
    guard that does not establish it (e.g. ``cancel_reservation`` only after a proposal
    whose guard established ``cancellation_eligible``)."""

    tool: str
    fact: str

    @property
    def title(self) -> str:
        return f"`{self.tool}` runs only after a guard established `{self.fact}`"

    def references(self) -> dict[str, tuple[str, ...]]:
        return {"tools": (self.tool,), "facts": (self.fact,)}

    def start(self) -> Hashable:
        return False  # the last guarded move established the fact

    def bad(self, m: Hashable, mv: Move) -> str | None:
        if mv.tool == self.tool and not m:
            return f"`{self.tool}` runs, and no guard established `{self.fact}` before"
        return None

    def step(self, m: Hashable, mv: Move) -> Hashable:
        if mv.guard is not None or mv.establishes:
            return self.fact in mv.establishes
        return m


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

    def check_from(self, graph: Graph, state: str, history: Iterable[Move]) -> Verdict:
        return self._stuck(graph, graph.reachable(state))

    def check(self, graph: Graph) -> Verdict:
        return self._stuck(graph, graph.reachable())

    def _stuck(self, graph: Graph, paths: dict[str, tuple[Move, ...]]) -> Verdict:
        back: dict[str, set[str]] = {s: set() for s in graph.moves}
        for moves in graph.moves.values():
            for mv in moves:
                back[mv.target].add(mv.source)
        can = closure(self.states, back)
        stuck = [s for s in paths if s not in can]
        if not stuck:
            return Verdict(self, True, explored=len(paths))
        why = f"from `{stuck[0]}` no path reaches {' or '.join(f'`{s}`' for s in self.states)}"
        if len(stuck) > 1:
            why += f" (nor from {_q(stuck[1:])})"
        return Verdict(self, False, paths[stuck[0]], why, len(paths))
