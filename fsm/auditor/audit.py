"""Auditing a run: the hash chain is intact, the log agrees with the run row, and each
step was allowed by the definition in force at it (:mod:`fsm.auditor.conformance`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fsm.auditor import beside
from fsm.auditor.conformance import judge
from fsm.auditor.conversation_audit import conversation_problems
from fsm.auditor.desk import handover_problems
from fsm.auditor.forks import Link, lineage
from fsm.errors import StoreError
from fsm.records import (
    FINAL_STATUSES,
    Approval,
    Effect,
    Event,
    Handover,
    RunState,
    ViewRecord,
    approval_hash,
    decision_hash,
    effect_hash,
    fingerprint,
    text_hash,
    verify_chain,
)
from fsm.runtime import claims
from fsm.signing import UNCHECKED
from fsm.store.roles import Desk, Evidence, RunReads


@dataclass
class AuditReport:
    run_id: str
    events: int
    problems: list[str] = field(default_factory=list)
    #: The hash of the last event: record it elsewhere to detect a rewrite of the whole log.
    head: str = ""
    #: What is worth knowing but wrong with nothing (replies kept, not read yet).
    notes: list[str] = field(default_factory=list)
    #: What could not be checked (a fork's link to a pruned parent).
    warnings: list[str] = field(default_factory=list)
    #: A fork's link to its parent (:class:`~fsm.auditor.forks.Link`; no origin: no fork).
    link: Link = field(default_factory=Link)

    @property
    def ok(self) -> bool:
        return not self.problems


def audit(store: Evidence, run_id: str) -> AuditReport:
    """Check one run's log. The first problem names the first bad row."""
    run = store.load_run(run_id)
    events = store.events(run_id)
    report = AuditReport(run_id, len(events))
    broken = verify_chain(events)
    if broken:
        report.problems.append(broken)
    count, head = store.log_head(run_id)
    if count != len(events):
        report.problems.append(
            f"the run row records {count} events but the log has {len(events)} "
            "(rows deleted or added)"
        )
    elif events and events[-1].hash != head:
        report.problems.append(f"event seq {events[-1].seq}: not the head the run row records")
    status, workflow = store.run_columns(run_id)
    if (status, workflow) != (run.status, run.workflow):
        report.problems.append(
            f"the run row's columns say status {status!r} and workflow {workflow!r}, its "
            f"snapshot {run.status!r} and {run.workflow!r} (changed outside a step; the "
            "queue and the listings read the columns)")
    definition = store.definition_column(run_id)
    if definition != run.definition_hash:
        report.problems.append(
            f"the run row's definition column says {definition!r}, its snapshot "
            f"{run.definition_hash!r} (changed outside a step; the queue claims by the "
            "column)")
    # A fork's history begins with its parent's log up to the step it was forked at.
    report.link = link = lineage(store, events)
    report.problems.extend(link.problems)
    report.warnings.extend(link.warnings)
    if link.partial:
        # A parent's part is gone (pruned): this run's own part is checked alone.
        report.problems.extend(_own_part(run, events))
        report.problems.extend(judge(store, run, events[1:]))
    else:
        history = link.before + events[1:] if link.origin is not None else events
        report.problems.extend(_consistency(run.state, run.status, run.used.steps,
                                            run.used.cost_micros, history))
        report.problems.extend(judge(store, run, history))
    approvals = store.approvals(run_id, pending_only=False)
    effects = store.effects(run_id)
    report.problems.extend(_approvals(approvals, events))
    report.problems.extend(_effects(effects, events))
    report.problems.extend(_claims(effects, events))
    report.problems.extend(_covered(store, run, events, approvals, effects))
    _signed(store, run_id, events, effects, report)
    problems, report.notes = conversation_problems(store, run, events,
                                                   store.messages(run_id))
    report.problems.extend(problems)
    report.problems.extend(handover_problems(_desk_rows(store, run_id), events, effects))
    report.problems.extend(beside.unwritten_messages(store, run))
    report.problems.extend(beside.artifacts(store, run))
    report.problems.extend(beside.unwaited(approvals, run))
    report.problems.extend(beside.notifications(store, run_id, events))
    report.problems.extend(beside.refusals(store, run_id))
    report.head = head
    return report


def _signed(store: RunReads, run_id: str, events: list[Event], effects: list[Effect],
            report: AuditReport) -> None:
    """The log's head is signed by a key of the keyring, every event was written by a
    signed commit, and every finished effect's result was recorded by one. A running
    run's head authenticated by a MAC is a warning where only public keys are at hand."""
    # The head the run row records (the log is compared with it above).
    count, head, text = store.signed_head(run_id)
    signature = store.keys.check(run_id, count, head, text)
    since = store.keys.since
    if text is None and since is not None and all(e.time < since for e in events):
        report.warnings.append("the run was written before this database signed its log "
                               "heads: no key witnesses its rows")
        return
    if isinstance(signature, str):
        if signature.endswith(UNCHECKED):
            report.warnings.append(f"the log's head cannot be checked here: {signature}")
        else:
            report.problems.append(f"the log's head is not signed by the deployment's key "
                                   f"({signature}): no row of this run is witnessed")
        return
    report.problems += [f"events seq {a}..{b - 1} were written by no signed commit (rows "
                        "added behind fsm's back)" for a, b in signature.gaps]
    report.problems += [
        f"effect {e.key} ({e.tool}) is done, but no signed commit recorded its result"
        for e in effects if e.status == "DONE" and any("rows" in ev.detail for ev in events)
        and not claims.result_covered(e, events, signature)]


def _desk_rows(store: Desk, run_id: str) -> list[Handover]:
    try:
        return store.run_handovers(run_id)
    except StoreError:
        return []  # a store that keeps no desk rows


def _approvals(rows: list[Approval], events: list[Event]) -> list[str]:
    """Every decision in the log matches the approvals table, and the other way round."""
    out = []
    logged = {e.detail.get("approval_id"): e for e in events if e.kind == "decision"}
    for a in rows:
        e = logged.get(a.approval_id)
        if a.decision is None:
            if e is not None:
                out.append(f"event seq {e.seq}: the log decides approval {a.approval_id}, "
                           "which the approvals table still shows pending")
        elif e is None:
            out.append(f"approval {a.approval_id} is {a.decision} in the approvals table but "
                       "the log has no decision for it")
        elif (e.detail.get("decision"), e.reviewer) != (a.decision, a.reviewer):
            out.append(f"event seq {e.seq}: the log says {e.detail.get('decision')} by "
                       f"{e.reviewer}, the approvals table says {a.decision} by {a.reviewer}")
    known = {a.approval_id for a in rows}
    out += [f"event seq {e.seq}: decision on approval {aid}, which the approvals table lacks"
            for aid, e in logged.items() if aid not in known]
    return out


def _effects(rows: list[Effect], events: list[Event]) -> list[str]:
    """Every finished write has its tool event in the log, with the same arguments."""
    out = []
    calls = {e.detail.get("key"): e for e in events if e.kind == "tool" and e.detail.get("key")}
    for eff in rows:
        if eff.status != "DONE":
            continue
        e = calls.get(eff.key)
        if e is None:
            out.append(f"effect {eff.key} ({eff.tool}) is done but the log has no call for it")
        elif e.tool != eff.tool or ("args" in e.detail and e.detail["args"] != eff.args):
            out.append(f"event seq {e.seq}: the log's call {e.tool} {e.detail.get('args')} "
                       f"differs from the effect record {eff.tool} {eff.args}")
    return out


def _claims(rows: list[Effect], events: list[Event]) -> list[str]:
    """Every effect row, claimed or done, is covered by a claim event of the log, and
    every claim in the log has its row.

    A run logged before claims were recorded (no claim event at all) may have done rows
    with no claim: their commits' row hashes cover them (see :func:`_covered_effects`).
    """
    logged = [e for e in events if e.kind == "claim"]
    by_hash = {e.hash: e for e in logged}
    legacy = not logged
    covered_done = {k for e in events for k in _effect_keys(e)}
    out = []
    for eff in rows:
        claim = by_hash.get(eff.claim or "")
        if claim is not None and claims.covers(claim, eff):
            continue
        if claim is None and legacy and eff.status == "DONE" and eff.key in covered_done:
            continue
        what = "no claim in the log covers it" if claim is None else \
            f"its claim (event seq {claim.seq}) names another call"
        out.append(f"effect {eff.key} ({eff.tool}, {eff.status}): {what}; the row was not "
                   "written by a step of this run")
    keys = {eff.key for eff in rows}
    out += [f"event seq {e.seq}: the log claims {e.detail.get('key')} ({e.tool}) but the "
            "effects table has no row for it" for e in logged if e.detail.get("key") not in keys]
    return out


def _effect_keys(e: Event) -> list[str]:
    rows = e.detail.get("rows")
    effects = rows.get("effects") if isinstance(rows, dict) else None
    return list(effects) if isinstance(effects, dict) else []


def _own_part(run: RunState, events: list[Event]) -> list[str]:
    """The counts of a fork whose parent's log is gone, from what its start event says
    the run had used at the fork (a fork made before it said so: not counted)."""
    used = events[0].detail.get("used_at_fork")
    if not isinstance(used, dict):
        return _consistency(run.state, run.status, None, None, events)
    return _consistency(run.state, run.status, run.used.steps - int(used.get("steps", 0)),
                        run.used.cost_micros - int(used.get("cost_micros", 0)), events)


def _consistency(state: str, status: str, steps: int | None, cost: int | None,
                 events: list[Event]) -> list[str]:
    """The log agrees with the run's state, status, steps and cost (``None``: unchecked)."""
    out = []
    if events and events[-1].state_after != state:
        out.append(f"the log ends in state {events[-1].state_after!r} but the run is in {state!r}")
    policy_calls = sum(1 for e in events
                       if e.kind == "policy" and e.detail.get("step_used", True))
    recovered = sum(1 for e in events if e.kind == "recover")
    if steps is not None and policy_calls != steps:
        out.append(f"the log has {policy_calls} policy calls but the run counts {steps} steps"
                   + (f" ({recovered} recovered)" if recovered else ""))
    logged_cost = sum(e.cost_micros for e in events)
    if cost is not None and logged_cost != cost:
        out.append(f"the log's cost is {logged_cost} micros but the run counts {cost}")
    if status in FINAL_STATUSES:
        stops = [e for e in events if e.kind == "stop"]
        if not stops or stops[-1].detail.get("status") != status:
            out.append(f"the run is {status} but the log's last stop does not say so")
    return out


# -- the rows each commit's last event covers -------------------------------------------

def _covered(store: RunReads, run: RunState, events: list[Event], approval_rows: list[Approval],
             effect_rows: list[Effect]) -> list[str]:
    """Every row a commit wrote still has the hash its last log event recorded."""
    covering = [e for e in events if "rows" in e.detail]
    if not covering:
        return []  # a run logged before its rows were covered
    out: list[str] = []
    last = covering[-1]
    rows = last.detail["rows"]
    if not isinstance(rows, dict) or \
            rows.get("snapshot") != text_hash(store.snapshot_text(run.run_id)):
        out.append(f"the run row's snapshot differs from what event seq {last.seq} recorded "
                   "(facts, user, status or budgets changed outside a step)")
    messages = store.messages(run.run_id)
    views: dict[int, ViewRecord | None] = {}
    effects = {e.key: e for e in effect_rows}
    approvals = {a.approval_id: a for a in approval_rows}
    for e in covering:
        rows = e.detail["rows"]
        try:
            out += _covered_messages(e, rows, messages)
            out += _covered_view(store, run.run_id, e, rows, views)
            out += _covered_effects(e, rows, effects)
            out += _covered_approval(e, rows, approvals)
        except (TypeError, ValueError, KeyError, AttributeError):
            # A log rewritten with its hashes made again can hold any shape here.
            out.append(f"event seq {e.seq}: its record of the rows its commit wrote is "
                       "malformed")
    return out


def _covered_messages(e: Event, rows: dict[str, Any],
                      messages: list[dict[str, Any]]) -> list[str]:
    if "messages" not in rows:
        return []
    start, end, digest = rows["messages"]
    if fingerprint(messages[start:end]) != digest:
        return [f"event seq {e.seq}: transcript messages {start}..{end - 1} were changed, "
                "removed or reordered"]
    return []


def _covered_view(store: RunReads, run_id: str, e: Event, rows: dict[str, Any],
                  views: dict[int, ViewRecord | None]) -> list[str]:
    if "view" not in rows:
        return []
    step, digest = rows["view"]
    if step not in views:
        views[step] = store.view_record(run_id, step)
    view = views[step]
    if view is None or fingerprint(view.model_dump(mode="json")) != digest:
        return [f"event seq {e.seq}: the view record of step {step} was changed or removed"]
    return []


def _covered_effects(e: Event, rows: dict[str, Any], effects: dict[str, Effect]) -> list[str]:
    out = []
    for key, digest in rows.get("effects", {}).items():
        eff = effects.get(key)
        if eff is None:
            out.append(f"event seq {e.seq}: the effect row {key} was removed")
        elif eff.status != "DONE" or effect_hash(eff.result, eff.error) != digest:
            out.append(f"event seq {e.seq}: the effect row {key} (status, result or error) "
                       "was changed")
    return out


def _covered_approval(e: Event, rows: dict[str, Any],
                      approvals: dict[str, Approval]) -> list[str]:
    out = []
    if "approval" in rows:
        aid, digest = rows["approval"]
        a = approvals.get(aid)
        if a is None or approval_hash(a) != digest:
            out.append(f"event seq {e.seq}: approval {aid} as requested (arguments, hash, "
                       "version, times) was changed or removed")
    if "decision" in rows:
        aid, digest = rows["decision"]
        a = approvals.get(aid)
        if a is None or decision_hash(aid, a.decision, a.reviewer, a.note,
                                      a.decided_at, a.approved_args) != digest:
            out.append(f"event seq {e.seq}: the decision on approval {aid} (verdict, "
                       "reviewer, note or time) was changed")
    return out
