"""The invariant vocabulary: small monitors run alongside the machine by :mod:`fsm.auditor.verify`.

Each invariant names states, events, tools or facts of a workflow; a breadth-first
search over (state, monitor) pairs finds the shortest path that breaks it, if any.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import cast

from fsm.auditor.diagram import PERSON, Diagram
from fsm.auditor.graph import Graph, Move, Verdict

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
