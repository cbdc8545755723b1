"""What each page shows, computed from the store: plain data for the templates."""

from __future__ import annotations

import hashlib
import html
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from fsm.auditor.audit import audit
from fsm.auditor.beside import chained
from fsm.auditor.diagram import extract, overlay
from fsm.auditor.render import DOT_TIMEOUT, GraphvizMissing, render, to_dot
from fsm.definition.presentation import PLAIN
from fsm.definition.spec import WorkflowSpec
from fsm.errors import FSMError
from fsm.records import (
    Approval,
    Event,
    Handover,
    RunState,
    canonical,
    fingerprint,
    state_path,
)
from fsm.records.transcript import Message, read_all
from fsm.runtime.review import row_problem, row_subject, waiting_on
from fsm.store.base import Store
from fsm.store.people import Notification
from fsm.store.roles import Evidence, Pages, People
from fsm.web.conversation import Said, Talked, asked, conversation
from fsm.web.decisions import (
    Ask,
    Workflows,
    beyond_limit,
    describe,
    iso,
    money,
    own_version,
)
from fsm.web.duplicates import Other, others, subject_of
from fsm.web.story import Line, story

PAGE_SIZE = 25
#: The highest page number asked for that is read as a number (a higher one is the last).
MAX_PAGE = 10**9


def time_left(seconds: float) -> str:
    if seconds <= 0:
        return "expired"
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {mins} min"
    return f"{max(mins, 1)} min"


def age(seconds: float) -> str:
    return time_left(seconds) if seconds > 0 else "0 min"


@dataclass
class Pager:
    page: int
    total: int
    size: int = PAGE_SIZE

    def __post_init__(self) -> None:
        # Past the last page is the last page: an offset never outgrows the database's.
        self.page = min(max(1, self.page), self.pages)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size


def page_number(raw: str | None) -> int:
    try:
        return min(max(1, int(raw or "1")), MAX_PAGE)
    except ValueError:
        return 1


# -- the inbox ------------------------------------------------------------------------------

@dataclass
class InboxRow:
    approval: Approval
    run: RunState
    ask: Ask
    requested: str
    expires: str
    left: str
    delivery: str
    #: Why the approval row differs from the request the run waits on, or ``None``.
    problem: str | None = None
    #: Other open, approved or done requests about the same subject.
    others: list[Other] = field(default_factory=list)
    #: The version of its workflow the run lives on.
    version: str = ""


def _delivery(notes: list[Notification]) -> str:
    waiting = [n for n in notes if n.kind == "waiting"]
    if not waiting:
        return "none"
    n = waiting[-1]
    if n.status == "pending" and n.attempts:
        return f"retrying ({n.attempts} attempts)"
    return n.status


def inbox(store: Pages, workflows: Workflows, now: float, workflow: str | None,
          page: int, skipped: list[str] | None = None) -> tuple[list[InboxRow], Pager]:
    """A page of the approvals runs wait on. A row that cannot be read, or a pending
    approval its run does not wait on, is left out and said in ``skipped``."""
    pager = Pager(page, store.count_waiting(workflow))
    found = []
    waiting = store.waiting(workflow, limit=pager.size, offset=pager.offset, skip_damaged=True)
    for a, run in waiting:
        if waiting_on(run, a) is None:
            if skipped is not None:
                skipped.append(f"approval {a.approval_id} is pending, but run {run.run_id} "
                               "does not wait on it (the row was written outside a step)")
        else:
            found.append((a, run))
    if skipped is not None:
        skipped += [str(d) for d in waiting.damaged]
    notes: dict[str, list[Notification]] = {}
    for n in store.notifications(approval_ids=[a.approval_id for a, _ in found]):
        notes.setdefault(n.approval_id, []).append(n)
    labels = store.version_labels(run.definition_hash for _, run in found)
    rows = []
    for a, run in found:
        shown, problem = verified(a, run)
        spec = workflows.spec(store, run)
        rows.append(InboxRow(
            approval=a, run=run, ask=describe(spec, run, shown),
            requested=iso(a.requested_at), expires=iso(a.expires_at),
            left=time_left(a.expires_at - now), delivery=_delivery(notes.get(a.approval_id, [])),
            problem=problem, version=labels[run.definition_hash],
            others=others(store, spec, run, shown),
        ))
    return rows, pager


def verified(approval: Approval, run: RunState) -> tuple[Approval, str | None]:
    """The approval as the run waits on it, and why its row differs, if it does: then the
    tool and arguments shown (and compared with a release limit) are the run's own."""
    pending = waiting_on(run, approval)
    problem = row_problem(approval, pending) if pending is not None else None
    if problem is None or pending is None:
        return approval, problem
    return approval.model_copy(update={"tool": pending.tool, "args": pending.args}), problem


def _paused(events: list[Event], approval_id: str) -> dict[str, Any]:
    """What the run's log recorded when it paused for this approval (``{}``: nothing)."""
    for e in events:
        if e.kind == "pause" and e.detail and e.detail.get("approval_id") == approval_id:
            return dict(e.detail)
    return {}


def decided_problem(approval: Approval, events: list[Event]) -> tuple[dict[str, Any],
                                                                      str | None]:
    """The subject a decided approval was requested for, and why its row does not give
    its hash or differs from the log's pause, if it does."""
    paused = _paused(events, approval.approval_id)
    subject = row_subject(approval, paused.get("events") or [])
    if fingerprint(subject) != approval.args_hash:
        return subject, (f"approval {approval.approval_id}'s tool and arguments do not give "
                         f"its hash {approval.args_hash[:12]}: the row was changed after it "
                         "was written")
    if paused and paused.get("args") != approval.args:
        return subject, (f"approval {approval.approval_id}'s arguments differ from those the "
                         "run's log recorded when it paused")
    return subject, None


# -- the diagram, cached by the DOT text it comes from -----------------------------------------

#: Stands for the run id while a diagram is laid out, so runs that took the same path
#: share one layout (Graphviz takes tens of milliseconds per layout). Letters and digits
#: only: Graphviz writes other characters of a label as entities (``-`` as ``&#45;``), and
#: the placeholder must appear in the SVG exactly as it is written here.
_RUN = "RUNID9f3cPLACEHOLDER"


class Diagrams:
    """Inline SVG of a run on its workflow; the same DOT text is laid out only once."""

    def __init__(self, size: int = 512, dot_timeout: float = DOT_TIMEOUT) -> None:
        self.dot_timeout = dot_timeout
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def svg(self, spec: WorkflowSpec | None, run_id: str, events: list[Event],
            definition_hash: str = "") -> str:
        """The run drawn on the version of ``spec`` it lives on (``definition_hash``), when
        ``spec`` keeps it, else on ``spec``."""
        if spec is None:
            return ""
        try:
            spec = spec.version_for(definition_hash) or spec
            diagram = extract(spec, overlay(_RUN, events))
        except FSMError as exc:
            return f"<p class='warn'>the run cannot be drawn on this definition: {exc}</p>"
        dot = to_dot(diagram)
        key = hashlib.sha256(dot.encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key].replace(_RUN, html.escape(run_id))
        try:
            raw = render(diagram, "svg", dot_timeout=self.dot_timeout).decode()
        except GraphvizMissing as exc:
            return f"<p class='warn'>{exc}</p>"
        svg = raw[raw.index("<svg"):]
        with self._lock:
            self._cache[key] = svg
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return svg.replace(_RUN, html.escape(run_id))


# -- one approval -------------------------------------------------------------------------------

@dataclass
class ApprovalPage:
    approval: Approval
    run: RunState
    ask: Ask
    #: The canonical JSON of the request the approval's hash covers, and that hash.
    subject: str
    subject_hash: str
    #: Why the approval row is not the request it was bound to, or ``None``.
    problem: str | None
    open: bool
    requested: str
    expires: str
    left: str
    #: What the model saw and did: the run's transcript, typed.
    transcript: list[Message]
    events: list[Event]
    svg: str
    limit_text: str = ""
    #: Why the signed-in approver's release limit does not cover this request, or ``""``.
    beyond: str = ""
    notifications: list[Notification] = field(default_factory=list)
    #: The argument a reviewer may lower here (the workflow's amount), or ``None``.
    lower_field: str | None = None
    #: Why this server cannot carry out a decision on the run (its workflow or its
    #: recorded policy cannot be loaded here), or ``None``.
    unloadable: str | None = None
    #: What was approved, when the reviewer approved less than was asked.
    granted: Ask | None = None
    #: How a lower amount is typed (the workflow's currency, in major units).
    amount_form: str = ""
    #: The event log as sentences.
    story: list[Line] = field(default_factory=list)
    #: Other open, approved or done requests about the same subject, and the subject.
    others: list[Other] = field(default_factory=list)
    subject_name: str | None = None
    #: The version of its workflow the run lives on.
    version: str = ""

    @property
    def bound(self) -> bool:
        """The request shown is the one the approval is bound to."""
        return self.problem is None

    @property
    def loadable(self) -> bool:
        """The server can load the run's workflow and policy (a decision needs both)."""
        return self.unloadable is None

    @property
    def decidable(self) -> bool:
        return self.open and self.bound and self.loadable


def granted(spec: WorkflowSpec | None, run: RunState, approval: Approval) -> Ask | None:
    """What was approved, when it is not what was asked."""
    if approval.approved_args is None or approval.approved_args == approval.args:
        return None
    return describe(spec, run, approval.model_copy(update={"args": approval.approved_args}))


def approval_page(store: Evidence, workflows: Workflows, diagrams: Diagrams, approval: Approval,
                  now: float, limit: int | None) -> ApprovalPage:
    run = store.load_run(approval.run_id)
    spec = workflows.spec(store, run)
    events = store.events(run.run_id)
    pending = waiting_on(run, approval)
    if pending is not None:
        subject = pending.subject()
        checked, problem = verified(approval, run)
    else:
        subject, problem = decided_problem(approval, events)
        checked = approval
    ask = describe(spec, run, checked)
    open_ = (approval.decision is None and pending is not None
             and run.status == "awaiting_approval" and run.version == approval.run_version)
    return ApprovalPage(
        approval=checked, run=run, ask=ask, subject=canonical(subject),
        subject_hash=fingerprint(subject), problem=problem, open=open_,
        requested=iso(approval.requested_at), expires=iso(approval.expires_at),
        left=time_left(approval.expires_at - now),
        transcript=read_all(store.messages(run.run_id, 0, run.message_count)), events=events,
        svg=diagrams.svg(spec, run.run_id, events, run.definition_hash),
        limit_text=money(spec, limit) if limit is not None else "",
        beyond=beyond_limit(spec, ask, limit) or "",
        notifications=store.notifications(approval_ids=[approval.approval_id]),
        lower_field=_lower_field(spec and own_version(spec, run), checked),
        unloadable=workflows.problem(store, run) if open_ else None,
        granted=granted(spec, run, approval),
        amount_form=(spec.presentation if spec else PLAIN).unit.accepted(),
        story=story(store, run.run_id, events, spec.presentation if spec else PLAIN),
        others=others(store, spec, run, checked), subject_name=subject_of(spec, run, checked),
        version=store.version_labels([run.definition_hash])[run.definition_hash],
    )


# -- runs ---------------------------------------------------------------------------------------

@dataclass
class StepCost:
    step: int
    state: str
    cost_micros: int
    tokens: int
    kinds: str


def per_step(events: list[Event]) -> list[StepCost]:
    steps: dict[int, StepCost] = {}
    for e in events:
        s = steps.setdefault(e.step, StepCost(e.step, e.state_before or e.state_after or "",
                                              0, 0, ""))
        s.cost_micros += e.cost_micros
        s.tokens += e.tokens
        s.kinds = ", ".join(filter(None, [s.kinds, e.kind])) if e.kind not in s.kinds else s.kinds
    return [steps[k] for k in sorted(steps)]


@dataclass
class RunPage:
    run: RunState
    path: list[str]
    events: list[Event]
    steps: list[StepCost]
    #: Each approval, what it asked, and what was approved when that was less.
    approvals: list[tuple[Approval, Ask, Ask | None]]
    audit_ok: bool
    audit_problems: list[str]
    head: str
    svg: str
    #: The refused attempts the run's chain covers (attempts someone made).
    refusals: list[Any]
    notifications: list[Notification]
    created: str
    updated: str
    #: The event log as sentences.
    story: list[Line] = field(default_factory=list)
    #: Every time the run was handed over to a person, oldest first.
    handovers: list[Handover] = field(default_factory=list)
    #: The version of its workflow the run lives on.
    version: str = ""
    #: What the agent and the customer said (empty for a run that never talked).
    conversation: list[Said] = field(default_factory=list)
    #: What the run waits on its customer for (``None``: no reply is awaited).
    asked: dict[str, Any] | None = None
    #: Replies kept but not read yet.
    unread: list[int] = field(default_factory=list)
    #: The run was given a reply token (a chat front end may reply to it).
    token: bool = False
    #: The runs forked from this one (``fsm fork``), oldest first.
    forks: list[str] = field(default_factory=list)
    #: Refused-attempt rows no chain covers: not shown as attempts, only counted.
    unchained: int = 0


def _refusals(store: People, run_id: str) -> dict[str, Any]:
    covered, uncovered = chained(store, run_id)
    return {"refusals": covered, "unchained": len(uncovered)}


def run_page(store: Store, workflows: Workflows, diagrams: Diagrams, run_id: str) -> RunPage:
    run = store.load_run(run_id)
    spec = workflows.spec(store, run)
    events = store.events(run_id)
    report = audit(store, run_id)
    return RunPage(
        run=run, path=state_path(events), events=events, steps=per_step(events),
        approvals=[(a, describe(spec, run, a), granted(spec, run, a))
                   for a in store.approvals(run_id, pending_only=False)],
        audit_ok=report.ok, audit_problems=report.problems, head=report.head,
        svg=diagrams.svg(spec, run_id, events, run.definition_hash),
        **_refusals(store, run_id),
        notifications=store.notifications(run_id=run_id),
        created=iso(run.created_at), updated=iso(run.updated_at),
        story=story(store, run_id, events, spec.presentation if spec else PLAIN),
        handovers=store.run_handovers(run_id),
        version=store.version_labels([run.definition_hash])[run.definition_hash],
        forks=store.forks_of(run_id),
        **_conversation(store, spec and own_version(spec, run), run, events),
    )


def _conversation(store: Talked, spec: WorkflowSpec | None, run: RunState,
                  events: list[Event]) -> dict[str, Any]:
    """The run page's conversation fields; none for a workflow that never talks."""
    if spec is not None and not spec.converses:
        return {}
    return {"conversation": conversation(events, store.messages(run.run_id), run.answer),
            "asked": asked(spec, run),
            "unread": [r.seq for r in store.replies(run.run_id, unread_only=True)],
            "token": store.reply_token(run.run_id) is not None}


def _lower_field(spec: WorkflowSpec | None, approval: Approval) -> str | None:
    """The amount argument a reviewer may lower, when the workflow allows changes."""
    if spec is None or spec.amend is None:
        return None
    name = spec.presentation.amount_field
    return name if name is not None and isinstance(approval.args.get(name), int) else None
