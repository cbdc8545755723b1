"""Other requests about the same thing: "order A-1002 was refunded ₹1,800 on 2026-12-01 in
run r7".

A workflow names what a request is about with ``Presentation.subject``; each run that
asks for a decision or makes a write is indexed under its subject (``Store.subject_runs``).
The approval page lists the other runs' open, approved and done requests about the same
subject before its decision form, and the inbox marks such rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsm.definition.presentation import PLAIN
from fsm.definition.spec import WorkflowSpec
from fsm.records import Approval, Effect, Event, RunState, utc
from fsm.store.roles import Evidence


@dataclass(frozen=True)
class Other:
    """One other request about the same subject, as a sentence."""

    run_id: str
    #: ``waiting``, ``approved`` or ``done``.
    kind: str
    text: str


def subject_of(spec: WorkflowSpec | None, run: RunState, approval: Approval) -> str | None:
    shown = spec.presentation if spec is not None else PLAIN
    return shown.subject_of(approval.tool, approval.args, run.facts)


def _day(t: float | None) -> str:
    return utc(t)[:10]


def _failed(spec: WorkflowSpec, events: list[Event], key: str) -> str | None:
    """The event that handed the run over right after the write ``key``, if one did."""
    for i, e in enumerate(events):
        if e.kind == "tool" and e.detail.get("key") == key:
            for later in events[i + 1:]:
                if later.step != e.step:
                    break
                if later.kind == "transition" and later.state_after in spec.handed_over_states:
                    return later.event
    return None


def _done(spec: WorkflowSpec, subject: str, run: RunState, effects: list[Effect],
          events: list[Event]) -> list[Other]:
    shown = spec.presentation
    out = []
    for eff in effects:
        amount = shown.amount_of(eff.tool, eff.args)
        if eff.status != "DONE" or eff.error is not None or amount is None:
            continue
        verb = shown.written_verb(eff.tool)
        failed = _failed(spec, events, eff.key)
        if failed is not None:
            text = (f"{subject}: run {run.run_id} tried {eff.tool} for "
                    f"{shown.show_money(amount)} on {_day(eff.finished_at)}, which failed "
                    f"({failed})")
        else:
            text = (f"{subject} was {verb} {shown.show_money(amount)} on "
                    f"{_day(eff.finished_at)} in run {run.run_id}")
        out.append(Other(run.run_id, "done" if failed is None else "failed", text))
    return out


def _asked(spec: WorkflowSpec, subject: str, run: RunState,
           approvals: list[Approval]) -> list[Other]:
    shown = spec.presentation
    out = []
    for a in approvals:
        money = shown.money_text(a.tool, a.granted)
        what = shown.describe(a.tool, a.granted, run.facts)
        if a.decision is None and run.status == "awaiting_approval":
            out.append(Other(run.run_id, "waiting", f"{subject}: run {run.run_id} also asks "
                             f"“{what}”, waiting since {_day(a.requested_at)}"))
        elif a.decision == "approved":
            out.append(Other(run.run_id, "approved", f"{subject} was approved "
                             f"{money or 'as asked'} on {_day(a.decided_at)} in run "
                             f"{run.run_id}" + (f" by {a.reviewer}" if a.reviewer else "")))
    return out


def others(store: Evidence, spec: WorkflowSpec | None, run: RunState,
           approval: Approval) -> list[Other]:
    """The other runs' open, approved and done requests about this request's subject."""
    subject = subject_of(spec, run, approval)
    if spec is None or subject is None:
        return []
    out: list[Other] = []
    for run_id in store.subject_runs(run.workflow, subject):
        if run_id == run.run_id:
            continue
        other = store.load_run(run_id)
        done = _done(spec, subject, other, store.effects(run_id), store.events(run_id))
        # A request that was approved and then carried out is told once, as done.
        asked = [o for o in _asked(spec, subject, other, store.approvals(run_id,
                                                                         pending_only=False))
                 if not (o.kind == "approved" and any(d.kind == "done" for d in done))]
        out += asked + done
    return out
