"""Workflow definitions: plain tables in, one validated, frozen spec out.

A workflow author writes ``TRANSITIONS`` and ``TOOLS_BY_STATE`` as dict literals and
passes them, with guards, payload models and tools, to :func:`define_workflow`.
Every problem in the tables is collected and raised as one
:class:`~fsm.errors.WorkflowDefinitionError`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fsm.errors import WorkflowDefinitionError
from fsm.reach import closure
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
    handed_over_states: frozenset[str] = frozenset()
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
    #: How long a request for a person's decision stays open, in seconds.
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

    def person_events(self, state: str) -> list[str]:
        """Events a person may fire from ``state``: all of them, if the run waits there."""
        return list(self.events_from(state)) if self.waits_for_person(state) else []

    def allowed_tools(self, state: str) -> tuple[str, ...]:
        return self.tools_by_state.get(state, ())

    def behaviour(self) -> dict[str, Any]:
        """Every field of :data:`HASHED_FIELDS` as plain data: what the hash covers."""
        return {name: _plain(getattr(self, name)) for name in HASHED_FIELDS}

    @cached_property
    def definition_hash(self) -> str:
        """SHA-256 of :meth:`behaviour`; runs record it, and resuming checks it."""
        blob = json.dumps(self.behaviour(), sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @cached_property
    def cache(self) -> dict[Any, Any]:
        """Per-spec memo for what the runtime builds once per workflow (the compiled
        machine, tool schemas). Each user keys its entries with its own objects."""
        return {}

    @property
    def view_cache(self) -> dict[Any, Any]:
        """The same memo as :attr:`cache` (the view keys it by offered tools and events)."""
        return self.cache


#: The fields that change what a run does; :attr:`WorkflowSpec.definition_hash` covers
#: exactly these, so a paused run never resumes under a definition that means otherwise.
HASHED_FIELDS: tuple[str, ...] = (
    "name", "transitions", "tools_by_state", "initial", "terminal", "handed_over_states",
    "finish_states", "human_events", "guards", "payloads", "records", "tools",
    "instructions", "system_prompt", "expiry_event", "approve_event", "deny_event",
    "approval_ttl_seconds", "settings",
)
#: The other fields, and why they leave the hash alone.
UNHASHED_FIELDS: dict[str, str] = {
    "states": "derived from transitions, terminal and handed_over_states",
    "invariants": "what fsm verify proves; they do not change what a run does",
}


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data, the same in every process."""
    if isinstance(value, Guard):
        return {"description": value.description, "establishes": list(value.establishes)}
    if isinstance(value, ToolSpec):
        return value.public()
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value.model_json_schema()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


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
    terminal: set[str] | frozenset[str] | None = None,
    handed_over_states: set[str] | frozenset[str] = frozenset(),
    finish_states: set[str] | frozenset[str] = frozenset(),
    expiry_event: str | None = None,
    approve_event: str = "approved",
    deny_event: str = "declined",
    approval_ttl_seconds: float = 72 * 3600,
    invariants: tuple[Any, ...] | list[Any] = (),
    settings: Mapping[str, Any] | None = None,
) -> WorkflowSpec:
    """Validate the tables and return the frozen :class:`WorkflowSpec`.

    Every problem found is listed in one :class:`~fsm.errors.WorkflowDefinitionError`.
    """
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
    tool_map = {t.name: t for t in tools}
    duplicates = sorted({t.name for t in tools if sum(u.name == t.name for u in tools) > 1})
    ctx = _Check(tables, tool_map, dict(guards or {}), dict(payloads or {}), invariants)
    problems = ctx.problems()
    if duplicates:
        problems.append(f"tools registered twice: {_names(duplicates)}")
    if problems:
        raise WorkflowDefinitionError(name, problems)
    return WorkflowSpec(
        name=name,
        transitions={s: dict(ev) for s, ev in tables.transitions.items()},
        tools_by_state={s: tuple(ts) for s, ts in tables.tools_by_state.items()},
        initial=initial, states=ctx.states, terminal=ctx.terminal,
        handed_over_states=tables.handed_over_states, finish_states=tables.finish_states,
        human_events=tables.human_events, guards=dict(guards or {}),
        payloads=dict(payloads or {}), records=tables.records, tools=tool_map,
        instructions=tables.instructions, system_prompt=system_prompt,
        expiry_event=expiry_event, approve_event=approve_event, deny_event=deny_event,
        approval_ttl_seconds=approval_ttl_seconds, invariants=tuple(invariants),
        settings=dict(settings or {}),
    )


def _names(items: Any) -> str:
    return ", ".join(repr(i) for i in sorted(items))


def invariant_problems(invariants: Any, known: Mapping[str, set[str]]) -> list[str]:
    """What is wrong with ``invariants``, given the names a workflow has by kind.

    An invariant is any object with ``references() -> {kind: names}``, the kinds being
    ``states``, ``events``, ``tools`` and ``facts`` (the facts guards establish).
    """
    if not isinstance(invariants, (list, tuple)):
        return [f"invariants must be a list or tuple, got a single "
                f"{type(invariants).__name__}: write invariants=(...,)"]
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
class _Check:
    """Runs every definition check; each lists all of its offenders."""

    t: _Tables
    tools: dict[str, ToolSpec]
    guards: dict[str, Any]
    payloads: dict[str, type[BaseModel]]
    invariants: Any
    states: tuple[str, ...] = ()
    terminal: frozenset[str] = field(default_factory=frozenset)
    #: Targets declared nowhere; reported once, then treated as ends so that no
    #: other check repeats the mistake.
    undeclared: dict[str, list[str]] = field(default_factory=dict)

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

    @property
    def events(self) -> set[str]:
        return {e for ev in self.t.transitions.values() for e in ev}

    def problems(self) -> list[str]:
        out: list[str] = []
        for check in (
            self._undeclared, self._unknown_states, self._dead_ends, self._reachability,
            self._tools, self._event_references, self._people, self._guards,
            self._invariants, self._collisions,
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
                out.append(f"{label} names states not in TRANSITIONS: {_names(bad)}")
        return out

    def _dead_ends(self) -> list[str]:
        ends = self.terminal | self.t.finish_states | set(self.undeclared)
        dead = [s for s in self.states if s not in ends and not self.t.transitions.get(s)]
        out = []
        if dead:
            out.append(f"non-terminal states with no way out: {_names(dead)} "
                       "(list them in terminal= if runs end there)")
        exiting_terminals = [s for s in self.terminal if self.t.transitions.get(s)]
        if exiting_terminals:
            out.append(f"terminal states with outgoing events: {_names(exiting_terminals)}")
        return out

    def _reachability(self) -> list[str]:
        if self.t.initial not in self.states:
            return []
        graph = {s: set(self.t.transitions.get(s, {}).values()) for s in self.states}
        reached = closure([self.t.initial], graph)
        out = []
        unreachable = [s for s in self.states if s not in reached]
        if unreachable:
            out.append(f"states unreachable from {self.t.initial!r}: {_names(unreachable)}")
        reverse: dict[str, set[str]] = {s: set() for s in self.states}
        for src, dsts in graph.items():
            for d in dsts:
                reverse[d].add(src)
        ends = self.terminal | self.t.finish_states | set(self.undeclared)
        stuck = [s for s in self.states if s not in closure(sorted(ends), reverse)]
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

    def _people(self) -> list[str]:
        """A state with human events must wait for a person, and a person must be able
        to decide it: every way out human, no tools, and real approve/deny events."""
        human = self.t.human_events
        out = []
        waiting = []
        for state, events in self.t.transitions.items():
            mine = [e for e in events if e in human]
            if not mine:
                continue
            others = [e for e in events if e not in human]
            tools = self.t.tools_by_state.get(state)
            if others:
                out.append(f"state {state!r} has human-only events ({_names(mine)}) and "
                           f"events the model or a tool fires ({_names(others)}): the run "
                           "never pauses there, so no person can fire them; make every way "
                           f"out of {state!r} human, or none")
            elif state in self.t.finish_states:
                out.append(f"state {state!r} waits for a person ({_names(mine)}) but is a "
                           "finish state, where the model's final answer ends the run")
            else:
                waiting.append(state)
                if tools:
                    out.append(f"state {state!r} waits for a person, so its tools can "
                               f"never be called: {_names(tools)}")
        if waiting:
            for label, event in (("approve_event", self.t.approve_event),
                                 ("deny_event", self.t.deny_event)):
                if event not in human:
                    out.append(f"{label} {event!r} is not a human-only event of this "
                               f"workflow (human-only events: {_names(human)})")
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

    def _collisions(self) -> list[str]:
        clash = (self.events & set(self.tools)) | (self.events & {ADVANCE})
        if ADVANCE in self.tools:
            clash.add(ADVANCE)
        if clash:
            return [f"event names collide with tool names: {_names(clash)}"]
        return []
