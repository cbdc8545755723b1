"""Reviewing a person's decision on a paused run: pure checks that return a ruling.

An approval applies only to the exact pending request (its fingerprint) and run
version it was made for, is decided once, and expires at an absolute time. The
functions here read and judge; :meth:`fsm.runtime.step.Step.apply_ruling` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm._names import name_problem, same_person
from fsm.definition.spec import WorkflowSpec
from fsm.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalRefused,
    ApprovalStale,
    NothingPending,
)
from fsm.records import (
    Approval,
    CallAwaitingApproval,
    Event,
    EventAwaitingPerson,
    RunState,
    Verdict,
    call_subject,
    check_plain_json,
    fingerprint,
    shown,
    utc,
)
from fsm.store.roles import Approvals


@dataclass(frozen=True)
class Ruling:
    """A decision that passed review, ready for the step to apply."""

    approval: Approval
    verdict: Verdict
    reviewer: str | None
    note: str | None
    #: The human event to fire (a waiting state), or ``None`` (a call, or no event).
    event: str | None
    #: What the model (or the transcript) is told.
    message: str
    #: The arguments approved, when the reviewer changed what was asked; else ``None``.
    args: dict[str, Any] | None = None


def pending_approval(store: Approvals, run: RunState) -> Approval:
    """The approval row of the run's pause."""
    assert run.pending is not None
    aid = run.pending.approval_id
    a = store.approval(aid) if aid is not None else None
    if a is not None and a.run_id == run.run_id:
        return a
    raise NothingPending(f"run {run.run_id!r} has no approval record for its pause",
                         run_id=run.run_id, state=run.state)


def unlogged_decision(approval: Approval, events: Sequence[Event]) -> str | None:
    """Why a decided approval row cannot be believed, or ``None``: every decision fsm
    records is an event of the run's log, so a row that says it was decided while the log
    holds no decision of it (another run's decision copied onto it) was changed outside
    fsm. Nobody can decide it again, and nothing may act on it: a person takes over."""
    if approval.decision is None:
        return None
    if any(e.kind == "decision" and e.detail.get("approval_id") == approval.approval_id
           for e in events):
        return None
    by = f" by {shown(approval.reviewer)}" if approval.reviewer else ""
    return (f"approval {approval.approval_id} says it was {shown(approval.decision)}{by}, "
            "but the run's log holds no decision of it: the row was changed outside fsm, "
            "and a person takes over")


def waiting_on(run: RunState, approval: Approval
               ) -> CallAwaitingApproval | EventAwaitingPerson | None:
    """The request ``run`` waits on when it is the one ``approval`` was made for, else
    ``None`` (the run moved on, or waits on another approval)."""
    pending = run.pending
    if isinstance(pending, CallAwaitingApproval | EventAwaitingPerson) \
            and pending.approval_id == approval.approval_id:
        return pending
    return None


def row_subject(approval: Approval, events: Sequence[str] = ()) -> dict[str, Any]:
    """The request an approval row describes, as ``Approval.request`` hashed it: a call's
    subject, or a waiting state's with the ``events`` the person was offered."""
    if approval.tool is not None:
        return call_subject(approval.tool, approval.args)
    return EventAwaitingPerson.model_construct(events=list(events), args=approval.args,
                                             step=0).subject()


def row_problem(approval: Approval, pending: CallAwaitingApproval | EventAwaitingPerson
                ) -> str | None:
    """Why an approval row does not describe the request the run waits on, or ``None``.

    The row's tool and arguments, hashed as ``Approval.request`` hashed them, must give
    the row's hash, and the run's pending request must have that hash too.
    """
    hashed = fingerprint(row_subject(approval, pending.events))
    if approval.tool != pending.tool or approval.args != pending.args \
            or hashed != approval.args_hash:
        return (f"approval {approval.approval_id}'s tool and arguments do not match the "
                f"request the run waits on (hash {approval.args_hash[:12]}); the row was "
                "changed after it was written, and nothing was decided")
    return None


def not_waiting(run: RunState, history: list[Approval]) -> Exception:
    """The error for a decision on a run that waits for nobody."""
    if history and history[-1].decision == "expired" and run.status != "running":
        last = history[-1]
        return ApprovalExpired(
            f"run {run.run_id!r}: approval {last.approval_id} expired at "
            f"{utc(last.expires_at)} and the run moved on (status: {run.status}, "
            f"state: {run.state})", run_id=run.run_id, state=run.state,
        )
    return NothingPending(
        f"run {run.run_id!r} is not waiting for a decision (status: {run.status}, "
        f"state: {run.state})", run_id=run.run_id, state=run.state,
    )


def review(spec: WorkflowSpec, run: RunState, approval: Approval, *, approved: bool,
           reviewer: str, note: str, now: float, event: str | None = None,
           amend: dict[str, Any] | None = None) -> Ruling:
    """Check a decision; raise the reason it is refused, else return the ruling.

    An expired approval returns the expiry ruling: the caller applies it, then
    reports :func:`expired_error`.
    """
    pending = run.pending
    assert isinstance(pending, CallAwaitingApproval | EventAwaitingPerson)
    chosen = chosen_event(spec, run, approved, event)
    reviewer = (reviewer or "").strip()
    if not reviewer:
        raise ApprovalRefused(f"run {run.run_id!r}: a decision needs a reviewer name",
                              run_id=run.run_id, state=run.state)
    problem = name_problem(reviewer)
    if problem is not None:
        raise ApprovalRefused(f"run {run.run_id!r}: {problem}", run_id=run.run_id,
                              state=run.state)
    if run.user and same_person(reviewer, run.user):
        raise ApprovalRefused(
            f"run {run.run_id!r}: {reviewer!r} started this run and cannot decide on it; "
            "ask another reviewer", run_id=run.run_id, state=run.state,
        )
    if approval.decision is not None:
        raise ApprovalAlreadyDecided(
            f"run {run.run_id!r}: approval {approval.approval_id} was already "
            f"{approval.decision} by {approval.reviewer}", run_id=run.run_id, state=run.state,
        )
    if now >= approval.expires_at:
        return expiry(spec, run, approval)
    subject = fingerprint(pending.subject())
    if approval.run_version != run.version or approval.args_hash != subject:
        raise ApprovalStale(
            f"run {run.run_id!r}: approval {approval.approval_id} was requested at run "
            f"version {approval.run_version} for request {approval.args_hash[:12]}, but the "
            f"run is at version {run.version} with request {subject[:12]}",
            run_id=run.run_id, state=run.state,
        )
    problem = row_problem(approval, pending)
    if problem is not None:
        raise ApprovalStale(f"run {run.run_id!r}: {problem}", run_id=run.run_id,
                            state=run.state)
    verdict: Verdict = "approved" if approved else "denied"
    if isinstance(pending, CallAwaitingApproval):
        message = "" if approved else f"denied by {reviewer}: {note}"
    else:
        assert chosen is not None
        message = f"{verdict} by {reviewer}: {note}".rstrip(": ")
    ruling = Ruling(approval, verdict, reviewer, note, chosen, message)
    return _amended(spec, run, ruling, amend) if amend else ruling


def chosen_event(spec: WorkflowSpec, run: RunState, approved: bool,
                 event: str | None) -> str | None:
    """The human event a decision fires (``None`` for a call), or why it cannot be decided."""
    pending = run.pending
    assert pending is not None
    if pending.kind != "event":
        if event is not None:
            raise ApprovalRefused(
                f"run {run.run_id!r} waits for approval of a call to {pending.tool!r}, not "
                f"for an event; decide it without naming event {event!r}",
                run_id=run.run_id, state=run.state, event=event)
        return None
    waiting = ", ".join(repr(e) for e in pending.events)
    wrong = spec.deny_event if approved else spec.approve_event
    if event is None:
        event = spec.approve_event if approved else spec.deny_event
        if event not in pending.events:
            raise ApprovalRefused(
                f"run {run.run_id!r} waits in state {run.state!r} for one of {waiting}, not "
                f"for {event!r}: name the event to fire (--event NAME)",
                run_id=run.run_id, state=run.state, event=event)
    elif event not in pending.events:
        raise ApprovalRefused(
            f"run {run.run_id!r}: event {event!r} is not one the run waits for in state "
            f"{run.state!r} (allowed: {waiting})", run_id=run.run_id, state=run.state,
            event=event)
    elif event == wrong:
        verb, other = ("approve", "deny") if approved else ("deny", "approve")
        raise ApprovalRefused(
            f"run {run.run_id!r}: {event!r} is the workflow's {other} event; {other} the "
            f"run instead of trying to {verb} it with that event",
            run_id=run.run_id, state=run.state, event=event)
    return event


def expiry(spec: WorkflowSpec, run: RunState, approval: Approval) -> Ruling:
    """The ruling an expired approval gets: the expiry event, or tell the model."""
    pending = run.pending
    event = spec.expiry_event
    if isinstance(pending, EventAwaitingPerson):
        fired = event if event in pending.events else None
        return Ruling(approval, "expired", None, None, fired, "the approval request expired")
    return Ruling(approval, "expired", None, None, None,
                  "approval expired before anyone decided")


def is_due(approval: Approval, now: float) -> bool:
    return approval.decision is None and now >= approval.expires_at


def expired_error(run_id: str, approval: Approval, after: RunState) -> ApprovalExpired:
    return ApprovalExpired(
        f"run {run_id!r}: approval {approval.approval_id} expired at "
        f"{utc(approval.expires_at)}; the run is now {after.status} in state "
        f"{after.state!r}", run_id=run_id, state=after.state,
    )


def bound_records(spec: WorkflowSpec) -> frozenset[str]:
    """Fact keys whose value a person approves: records of events into waiting states."""
    cache = spec.cache
    found = cache.get(("bound_records",))
    if found is None:
        found = cache[("bound_records",)] = frozenset(
            spec.records[e] for events in spec.transitions.values()
            for e, dst in events.items() if e in spec.records and spec.waits_for_person(dst)
        )
    return found  # type: ignore[no-any-return]


def approved_binding(spec: WorkflowSpec, store: Approvals, run: RunState
                     ) -> tuple[Approval | None, str | None]:
    """The approval of a waiting state that the run's facts are bound to (``None``: none),
    and why the facts differ from what it approved (``None``: they do not)."""
    keys = bound_records(spec)
    if not keys or not any(k in run.facts for k in keys):
        return None, None
    approved = [a for a in store.approvals(run.run_id, pending_only=False)
                if a.tool is None and a.decision == "approved" and a.args]
    if not approved:
        return None, None
    last = approved[-1]
    if any(run.facts.get(k) == last.granted for k in keys):
        return last, None
    held = {k: run.facts.get(k) for k in sorted(keys)}
    return last, (f"the run's {', '.join(sorted(keys))} {held} differs from what approval "
                  f"{last.approval_id} approved {last.granted}")


def _amended(spec: WorkflowSpec, run: RunState, ruling: Ruling,
             changes: dict[str, Any]) -> Ruling:
    """The ruling with what the reviewer changed, if the workflow lets them change it."""
    pending = run.pending
    assert isinstance(pending, CallAwaitingApproval | EventAwaitingPerson)
    where = dict(run_id=run.run_id, state=run.state)
    if ruling.verdict != "approved":
        raise ApprovalRefused(f"run {run.run_id!r}: only an approval can change what is "
                              "asked; deny it instead", **where)
    if spec.amend is None:
        raise ApprovalRefused(f"run {run.run_id!r}: workflow {spec.name!r} lets no reviewer "
                              "change what is asked; approve or deny it as it is", **where)
    try:
        new = dict(spec.amend(pending.tool, dict(pending.args), dict(changes)))
        # What is approved is held to what could be asked: the tool's arguments, or the
        # payload of the event whose record the waiting state asks about.
        model = (spec.tools[pending.tool].args if isinstance(pending, CallAwaitingApproval)
                 else _record_model(spec, run, pending))
        if model is not None:
            new = model.model_validate(new).model_dump(mode="json")
        check_plain_json(new)
    except (ValueError, TypeError, RecursionError, ValidationError) as exc:
        raise ApprovalRefused(f"run {run.run_id!r}: cannot approve with {shown(changes)}: "
                              f"{shown(exc)}", **where) from None
    if new == pending.args:
        return ruling
    message = f"{ruling.message}; approved with {_changed(pending.args, new)}".lstrip("; ")
    return replace(ruling, args=new, message=message)


def _record_model(spec: WorkflowSpec, run: RunState,
                  pending: EventAwaitingPerson) -> type[BaseModel] | None:
    """The payload model of the event whose record a waiting state asks about."""
    for moves in spec.transitions.values():
        for event, target in moves.items():
            if (target == run.state and event in spec.records and event in spec.payloads
                    and run.facts.get(spec.records[event]) == pending.args):
                return spec.payloads[event]
    return None


def _changed(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k} {old.get(k)!r} → {new.get(k)!r}" for k in keys)
