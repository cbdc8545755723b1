"""Workflow definitions: plain tables in, one validated, frozen spec out.

A workflow author writes ``TRANSITIONS`` and ``TOOLS_BY_STATE`` as dict literals and
passes them, with guards, payload models and tools, to :func:`define_workflow`.
Every problem in the tables is collected and raised as one
:class:`~fsm.errors.WorkflowDefinitionError`.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fsm.errors import WorkflowDefinitionError
from fsm.tools import Facts, ToolSpec

#: The synthetic tool through which the model fires workflow events.
ADVANCE = "advance"


@dataclass(frozen=True)
class Guard:
    """A condition on an event: ``fn(facts, payload) -> bool``.

    ``description`` is what auditors and the model read ("amount ≤ ₹500"), never the
    source code. ``establishes`` names facts that hold on every path through the
    guarded edge; the verifier reasons with them (e.g. ``"amount_above_limit"``).
    """

    description: str
    fn: Callable[[Facts, dict[str, Any]], bool]
    establishes: tuple[str, ...] = ()


def guard(description: str, *, establishes: tuple[str, ...] = ()) -> Callable[..., Guard]:
    """Decorator form of :class:`Guard`."""

    def wrap(fn: Callable[[Facts, dict[str, Any]], bool]) -> Guard:
        return Guard(description, fn, establishes)

    return wrap


class _Tables(BaseModel):
    """The shape of the tables, checked before their meaning."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    transitions: dict[str, dict[str, str]]
    tools_by_state: dict[str, list[str]]
    initial: str
    human_events: frozenset[str] = frozenset()
    terminal: frozenset[str] | None = None
    handed_over_states: frozenset[str] = frozenset({"handed_over"})
    finish_states: frozenset[str] = frozenset()
    records: dict[str, str] = {}
    instructions: dict[str, str] = {}
    expiry_event: str | None = None
    approve_event: str = "approved"
    deny_event: str = "declined"
    approval_ttl_seconds: float = Field(default=72 * 3600, gt=0)


class WorkflowSpec(BaseModel):
    """A validated workflow. Build it with :func:`define_workflow`, not directly."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    #: state → event → next state.
    transitions: dict[str, dict[str, str]]
    #: state → names of the tools the model may call there.
    tools_by_state: dict[str, tuple[str, ...]]
    #: The state a run starts in.
    initial: str
    #: Every state, in table order.
    states: tuple[str, ...]
    #: States with no outgoing events; reaching one ends the run.
    terminal: frozenset[str]
    #: Terminal states that end the run as ``handed_over`` rather than ``done``.
    handed_over_states: frozenset[str]
    #: Non-terminal states in which a final answer ends the run as ``done``.
    finish_states: frozenset[str]
    #: Events only a person may fire; never offered to the model.
    human_events: frozenset[str]
    #: event → guard.
    guards: dict[str, Guard]
    #: event → pydantic model of the payload the event carries.
    payloads: dict[str, type[BaseModel]]
    #: event → fact key its validated payload is stored under when it fires.
    records: dict[str, str]
    #: tool name → tool.
    tools: dict[str, ToolSpec]
    #: state → instructions for the model while in that state.
    instructions: dict[str, str]
    system_prompt: str = ""
    #: Human event fired when an approval expires (e.g. ``expired``).
    expiry_event: str | None = None
    #: Human event fired when a reviewer approves a paused state.
    approve_event: str = "approved"
    #: Human event fired when a reviewer denies a paused state.
    deny_event: str = "declined"
    approval_ttl_seconds: float = 72 * 3600
    #: Invariants the verifier proves (see :mod:`fsm.auditor.verify`).
    invariants: tuple[Any, ...] = ()
    #: Free-form settings the workflow's own code reads (e.g. the approval limit).
    settings: dict[str, Any] = {}

    def events_from(self, state: str) -> dict[str, str]:
        return self.transitions.get(state, {})

    @cached_property
    def tool_events(self) -> frozenset[str]:
        """Events only tools fire, from their results (e.g. ``refund_ok``)."""
        return frozenset(e for t in self.tools.values() for e in t.emits_events)

    def model_events(self, state: str) -> list[str]:
        """Events the model may fire from ``state`` (human-only and tool events left out)."""
        return [
            e for e in self.events_from(state)
            if e not in self.human_events and e not in self.tool_events
        ]

    def waits_for_person(self, state: str) -> bool:
        """True when every way out of ``state`` is a human-only event."""
        events = self.events_from(state)
        return (
            bool(events) and state not in self.finish_states
            and all(e in self.human_events for e in events)
        )

    def allowed_tools(self, state: str) -> tuple[str, ...]:
        return self.tools_by_state.get(state, ())

    def is_write_state(self, state: str) -> bool:
        return any(self.tools[t].write for t in self.allowed_tools(state))

    @cached_property
    def definition_hash(self) -> str:
        """SHA-256 of everything that changes behaviour; runs record it."""
        public = {
            "name": self.name,
            "transitions": self.transitions,
            "tools_by_state": {s: list(t) for s, t in self.tools_by_state.items()},
            "initial": self.initial,
            "human_events": sorted(self.human_events),
            "finish_states": sorted(self.finish_states),
            "guards": {e: g.description for e, g in sorted(self.guards.items())},
            "payloads": {e: m.model_json_schema() for e, m in sorted(self.payloads.items())},
            "records": self.records,
            "tools": {n: t.public() for n, t in sorted(self.tools.items())},
            "expiry_event": self.expiry_event,
            "system_prompt": self.system_prompt,
            "instructions": self.instructions,
            # Hooks (functions) in settings describe a run to people (the inbox); they
            # do not change how it runs, and a function has no stable text form.
            "settings": {k: v for k, v in self.settings.items() if not callable(v)},
        }
        blob = json.dumps(public, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @cached_property
    def view_cache(self) -> dict[Any, Any]:
        """Per-spec memo of things the view rebuilds every step (tool schemas)."""
        return {}

    @cached_property
    def machine(self) -> Any:
        """The compiled ``transitions`` machine (built once per workflow)."""
        from fsm.machine import WorkflowMachine

        return WorkflowMachine(self)


def define_workflow(
    name: str,
    *,
    transitions: Mapping[str, Mapping[str, str]],
    tools_by_state: Mapping[str, list[str]],
    initial: str,
    tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
    human_events: set[str] | frozenset[str] | tuple[str, ...] = (),
    guards: Mapping[str, Guard] | None = None,
    payloads: Mapping[str, type[BaseModel]] | None = None,
    records: Mapping[str, str] | None = None,
    instructions: Mapping[str, str] | None = None,
    system_prompt: str = "",
    terminal: set[str] | None = None,
    handed_over_states: set[str] | frozenset[str] = frozenset({"handed_over"}),
    finish_states: set[str] | frozenset[str] = frozenset(),
    expiry_event: str | None = None,
    approve_event: str = "approved",
    deny_event: str = "declined",
    approval_ttl_seconds: float = 72 * 3600,
    invariants: tuple[Any, ...] | list[Any] = (),
    settings: Mapping[str, Any] | None = None,
) -> WorkflowSpec:
    """Validate the tables and return the frozen :class:`WorkflowSpec`."""
    try:
        tables = _Tables(
            # pydantic checks the shape of whatever mappings it is given.
            name=name, transitions=transitions,  # type: ignore[arg-type]
            tools_by_state=tools_by_state,  # type: ignore[arg-type]
            initial=initial, human_events=frozenset(human_events),
            terminal=frozenset(terminal) if terminal is not None else None,
            handed_over_states=frozenset(handed_over_states),
            finish_states=frozenset(finish_states), records=dict(records or {}),
            instructions=dict(instructions or {}), expiry_event=expiry_event,
            approve_event=approve_event, deny_event=deny_event,
            approval_ttl_seconds=approval_ttl_seconds,
        )
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise WorkflowDefinitionError(name or "?", problems) from None
    tool_map: dict[str, ToolSpec] = {}
    duplicates = sorted({t.name for t in tools if sum(u.name == t.name for u in tools) > 1})
    for t in tools:
        tool_map[t.name] = t
    ctx = _Check(tables, tool_map, dict(guards or {}), dict(payloads or {}))
    problems = ctx.problems()
    if duplicates:
        problems.append(f"tools registered twice: {_names(duplicates)}")
    if problems:
        raise WorkflowDefinitionError(name, problems)
    return WorkflowSpec(
        name=name,
        transitions={s: dict(ev) for s, ev in tables.transitions.items()},
        tools_by_state={s: tuple(ts) for s, ts in tables.tools_by_state.items()},
        initial=initial,
        states=ctx.states,
        terminal=ctx.terminal,
        handed_over_states=tables.handed_over_states & ctx.terminal,
        finish_states=tables.finish_states,
        human_events=tables.human_events,
        guards=dict(guards or {}),
        payloads=dict(payloads or {}),
        records=tables.records,
        tools=tool_map,
        instructions=tables.instructions,
        system_prompt=system_prompt,
        expiry_event=expiry_event,
        approve_event=approve_event,
        deny_event=deny_event,
        approval_ttl_seconds=approval_ttl_seconds,
        invariants=tuple(invariants),
        settings=dict(settings or {}),
    )


def _names(items: Any) -> str:
    return ", ".join(repr(i) for i in sorted(items))


@dataclass
class _Check:
    """Runs every definition check; each lists all of its offenders."""

    t: _Tables
    tools: dict[str, ToolSpec]
    guards: dict[str, Guard]
    payloads: dict[str, type[BaseModel]]
    states: tuple[str, ...] = ()
    terminal: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        seen: dict[str, None] = {}
        for src, events in self.t.transitions.items():
            seen[src] = None
            for dst in events.values():
                seen[dst] = None
        self.states = tuple(seen)
        exits = {s for s, ev in self.t.transitions.items() if ev}
        self.terminal = self.t.terminal if self.t.terminal is not None else frozenset(
            s for s in self.states if s not in exits and s not in self.t.finish_states
        )

    @property
    def events(self) -> set[str]:
        return {e for ev in self.t.transitions.values() for e in ev}

    def problems(self) -> list[str]:
        out: list[str] = []
        for check in (
            self._unknown_states, self._dead_ends, self._reachability, self._tools,
            self._event_references, self._collisions,
        ):
            out.extend(check())
        return out

    def _unknown_states(self) -> list[str]:
        out = []
        if self.t.initial not in self.states:
            out.append(f"initial state {self.t.initial!r} is not in TRANSITIONS")
        if self.t.terminal is not None:
            bad = set(self.t.terminal) - set(self.states)
            if bad:
                out.append(f"terminal states not in TRANSITIONS: {_names(bad)}")
        for label, names in (
            ("finish_states", self.t.finish_states),
            ("instructions", set(self.t.instructions)),
        ):
            bad = set(names) - set(self.states)
            if bad:
                out.append(f"{label} names states not in TRANSITIONS: {_names(bad)}")
        return out

    def _dead_ends(self) -> list[str]:
        dead = [
            s for s in self.states
            if s not in self.terminal and s not in self.t.finish_states
            and not self.t.transitions.get(s)
        ]
        out = []
        if dead:
            out.append(f"non-terminal states with no way out: {_names(dead)}")
        exiting_terminals = [s for s in self.terminal if self.t.transitions.get(s)]
        if exiting_terminals:
            out.append(f"terminal states with outgoing events: {_names(exiting_terminals)}")
        return out

    def _reachability(self) -> list[str]:
        if self.t.initial not in self.states:
            return []
        graph = {s: set(self.t.transitions.get(s, {}).values()) for s in self.states}
        reached = _closure([self.t.initial], graph)
        out = []
        unreachable = [s for s in self.states if s not in reached]
        if unreachable:
            out.append(f"states unreachable from {self.t.initial!r}: {_names(unreachable)}")
        reverse: dict[str, set[str]] = {s: set() for s in self.states}
        for src, dsts in graph.items():
            for d in dsts:
                reverse[d].add(src)
        finishing = _closure(list(self.terminal | self.t.finish_states), reverse)
        stuck = [s for s in self.states if s not in finishing]
        if stuck:
            out.append(f"these states cannot reach a terminal state: {_names(stuck)}")
        return out

    def _tools(self) -> list[str]:
        out = []
        named = {t for ts in self.t.tools_by_state.values() for t in ts}
        missing = named - set(self.tools)
        if missing:
            out.append(
                f"tools named in TOOLS_BY_STATE but not registered: {_names(missing)} "
                f"(registered: {_names(self.tools) or 'none'})"
            )
        bad_states = set(self.t.tools_by_state) - set(self.states)
        if bad_states:
            out.append("states in TOOLS_BY_STATE that are not in the machine: "
                       f"{_names(bad_states)}")
        bad_emits = {
            f"{t.name} → {e}" for t in self.tools.values() for e in t.emits_events
            if e not in self.events
        }
        if bad_emits:
            out.append(f"tools emit events that do not exist: {_names(bad_emits)}")
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
                out.append(f"{label} for events that do not exist: {_names(bad)}")
        exp = self.t.expiry_event
        if exp is not None and exp not in self.t.human_events:
            out.append(f"expiry event {exp!r} must be one of the human-only events")
        return out

    def _collisions(self) -> list[str]:
        clash = (self.events & set(self.tools)) | (self.events & {ADVANCE})
        if ADVANCE in self.tools:
            clash.add(ADVANCE)
        if clash:
            return [f"event names collide with tool names: {_names(clash)}"]
        return []


def _closure(start: list[str], graph: dict[str, set[str]]) -> set[str]:
    seen = set(start)
    queue = deque(start)
    while queue:
        for nxt in graph.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen
