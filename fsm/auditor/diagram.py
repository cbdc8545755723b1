"""The diagram model: a workflow definition as plain nodes, edges and annotations.

One pipeline serves every format: :func:`extract` turns a
:class:`~fsm.definition.spec.WorkflowSpec` (and optionally one run's event log, see
:func:`overlay`) into a :class:`Diagram`; the renderers in
:mod:`fsm.auditor.render` turn that into DOT, SVG, Mermaid or Markdown, and the
verifier in :mod:`fsm.auditor.verify` explores the very same edges. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fsm.definition.spec import WorkflowSpec
from fsm.errors import DiagramError
from fsm.records import Event

#: The tool tag that marks a tool which moves money.
MONEY_TAG = "moves_money"

#: Who may fire an edge: the model, a person, the customer's reply, or a tool's result
#: (``"tool:<name>"``).
MODEL = "model"
PERSON = "person"
CUSTOMER = "customer"
TOOL_PREFIX = "tool:"


@dataclass(frozen=True)
class Node:
    """One workflow state and what may happen in it."""

    name: str
    #: Tools the model may call here, in table order.
    tools: tuple[str, ...] = ()
    #: The subset of ``tools`` that change the world (idempotency key, effect record).
    write_tools: tuple[str, ...] = ()
    #: The subset of ``tools`` tagged ``moves_money``.
    money_tools: tuple[str, ...] = ()
    #: The subset of ``tools`` whose calls wait for a person's approval first.
    approval_tools: tuple[str, ...] = ()
    initial: bool = False
    terminal: bool = False
    #: A terminal state that ends the run as ``handed_over``.
    handed_over: bool = False
    #: Every way out is a human-only event: the run pauses here for a person.
    waits_for_person: bool = False
    #: A final answer from the model ends the run as ``done`` here.
    finish: bool = False
    #: Every way out is a customer event: the run waits here for the customer's reply.
    waits_for_customer: bool = False
    #: The model's plain text is a message to the customer here; the run waits for the reply.
    asks_customer: bool = False
    #: The subset of ``tools`` that run only on the customer's yes to exactly the call.
    confirmed_tools: tuple[str, ...] = ()

    @property
    def marks(self) -> tuple[str, ...]:
        """Annotation keys of this node, strongest first (see :data:`LEGEND`)."""
        flags = (
            ("initial", self.initial), ("money", bool(self.money_tools)),
            ("write", bool(self.write_tools) and not self.money_tools),
            ("person", self.waits_for_person), ("customer", self.waits_for_customer),
            ("asks", self.asks_customer), ("confirmed", bool(self.confirmed_tools)),
            ("approval", bool(self.approval_tools)),
            ("handed_over", self.handed_over),
            ("terminal", self.terminal and not self.handed_over), ("finish", self.finish),
        )
        return tuple(key for key, on in flags if on)


@dataclass(frozen=True)
class Edge:
    """One transition: ``source --event--> target``."""

    source: str
    event: str
    target: str
    #: Who may fire it: ``"model"``, ``"person"``, ``"tool:<name>"``; empty means nobody can.
    firers: tuple[str, ...]
    #: The guard's short description, if the event has a guard.
    guard: str | None = None
    #: Facts that hold after this edge (declared by the guard).
    establishes: tuple[str, ...] = ()
    #: The fact key the event's payload is kept under (``records=``), if any.
    record: str | None = None

    @property
    def human_only(self) -> bool:
        return self.firers == (PERSON,)

    @property
    def customer_only(self) -> bool:
        return self.firers == (CUSTOMER,)

    @property
    def fired_by(self) -> str:
        """Who may fire it, in words."""
        if not self.firers:
            return "nobody (never fires)"
        return ", ".join(
            f"tool {f[len(TOOL_PREFIX):]}" if f.startswith(TOOL_PREFIX) else f
            for f in self.firers
        )


@dataclass(frozen=True)
class Taken:
    """One transition a run took."""

    #: Position on the path, from 1.
    n: int
    step: int
    source: str
    event: str
    target: str


@dataclass(frozen=True)
class Refused:
    """An attempt the runtime refused, on the state where it happened."""

    step: int
    state: str
    reason: str
    tool: str | None = None
    event: str | None = None


@dataclass(frozen=True)
class LogLine:
    """One thing a run did at one step (for the Markdown run table)."""

    step: int
    state: str
    what: str


@dataclass(frozen=True)
class Overlay:
    """One run drawn on the diagram: its path, its refusals, where it is now."""

    run_id: str
    path: tuple[Taken, ...] = ()
    refusals: tuple[Refused, ...] = ()
    current: str | None = None
    status: str | None = None
    log: tuple[LogLine, ...] = ()

    def taken(self, source: str, event: str) -> tuple[Taken, ...]:
        return tuple(t for t in self.path if (t.source, t.event) == (source, event))

    def refused_in(self, state: str) -> tuple[Refused, ...]:
        return tuple(r for r in self.refusals if r.state == state)


@dataclass(frozen=True)
class Diagram:
    """Everything a renderer needs, and nothing that needs the workflow's code."""

    workflow: str
    definition_hash: str
    initial: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    overlay: Overlay | None = None
    #: Facts the guards may establish.
    facts: tuple[str, ...] = field(default=())
    #: Every registered tool, in any state or none.
    tools: tuple[str, ...] = field(default=())
    #: ``(tool, fact key)``: the writes that run only on the customer's yes to exactly the
    #: proposal kept under that key (``ToolSpec.confirmed_by``).
    bindings: tuple[tuple[str, str], ...] = ()
    #: The customer event that confirms a proposal, when the workflow has customer events.
    confirm_event: str | None = None
    #: The customer event fired when the customer does not reply in time.
    expiry_event: str | None = None
    #: ``(tool, the events it declares)`` of the tools whose result always fires one of
    #: their events (``ToolSpec.always_emits``).
    always_emits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: The write tools.
    writes: tuple[str, ...] = ()

    @property
    def converses(self) -> bool:
        """Whether the workflow talks with its customer (the legend then says how)."""
        return any(n.waits_for_customer or n.asks_customer for n in self.nodes) or \
            any(CUSTOMER in e.firers for e in self.edges)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def edges_from(self, state: str) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.source == state)


#: Annotation key → what it means; every renderer draws its own symbol for each key.
LEGEND: tuple[tuple[str, str], ...] = (
    ("initial", "the state every run starts in"),
    ("money", "a tool tagged moves_money may run here"),
    ("write", "a write tool may run here (it changes the world outside the run)"),
    ("person", "the run pauses here until a person decides; the model cannot leave"),
    ("approval", "a tool here waits for a person's approval before it runs"),
    ("terminal", "the run ends here as done"),
    ("handed_over", "the run ends here, handed over to a person"),
    ("finish", "a final answer from the model ends the run here"),
    ("model_edge", "the model fires this event (through its advance tool)"),
    ("human_edge", "dashed edge: only a person fires this event"),
    ("tool_edge", "the result of tool X fires this event; the model cannot"),
    ("guard", "the guard that must hold, and the fact that holds afterwards"),
)

#: Legend entries of conversations, shown only for a workflow that talks with its customer.
CUSTOMER_LEGEND: tuple[tuple[str, str], ...] = (
    ("customer", "the run waits here for the customer's reply; the model cannot leave"),
    ("asks", "the model's plain text goes to the customer; the run waits for the reply"),
    ("confirmed", "a write here runs only on the customer's yes to exactly that call"),
    ("customer_edge", "bold green edge: only the customer's reply fires this event"),
)

#: Extra legend entries shown only with a run overlay.
RUN_LEGEND: tuple[tuple[str, str], ...] = (
    ("taken", "the run's n-th transition, taken at step s (thick blue)"),
    ("refused", "an attempt the runtime refused in this state"),
    ("current", "the state the run is in now, and its status"),
)


def firers(spec: WorkflowSpec, source: str, event: str) -> tuple[str, ...]:
    """Who may fire ``event`` from ``source``, exactly as the engine allows it.

    The model fires the events its view offers; a tool's result fires the events the
    tool declares, in states where the tool may run; a person fires the events of a
    state where the run pauses for a person (approve, deny, expiry, or one named); the
    customer's reply fires the customer events of a state where the customer is asked.
    """
    out: list[str] = []
    if event in spec.model_events(source):
        out.append(MODEL)
    if event in spec.person_events(source):
        out.append(PERSON)
    if event in spec.customer_events_from(source):
        out.append(CUSTOMER)
    for name in spec.allowed_tools(source):
        if event in spec.tools[name].emits_events:
            out.append(TOOL_PREFIX + name)
    return tuple(out)


def _node(spec: WorkflowSpec, state: str) -> Node:
    tools = tuple(spec.allowed_tools(state))
    specs = [spec.tools[t] for t in tools]
    return Node(
        name=state, tools=tools,
        write_tools=tuple(t.name for t in specs if t.write),
        money_tools=tuple(t.name for t in specs if MONEY_TAG in t.tags),
        approval_tools=tuple(t.name for t in specs if t.approval),
        initial=state == spec.initial, terminal=state in spec.terminal,
        handed_over=state in spec.handed_over_states,
        waits_for_person=spec.waits_for_person(state), finish=state in spec.finish_states,
        waits_for_customer=spec.waits_for_customer(state),
        asks_customer=state in spec.asks_customer,
        confirmed_tools=tuple(t.name for t in specs if t.confirmed_by is not None),
    )


def extract(spec: WorkflowSpec, run: Overlay | None = None) -> Diagram:
    """The diagram of ``spec``, with ``run`` drawn on it if given."""
    edges = []
    for source, events in spec.transitions.items():
        for event, target in events.items():
            g = spec.guards.get(event)
            edges.append(Edge(
                source=source, event=event, target=target,
                firers=firers(spec, source, event),
                guard=g.description if g else None,
                establishes=tuple(g.establishes) if g else (),
                record=spec.records.get(event),
            ))
    facts = sorted({f for g in spec.guards.values() for f in g.establishes})
    tools = [spec.tools[t] for t in sorted(spec.tools)]
    diagram = Diagram(
        workflow=spec.name, definition_hash=spec.definition_hash, initial=spec.initial,
        nodes=tuple(_node(spec, s) for s in spec.states), edges=tuple(edges),
        overlay=run, facts=tuple(facts), tools=tuple(sorted(spec.tools)),
        bindings=tuple((t.name, t.confirmed_by) for t in tools if t.confirmed_by is not None),
        confirm_event=spec.confirm_event if spec.customer_events else None,
        expiry_event=spec.reply_expiry_event,
        always_emits=tuple((t.name, tuple(t.emits_events)) for t in tools if t.always_emits),
        writes=tuple(t.name for t in tools if t.write),
    )
    if run is not None:
        _check_overlay(diagram, run)
    return diagram


def _check_overlay(diagram: Diagram, run: Overlay) -> None:
    known = {(e.source, e.event, e.target) for e in diagram.edges}
    strange = [t for t in run.path if (t.source, t.event, t.target) not in known]
    if strange:
        steps = ", ".join(f"step {t.step}: {t.source} --{t.event}--> {t.target}" for t in strange)
        raise DiagramError(
            f"run {run.run_id!r} took transitions that are not in workflow "
            f"{diagram.workflow!r} as defined now ({steps}); draw it with the definition "
            "it ran under"
        )


_STATUS_AFTER = {"pause": "awaiting_approval", "decision": "running", "resume": "running",
                 "ask": "awaiting_customer", "reply": "running", "unanswered": "running"}


def overlay(run_id: str, events: Iterable[Event]) -> Overlay:
    """Read one run's event log (``store.events(run_id)``) into an :class:`Overlay`."""
    path: list[Taken] = []
    refusals: list[Refused] = []
    log: list[LogLine] = []
    current: str | None = None
    status: str | None = None
    for ev in events:
        state = ev.state_before or ev.state_after or ""
        if ev.kind == "start":
            status = "running"
        elif ev.kind == "transition" and ev.event and ev.state_before and ev.state_after:
            path.append(Taken(len(path) + 1, ev.step, ev.state_before, ev.event,
                              ev.state_after))
        elif ev.kind == "refusal":
            refusals.append(Refused(ev.step, state, ev.reason or "", ev.tool, ev.event))
        elif ev.kind == "stop":
            status = str(ev.detail.get("status") or status)
        status = _STATUS_AFTER.get(ev.kind, status)
        line = _log_line(ev, len(path))
        if line is not None:
            log.append(LogLine(ev.step, state, line))
        current = ev.state_after or current
    return Overlay(run_id=run_id, path=tuple(path), refusals=tuple(refusals),
                   current=current, status=status, log=tuple(log))


def _log_line(ev: Event, n: int) -> str | None:
    if ev.kind == "transition":
        return f"#{n} {ev.event} → {ev.state_after}"
    if ev.kind == "tool":
        return f"called {ev.tool}" + (" (replayed)" if ev.detail.get("replayed") else "")
    if ev.kind == "refusal":
        return f"refused: {ev.reason}"
    if ev.kind == "pause":
        return "paused for a person" + (f" (call {ev.tool})" if ev.tool else "")
    if ev.kind == "decision":
        who = f" by {ev.reviewer}" if ev.reviewer else ""
        return f"{ev.detail.get('decision', 'decided')}{who}"
    if ev.kind == "stop":
        reason = f": {ev.reason}" if ev.reason else ""
        return f"stopped {ev.detail.get('status', '')}{reason}"
    return _other_line(ev)


def _other_line(ev: Event) -> str | None:
    if ev.kind == "ask":
        return "asked the customer" + (" to confirm a proposal" if ev.detail.get("args") else "")
    if ev.kind == "reply":
        fired = f" → {ev.event}" if ev.event else ""
        return f"the customer replied (reply {ev.detail.get('seq')}){fired}"
    if ev.kind == "unanswered":
        return "the customer did not reply in time"
    if ev.kind in ("start", "recover", "resume"):
        return ev.kind
    return None
