"""Workflow definitions: plain tables in, one validated, frozen spec out.

A workflow author writes ``TRANSITIONS`` and ``TOOLS_BY_STATE`` as dict literals and
passes them, with guards, payload models and tools, to :func:`define_workflow`.
Every problem in the tables is collected and raised as one
:class:`~fsm.errors.WorkflowDefinitionError` (the checks: :mod:`fsm.definition.checks`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fsm.definition.checks import Check, Tables, quoted
from fsm.definition.guards import Guard, guard
from fsm.definition.presentation import PLAIN, Presentation
from fsm.definition.sources import ToolServer, resolve
from fsm.definition.tools import ADVANCE, ToolSpec
from fsm.errors import WorkflowDefinitionError, validation_problems

__all__ = ["ADVANCE", "HASHED_FIELDS", "HASHED_WHEN_SET", "UNHASHED_FIELDS", "Guard",
           "WorkflowSpec", "define_workflow", "guard"]


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
    #: Every state: the rows of ``transitions``, then ``terminal`` and
    #: ``handed_over_states`` (each declared; an undeclared target is an error).
    states: tuple[str, ...]
    #: States whose reaching ends the run: ``terminal=`` (or, without it, the rows with
    #: no events that are not finish states) plus ``handed_over_states``.
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
    #: ``amend(tool, args, changes) -> new args``: what a reviewer may change when
    #: approving (e.g. a lower amount); raise ``ValueError`` to refuse. ``None``: nothing.
    amend: Callable[[str | None, dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    #: How pending requests are shown to people (summaries, amounts, money).
    presentation: Presentation = PLAIN
    #: name → ``open(location) -> resource``: the outside world a workflow's tools reach
    #: (a shop, a payment gateway), opened by the runtime from the run's database location
    #: and given to tools as ``ctx.resource(name)``. A resource with ``close()`` is closed
    #: with the engine.
    resources: dict[str, Callable[[str], Any]] = {}
    #: A label for this definition (e.g. ``"2"``); runs, listings and ``fsm migrate``
    #: name versions by it. Empty: the definition is named by its hash.
    version: str = ""
    #: Earlier versions kept importable beside this one, oldest first: runs that started
    #: on one of them resume on it (see :meth:`version_for`). Never this definition itself.
    earlier: tuple[Any, ...] = ()
    #: Events only a customer's reply fires: never offered to the model, never fired by a
    #: person or a tool (see ``interpret``).
    customer_events: frozenset[str] = frozenset()
    #: Model states in which the model's plain text (no tool call) is a message to the
    #: customer; the run then waits for the reply, which the model reads in the same state.
    asks_customer: frozenset[str] = frozenset()
    #: ``interpret(text, asked) -> event | None``: the customer event a reply fires, given
    #: what the customer was asked (the record shown, ``{}`` for a plain question); e.g.
    #: ``confirmed`` only for an explicit yes.
    interpret: Callable[[str, dict[str, Any]], str | None] | None = None
    #: The customer event that confirms a proposal (what ``ToolSpec.confirmed_by`` binds).
    confirm_event: str = "confirmed"
    #: How long a run waits for its customer, in seconds (``None``: as long as it takes).
    reply_ttl_seconds: float | None = None
    #: The customer event fired when the customer does not reply in time.
    reply_expiry_event: str | None = None
    #: server name → its pin: the hash of its whole tool list and the names it lists (see
    #: :mod:`fsm.definition.sources`). A server whose tools change is a new definition.
    servers: dict[str, dict[str, Any]] = {}
    #: The :class:`~fsm.definition.sources.ToolServer` objects the tools call through.
    tool_servers: tuple[Any, ...] = ()
    #: The writes of a run depend on one another: one that fails after another succeeded
    #: leaves the world half done, and the run is handed over (see ``define_workflow``).
    dependent_writes: bool = False

    def events_from(self, state: str) -> dict[str, str]:
        return self.transitions.get(state, {})

    @cached_property
    def tool_events(self) -> frozenset[str]:
        """Events only tools fire, from their results (e.g. ``refund_ok``)."""
        return frozenset(e for t in self.tools.values() for e in t.emits_events)

    def model_events(self, state: str) -> list[str]:
        """Events the model may fire from ``state`` (human-only, customer and tool events
        left out)."""
        return [
            e for e in self.events_from(state)
            if e not in self.human_events and e not in self.tool_events
            and e not in self.customer_events
        ]

    @property
    def converses(self) -> bool:
        """Whether runs of this workflow talk with their customer."""
        return bool(self.customer_events or self.asks_customer)

    def waits_for_customer(self, state: str) -> bool:
        """True when every way out of ``state`` is a customer event."""
        events = self.events_from(state)
        return (
            bool(events) and state not in self.finish_states
            and all(e in self.customer_events for e in events)
        )

    def talks_to_customer(self, state: str) -> bool:
        """True when the customer is asked in ``state``: its model's text goes to the
        customer, or the run waits there for the customer's reply."""
        return state in self.asks_customer or self.waits_for_customer(state)

    def customer_events_from(self, state: str) -> list[str]:
        """The customer events a reply may fire from ``state``."""
        if not self.talks_to_customer(state):
            return []
        return [e for e in self.events_from(state) if e in self.customer_events]

    def waits_for_person(self, state: str) -> bool:
        """True when every way out of ``state`` is a human-only event."""
        events = self.events_from(state)
        return (
            bool(events) and state not in self.finish_states
            and state not in self.handed_over_states  # a person resumes it from the desk
            and all(e in self.human_events for e in events)
        )

    def person_events(self, state: str) -> list[str]:
        """Events a person may fire from ``state``: all of them, if the run waits there."""
        return list(self.events_from(state)) if self.waits_for_person(state) else []

    def allowed_tools(self, state: str) -> tuple[str, ...]:
        return self.tools_by_state.get(state, ())

    def behaviour(self) -> dict[str, Any]:
        """Every field of :data:`HASHED_FIELDS`, and those of :data:`HASHED_WHEN_SET` that
        are set, as plain data: what the hash covers."""
        out = {name: _plain(getattr(self, name)) for name in HASHED_FIELDS}
        for name in HASHED_WHEN_SET + HASHED_WHEN_ON:
            value = getattr(self, name)
            if value != type(self).model_fields[name].default:
                out[name] = _plain(value)
        return out

    @cached_property
    def definition_hash(self) -> str:
        """SHA-256 of :meth:`behaviour`; runs record it, and resuming checks it."""
        blob = json.dumps(self.behaviour(), sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """The version's label, else its definition hash."""
        return self.version or self.definition_hash

    @cached_property
    def versions(self) -> tuple[WorkflowSpec, ...]:
        """Every version this workflow keeps importable, oldest first, this one last."""
        return (*self.earlier, self)

    def version_for(self, definition_hash: str) -> WorkflowSpec | None:
        """The kept version with this definition hash (a run's), or ``None``."""
        for spec in self.versions:
            if spec.definition_hash == definition_hash:
                return spec
        return None

    def named(self, version: str) -> WorkflowSpec | None:
        """The kept version labelled ``version``, or whose hash is ``version``;
        ``"current"`` is this one."""
        if version == "current":
            return self
        for spec in self.versions:
            if version in (spec.version, spec.definition_hash):
                return spec
        return None

    @cached_property
    def cache(self) -> dict[Any, Any]:
        """Per-spec memo for what the runtime builds once per workflow (the compiled
        machine, tool schemas). Each user keys its entries with its own objects."""
        return {}



#: The fields that change what a run does; :attr:`WorkflowSpec.definition_hash` covers
#: exactly these, so a paused run never resumes under a definition that means otherwise.
HASHED_FIELDS: tuple[str, ...] = (
    "name", "transitions", "tools_by_state", "initial", "terminal", "handed_over_states",
    "finish_states", "human_events", "guards", "payloads", "records", "tools",
    "instructions", "system_prompt", "expiry_event", "approve_event", "deny_event",
    "approval_ttl_seconds", "settings", "amend",
)
#: Fields of conversations with customers: they change what a run does and are hashed as
#: the others are, but only when set, so that a workflow that never talks with its
#: customer keeps the hash it had before conversations existed.
HASHED_WHEN_SET: tuple[str, ...] = (
    "customer_events", "asks_customer", "interpret", "confirm_event", "reply_ttl_seconds",
    "reply_expiry_event", "servers",
)
#: Switches added later: hashed when on, so that the definitions written before them keep
#: their hashes.
HASHED_WHEN_ON: tuple[str, ...] = ("dependent_writes",)
#: The other fields, and why they leave the hash alone.
UNHASHED_FIELDS: dict[str, str] = {
    "states": "derived from transitions, terminal and handed_over_states",
    "invariants": "what fsm verify proves; they do not change what a run does",
    "presentation": "how requests read to people; a run takes the same steps",
    "resources": "where tools reach the outside world, opened from the run's database",
    "version": "a name for the hash; the store keeps the label it first saw with each hash",
    "earlier": "other definitions, each with its own hash; a run resumes on the one it names",
    "tool_servers": "connections to the servers, whose tool lists servers pins",
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
    if callable(value):
        # A hook: its name, the same in every process (its code is the workflow's).
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
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
    presentation: Presentation | None = None,
    resources: Mapping[str, Callable[[str], Any]] | None = None,
    amend: Callable[[str | None, dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
    version: str = "",
    earlier: list[WorkflowSpec] | tuple[WorkflowSpec, ...] = (),
    customer_events: set[str] | frozenset[str] | tuple[str, ...] = (),
    asks_customer: set[str] | frozenset[str] | tuple[str, ...] = (),
    interpret: Callable[[str, dict[str, Any]], str | None] | None = None,
    confirm_event: str = "confirmed",
    reply_ttl_seconds: float | None = None,
    reply_expiry_event: str | None = None,
    servers: list[ToolServer] | tuple[ToolServer, ...] = (),
    dependent_writes: bool = False,
) -> WorkflowSpec:
    """Validate the tables and return the frozen :class:`WorkflowSpec`.

    ``version`` labels this definition; ``earlier`` keeps earlier versions of the same
    workflow importable beside it, so that runs started on them resume on them (new runs
    start on this one).

    ``servers`` names tool servers (:class:`~fsm.definition.sources.ToolServer`, e.g. from
    :mod:`fsm.adapters.mcp`): their tools are listed now, pinned in the definition hash,
    and named in ``tools_by_state`` as ``server.tool`` or by the bare name one server alone
    lists.

    A write tool that raises is read by the model as the tool's refusal, which changed
    nothing: the model may do something else. ``dependent_writes=True`` says the run's
    writes depend on one another, so one that fails after another succeeded leaves the
    world half done and the run is handed over. A tool that raises
    :class:`~fsm.errors.PartlyApplied` hands the run over whatever this says.

    Every problem found is listed in one :class:`~fsm.errors.WorkflowDefinitionError`.
    """
    remote = resolve(servers, tools_by_state, {t.name for t in tools}) if servers else None
    if remote is not None:
        tools, tools_by_state = [*tools, *remote.tools], remote.tools_by_state
    try:
        tables = Tables(
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
            customer_events=frozenset(customer_events), asks_customer=frozenset(asks_customer),
            confirm_event=confirm_event, reply_ttl_seconds=reply_ttl_seconds,
            reply_expiry_event=reply_expiry_event,
        )
    except ValidationError as exc:
        raise WorkflowDefinitionError(name or "?", validation_problems(exc)) from None
    tool_map = {t.name: t for t in tools}
    duplicates = sorted({t.name for t in tools if sum(u.name == t.name for u in tools) > 1})
    ctx = Check(tables, tool_map, dict(guards or {}), dict(payloads or {}), invariants,
                interpret)
    problems = ctx.problems() + (remote.problems if remote is not None else [])
    if duplicates:
        problems.append(f"tools registered twice: {quoted(duplicates)}")
    kept = _flattened(earlier)
    problems += version_problems(name, version, kept)
    if problems:
        raise WorkflowDefinitionError(name, problems)
    spec = WorkflowSpec(
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
        presentation=presentation or PLAIN, amend=amend,
        resources=dict(resources or {}), version=version, earlier=kept,
        customer_events=tables.customer_events,
        asks_customer=tables.asks_customer, interpret=interpret,
        confirm_event=confirm_event, reply_ttl_seconds=reply_ttl_seconds,
        reply_expiry_event=reply_expiry_event, dependent_writes=dependent_writes,
        servers=remote.pins if remote is not None else {}, tool_servers=tuple(servers),
    )
    unpriced = unpriced_waits(spec)
    if unpriced:
        raise WorkflowDefinitionError(name, unpriced)
    same = [e.label for e in kept if e.definition_hash == spec.definition_hash]
    if same:
        raise WorkflowDefinitionError(name, [
            f"earlier version {quoted(same)} has the same definition hash as this one "
            f"({spec.definition_hash}): drop it from earlier=, or change what it does"])
    return spec


def _flattened(earlier: list[WorkflowSpec] | tuple[WorkflowSpec, ...]) -> tuple[Any, ...]:
    """``earlier`` with the versions each of them keeps, oldest first, each hash once."""
    out: dict[str, Any] = {}
    for spec in earlier:
        for kept in getattr(spec, "versions", (spec,)):
            out.setdefault(getattr(kept, "definition_hash", str(id(kept))), kept)
    return tuple(out.values())


def version_problems(name: str, version: str, earlier: tuple[Any, ...]) -> list[str]:
    """Every problem with a version label and the earlier versions kept beside it."""
    problems = []
    if version != version.strip() or version == "current" or (version and not
                                                               version.isprintable()):
        problems.append(f"version {version!r} cannot be a label: use printable text without "
                        "spaces around it, other than 'current' (which names the newest)")
    labels = [version] if version else []
    for i, spec in enumerate(earlier):
        if not isinstance(spec, WorkflowSpec):
            problems.append(f"earlier[{i}] is {type(spec).__name__}, not a WorkflowSpec: give "
                            "the definitions define_workflow returned")
            continue
        if spec.name != name:
            problems.append(f"earlier version {spec.label!r} is of workflow {spec.name!r}, "
                            f"not {name!r}")
        if spec.version:
            labels.append(spec.version)
    twice = sorted({v for v in labels if labels.count(v) > 1})
    if twice:
        problems.append(f"version labels used twice: {quoted(twice)}")
    return problems


def unpriced_waits(spec: WorkflowSpec) -> list[str]:
    """A workflow whose presentation reads amounts (so release limits apply) must ask its
    people about a record: an event entering a person's state that records nothing asks
    them to decide on ``{}``, whose amount no limit can read."""
    if not spec.presentation.reads_amounts:
        return []
    silent: dict[str, set[str]] = {}
    for state in spec.states:
        for event, target in spec.events_from(state).items():
            if spec.waits_for_person(target) and event not in spec.records:
                silent.setdefault(target, set()).add(event)
    return [f"release limits compare the amount the presentation reads, but the person "
            f"deciding in state {state!r} would be asked about nothing: event"
            f"{'s' if len(events) > 1 else ''} {quoted(events)} record"
            f"{'' if len(events) > 1 else 's'} no payload; record the request there "
            f"(records={{{sorted(events)[0]!r}: ...}}, with a payload that carries the amount)"
            for state, events in sorted(silent.items())]
