"""What each page shows, computed from the store: plain data for the templates."""

from __future__ import annotations

import hashlib
import html
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from fsm.auditor.audit import audit
from fsm.auditor.diagram import extract, overlay
from fsm.auditor.render import GraphvizMissing, render, to_dot
from fsm.errors import FSMError
from fsm.records import (
    Approval,
    Event,
    RunState,
    canonical,
    fingerprint,
    state_path,
)
from fsm.runtime.review import row_problem, row_subject, waiting_on
from fsm.spec import WorkflowSpec
from fsm.store.base import Store
from fsm.store.people import Notification
from fsm.web.decisions import Ask, Workflows, describe, iso, money

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


def _delivery(notes: list[Notification]) -> str:
    waiting = [n for n in notes if n.kind == "waiting"]
    if not waiting:
        return "none"
    n = waiting[-1]
    if n.status == "pending" and n.attempts:
        return f"retrying ({n.attempts} attempts)"
    return n.status


def inbox(store: Store, workflows: Workflows, now: float, workflow: str | None,
          page: int) -> tuple[list[InboxRow], Pager]:
    pager = Pager(page, store.count_waiting(workflow))
    found = store.waiting(workflow, limit=pager.size, offset=pager.offset)
    notes: dict[str, list[Notification]] = {}
    for n in store.notifications(approval_ids=[a.approval_id for a, _ in found]):
        notes.setdefault(n.approval_id, []).append(n)
    rows = []
    for a, run in found:
        shown, problem = verified(a, run)
        rows.append(InboxRow(
            approval=a, run=run, ask=describe(workflows.spec(store, run), run, shown),
            requested=iso(a.requested_at), expires=iso(a.expires_at),
            left=time_left(a.expires_at - now), delivery=_delivery(notes.get(a.approval_id, [])),
            problem=problem,
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
#: share one layout (Graphviz takes tens of milliseconds per layout).
_RUN = "RUN-ID-9f3c"


class Diagrams:
    """Inline SVG of a run on its workflow; the same DOT text is laid out only once."""

    def __init__(self, size: int = 512) -> None:
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def svg(self, spec: WorkflowSpec | None, run_id: str, events: list[Event]) -> str:
        if spec is None:
            return ""
        try:
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
            raw = render(diagram, "svg").decode()
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
    transcript: list[dict[str, Any]]
    events: list[Event]
    svg: str
    limit_text: str = ""
    over_limit: bool = False
    notifications: list[Notification] = field(default_factory=list)
    #: The argument a reviewer may lower here (the workflow's amount), or ``None``.
    lower_field: str | None = None
    #: The server can load the run's workflow (a decision needs it).
    loadable: bool = True
    #: What was approved, when the reviewer approved less than was asked.
    granted: Ask | None = None

    @property
    def bound(self) -> bool:
        """The request shown is the one the approval is bound to."""
        return self.problem is None

    @property
    def decidable(self) -> bool:
        return self.open and self.bound and self.loadable


def granted(spec: WorkflowSpec | None, run: RunState, approval: Approval) -> Ask | None:
    """What was approved, when it is not what was asked."""
    if approval.approved_args is None or approval.approved_args == approval.args:
        return None
    return describe(spec, run, approval.model_copy(update={"args": approval.approved_args}))


def approval_page(store: Store, workflows: Workflows, diagrams: Diagrams, approval: Approval,
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
        transcript=store.messages(run.run_id), events=events,
        svg=diagrams.svg(spec, run.run_id, events),
        limit_text=money(spec, limit) if limit is not None else "",
        over_limit=limit is not None and ask.amount is not None and ask.amount > limit,
        notifications=store.notifications(approval_ids=[approval.approval_id]),
        lower_field=_lower_field(spec, checked), loadable=spec is not None,
        granted=granted(spec, run, approval),
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
    refusals: list[Any]
    notifications: list[Notification]
    created: str
    updated: str


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
        svg=diagrams.svg(spec, run_id, events), refusals=store.refusals(run_id),
        notifications=store.notifications(run_id=run_id),
        created=iso(run.created_at), updated=iso(run.updated_at),
    )


def _lower_field(spec: WorkflowSpec | None, approval: Approval) -> str | None:
    """The amount argument a reviewer may lower, when the workflow allows changes."""
    if spec is None or spec.amend is None:
        return None
    name = spec.presentation.amount_field
    return name if name is not None and isinstance(approval.args.get(name), int) else None
