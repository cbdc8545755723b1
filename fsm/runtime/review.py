"""Human decisions on paused runs: approve, deny, expire.

An approval applies only to the exact pending request (its fingerprint) and run
version it was made for, is decided once, and expires at an absolute time.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from fsm.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalRefused,
    ApprovalStale,
    NothingPending,
)
from fsm.names import name_problem, same_person
from fsm.records import Approval, RunState, fingerprint
from fsm.runtime.step import StepBuilder

if TYPE_CHECKING:
    from fsm.runtime.engine import Engine


def _same_person(a: str, b: str) -> bool:
    # Confusable skeletons (UTS #39): "rаvi" with a Cyrillic "а" is ravi.
    return same_person(a, b)


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _approval(engine: Engine, run: RunState) -> Approval:
    assert run.pending is not None
    for a in engine.store.approvals(run.run_id, pending_only=False):
        if a.approval_id == run.pending.approval_id:
            return a
    raise NothingPending(f"run {run.run_id!r} has no approval record for its pause",
                         run_id=run.run_id, state=run.state)


def apply_decision(engine: Engine, run: RunState, approved: bool, reviewer: str,
                   note: str) -> RunState:
    """Check the decision, record it and act on it, in one commit."""
    if run.status != "awaiting_approval" or run.pending is None:
        decided = engine.store.approvals(run.run_id, pending_only=False)
        if decided and decided[-1].decision == "expired" and run.status != "running":
            last = decided[-1]
            raise ApprovalExpired(
                f"run {run.run_id!r}: approval {last.approval_id} expired at "
                f"{_iso(last.expires_at)} and the run moved on (status: {run.status}, "
                f"state: {run.state})", run_id=run.run_id, state=run.state,
            )
        raise NothingPending(
            f"run {run.run_id!r} is not waiting for a decision (status: {run.status}, "
            f"state: {run.state})", run_id=run.run_id, state=run.state,
        )
    reviewer = (reviewer or "").strip()
    if not reviewer:
        raise ApprovalRefused(f"run {run.run_id!r}: a decision needs a reviewer name",
                              run_id=run.run_id, state=run.state)
    problem = name_problem(reviewer)
    if problem is not None:
        raise ApprovalRefused(f"run {run.run_id!r}: {problem}", run_id=run.run_id,
                              state=run.state)
    if run.user and _same_person(reviewer, run.user):
        raise ApprovalRefused(
            f"run {run.run_id!r}: {reviewer!r} started this run and cannot decide on it; "
            "ask another reviewer", run_id=run.run_id, state=run.state,
        )
    approval = _approval(engine, run)
    if approval.decision is not None:
        raise ApprovalAlreadyDecided(
            f"run {run.run_id!r}: approval {approval.approval_id} was already "
            f"{approval.decision} by {approval.reviewer}", run_id=run.run_id, state=run.state,
        )
    if engine.clock() >= approval.expires_at:
        after = expire_if_due(engine, run)
        raise ApprovalExpired(
            f"run {run.run_id!r}: approval {approval.approval_id} expired at "
            f"{_iso(approval.expires_at)}; the run is now {after.status} in state "
            f"{after.state!r}", run_id=run.run_id,
            state=run.state,
        )
    subject = fingerprint(run.pending.subject())
    if approval.run_version != run.version or approval.args_hash != subject:
        raise ApprovalStale(
            f"run {run.run_id!r}: approval {approval.approval_id} was requested at run "
            f"version {approval.run_version} for request {approval.args_hash[:12]}, but the "
            f"run is at version {run.version} with request {subject[:12]}",
            run_id=run.run_id, state=run.state,
        )
    return _record(engine, run, approval, approved, reviewer, note)


def _record(engine: Engine, run: RunState, approval: Approval, approved: bool,
            reviewer: str, note: str) -> RunState:
    pending = run.pending
    assert pending is not None
    b = StepBuilder(engine, run, step=run.step)
    verdict = "approved" if approved else "denied"
    b.decision = (approval.approval_id, verdict, reviewer, note, engine.clock())
    b.set(status="running", pending=None)
    b.event("decision", reviewer=reviewer, tool=pending.tool,
            detail={"decision": verdict, "note": note, "approval_id": approval.approval_id})
    if pending.kind == "call":
        assert pending.tool is not None
        if approved:
            # The decision lands first; the engine then runs the approved call in its own
            # commit, so a crash in between resumes into that call, never into a new decision.
            b.set(pending=pending.model_copy(update={"kind": "approved"}))
        else:
            b.tool_result(pending.tool, error=f"denied by {reviewer}: {note}")
    else:
        spec = engine.spec
        event = spec.approve_event if approved else spec.deny_event
        b.message({"role": "user", "content": f"{verdict} by {reviewer}: {note}".rstrip(": ")})
        if not engine.fire(b, event, {}, by_model=False):
            # A guard refused the person's event: the run still waits for a person.
            engine._entered(b, None)
    return b.save()


def expire_if_due(engine: Engine, run: RunState) -> RunState:
    """Apply an expired approval: fire the expiry event, or tell the model."""
    if run.status != "awaiting_approval" or run.pending is None:
        return run
    approval = _approval(engine, run)
    now = engine.clock()
    if approval.decision is not None or now < approval.expires_at:
        return run
    b = StepBuilder(engine, run, step=run.step)
    b.decision = (approval.approval_id, "expired", None, None, now)
    b.set(status="running", pending=None)
    b.event("decision", tool=run.pending.tool,
            detail={"decision": "expired", "approval_id": approval.approval_id})
    event = engine.spec.expiry_event
    if run.pending.kind == "event" and event in run.pending.events:
        b.message({"role": "user", "content": "the approval request expired"})
        if not engine.fire(b, event, {}, by_model=False):
            engine._entered(b, None)
    elif run.pending.tool is not None:
        b.tool_result(run.pending.tool, error="approval expired before anyone decided")
    else:
        b.stop("handed_over", "approval expired")
    return b.save()
