"""The definition checks behind :func:`fsm.definition.spec.define_workflow`.

Each check lists every offender, not the first; all problems are reported together.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsm._reach import closure
from fsm.definition.conversation_checks import conversation_problems
from fsm.definition.guards import Guard
from fsm.definition.tools import ADVANCE, ToolSpec


class Tables(BaseModel):
    """The shape of the tables, checked before their meaning."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    transitions: dict[str, dict[str, str]]
    tools_by_state: dict[str, list[str]]
    initial: str
    human_events: frozenset[str] = frozenset()
    terminal: frozenset[str] | None = None
    handed_over_states: frozenset[str] = frozenset()
    finish_states: frozenset[str] = frozenset()
    records: dict[str, str] = {}
    instructions: dict[str, str] = {}
    expiry_event: str | None = None
    approve_event: str = "approved"
    deny_event: str = "declined"
    approval_ttl_seconds: float = Field(default=72 * 3600, gt=0)
    customer_events: frozenset[str] = frozenset()
    asks_customer: frozenset[str] = frozenset()
    confirm_event: str = "confirmed"
    reply_ttl_seconds: float | None = Field(default=None, gt=0)
    reply_expiry_event: str | None = None


def quoted(items: Any) -> str:
    """``items`` sorted, each in quotes: "'a', 'b'"."""
    return ", ".join(repr(i) for i in sorted(items))


def invariant_problems(invariants: Any, known: Mapping[str, set[str]]) -> list[str]:
    """What is wrong with ``invariants``, given the names a workflow has by kind.

    An invariant is any object with ``references() -> {kind: names}``, the kinds being
    ``states``, ``events``, ``tools`` and ``facts`` (the facts guards establish).
    """
    if not isinstance(invariants, (list, tuple)):
        kind = type(invariants).__name__
        what = f"a single {kind}" if hasattr(invariants, "references") else f"a {kind}"
        return [f"invariants must be a list or tuple, got {what}: write invariants=(...,)"]
    out = []
    for i, inv in enumerate(invariants):
        refs = getattr(inv, "references", None)
        if not callable(refs):
            out.append(f"invariants[{i}] is a {type(inv).__name__}, not an invariant "
                       "(use the classes of fsm.auditor.verify)")
            continue
        for kind, names in refs().items():
            for n in names:
                if n not in known.get(kind, set()):
                    allowed = ", ".join(sorted(known.get(kind, ()))) or "none"
                    out.append(f"{type(inv).__name__}: unknown {kind[:-1]} {n!r} "
                               f"(known {kind}: {allowed})")
    return out


@dataclass
class Check:
    """Runs every definition check; each lists all of its offenders."""

    t: Tables
    tools: dict[str, ToolSpec]
    guards: dict[str, Any]
    payloads: dict[str, type[BaseModel]]
    invariants: Any
    #: The workflow's ``interpret`` hook (conversations with customers).
    interpret: Any = None
    states: tuple[str, ...] = field(init=False)
    terminal: frozenset[str] = field(init=False)
    #: Targets declared nowhere; reported once, then treated as ends so that no
    #: other check repeats the mistake.
    undeclared: dict[str, list[str]] = field(init=False, default_factory=dict)
    #: Every event of the table.
    events: set[str] = field(init=False)
    #: Where a run may end: terminal and finish states, and the undeclared targets.
    ends: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        t = self.t
        declared = dict.fromkeys(
            [*t.transitions, *sorted(t.terminal or ()), *sorted(t.handed_over_states)])
        for src, events in t.transitions.items():
            for event, dst in events.items():
                if dst not in declared:
                    self.undeclared.setdefault(dst, []).append(f"{src} --{event}-->")
        self.states = tuple(declared) + tuple(self.undeclared)
        ends = t.terminal if t.terminal is not None else frozenset(
            s for s, ev in t.transitions.items() if not ev and s not in t.finish_states)
        self.terminal = frozenset(ends) | t.handed_over_states
        self.events = {e for ev in t.transitions.values() for e in ev}
        self.ends = self.terminal | t.finish_states | set(self.undeclared)

    def problems(self) -> list[str]:
        out: list[str] = []
        for check in (
            self._undeclared, self._unknown_states, self._dead_ends, self._reachability,
            self._tools, self._event_references, self._people, self._guards,
            self._invariants, self._collisions, self._customers,
        ):
            out.extend(check())
        return out

    def _undeclared(self) -> list[str]:
        out = []
        known = [s for s in self.states if s not in self.undeclared]
        for dst, froms in self.undeclared.items():
            close = difflib.get_close_matches(dst, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            out.append(
                f"transition target {dst!r} ({', '.join(froms)}) is not a declared state"
                f"{hint} (declare end states with terminal= or handed_over_states=)")
        return out

    def _unknown_states(self) -> list[str]:
        out = []
        if self.t.initial not in self.states:
            out.append(f"initial state {self.t.initial!r} is not in TRANSITIONS")
        for label, names in (
            ("finish_states", self.t.finish_states),
            ("instructions", set(self.t.instructions)),
        ):
            bad = set(names) - set(self.states)
            if bad:
                out.append(f"{label} names states not in TRANSITIONS: {quoted(bad)}")
        return out

    def _dead_ends(self) -> list[str]:
        dead = [s for s in self.states if s not in self.ends and not self.t.transitions.get(s)]
        out = []
        if dead:
            out.append(f"non-terminal states with no way out: {quoted(dead)} "
                       "(list them in terminal= if runs end there)")
        # A hand-over state may be left by events only a person fires: a person at the
        # desk resumes the run with one of them.
        exiting_terminals = [s for s in self.terminal if self.t.transitions.get(s)
                             and s not in self.t.handed_over_states]
        if exiting_terminals:
            out.append(f"terminal states with outgoing events: {quoted(exiting_terminals)}")
        for state in sorted(self.t.handed_over_states):
            others = [e for e in self.t.transitions.get(state, {})
                      if e not in self.t.human_events]
            if others:
                out.append(f"hand-over state {state!r} may only be left by human-only events "
                           f"(a person resumes the run from the desk), not {quoted(others)}; "
                           "add them to human_events or remove them")
        return out

    def _reachability(self) -> list[str]:
        if self.t.initial not in self.states:
            return []
        graph = {s: set(self.t.transitions.get(s, {}).values()) for s in self.states}
        reached = closure([self.t.initial], graph)
        out = []
        unreachable = [s for s in self.states if s not in reached]
        if unreachable:
            out.append(f"states unreachable from {self.t.initial!r}: {quoted(unreachable)}")
        reverse: dict[str, set[str]] = {s: set() for s in self.states}
        for src, dsts in graph.items():
            for d in dsts:
                reverse[d].add(src)
        stuck = [s for s in self.states if s not in closure(sorted(self.ends), reverse)]
        if stuck:
            out.append(f"these states cannot reach a terminal state: {quoted(stuck)}")
        return out

    def _tools(self) -> list[str]:
        out = []
        named = {t for ts in self.t.tools_by_state.values() for t in ts}
        missing = named - set(self.tools)
        if missing:
            out.append(
                f"tools named in TOOLS_BY_STATE but not registered: {quoted(missing)} "
                f"(registered: {quoted(self.tools) or 'none'})"
            )
        bad_states = set(self.t.tools_by_state) - set(self.states)
        if bad_states:
            out.append("states in TOOLS_BY_STATE that are not in the machine: "
                       f"{quoted(bad_states)}")
        bad_emits = {
            f"{t.name} → {e}" for t in self.tools.values() for e in t.emits_events
            if e not in self.events
        }
        if bad_emits:
            out.append(f"tools emit events that do not exist: {quoted(bad_emits)}")
        undeclared = {t.name for t in self.tools.values() if t.emits and not t.emits_events}
        if undeclared:
            out.append(f"tools with emits name no emits_events (every event emits may "
                       f"return): {quoted(undeclared)}")
        return out

    def _event_references(self) -> list[str]:
        out = []
        events = self.events
        for label, names in (
            ("guards", set(self.guards)),
            ("payload models", set(self.payloads)),
            ("records", set(self.t.records)),
            ("human-only events", set(self.t.human_events)),
        ):
            bad = names - events
            if bad:
                out.append(f"{label} for events that do not exist: {quoted(bad)}")
        exp = self.t.expiry_event
        if exp is not None and exp not in self.t.human_events:
            out.append(f"expiry event {exp!r} must be one of the human-only events")
        return out

    def _people(self) -> list[str]:
        """A state with human events must wait for a person, and a person must be able
        to decide it: every way out human, no tools, and real approve/deny events."""
        human = self.t.human_events
        out = []
        waiting = []
        for state, events in self.t.transitions.items():
            mine = [e for e in events if e in human]
            if not mine or state in self.t.handed_over_states:
                continue  # a hand-over state's events are the desk's, checked above
            others = [e for e in events if e not in human and e not in self.t.customer_events]
            tools = self.t.tools_by_state.get(state)
            if others:
                out.append(f"state {state!r} has human-only events ({quoted(mine)}) and "
                           f"events the model or a tool fires ({quoted(others)}): the run "
                           "never pauses there, so no person can fire them; make every way "
                           f"out of {state!r} human, or none")
            elif state in self.t.finish_states:
                out.append(f"state {state!r} waits for a person ({quoted(mine)}) but is a "
                           "finish state, where the model's final answer ends the run")
            else:
                waiting.append(state)
                if tools:
                    out.append(f"state {state!r} waits for a person, so its tools can "
                               f"never be called: {quoted(tools)}")
        if waiting:
            for label, event in (("approve_event", self.t.approve_event),
                                 ("deny_event", self.t.deny_event)):
                if event not in human:
                    out.append(f"{label} {event!r} is not a human-only event of this "
                               f"workflow (human-only events: {quoted(human)})")
            if self.t.approve_event == self.t.deny_event:
                out.append(f"approve_event and deny_event are both {self.t.approve_event!r}")
        return out

    def _guards(self) -> list[str]:
        out = []
        for event, g in self.guards.items():
            if not isinstance(g, Guard):
                out.append(f"guard of event {event!r} is a {type(g).__name__}, not a Guard "
                           "(write Guard(description, fn) or decorate fn with "
                           "@guard(description))")
            elif not callable(g.fn):
                out.append(f"guard of event {event!r} ({g.description}) has no function "
                           "(give fn(facts, payload) -> bool)")
        return out

    def _invariants(self) -> list[str]:
        facts = {f for g in self.guards.values() if isinstance(g, Guard) for f in g.establishes}
        known = {"states": set(self.states), "events": self.events,
                 "tools": set(self.tools), "facts": facts}
        return invariant_problems(self.invariants, known)

    def _customers(self) -> list[str]:
        return conversation_problems(self)

    def _collisions(self) -> list[str]:
        clash = (self.events & set(self.tools)) | (self.events & {ADVANCE})
        if ADVANCE in self.tools:
            clash.add(ADVANCE)
        if clash:
            return [f"event names collide with tool names: {quoted(clash)}"]
        return []
