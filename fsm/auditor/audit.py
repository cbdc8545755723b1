"""Auditing a run: the hash chain is intact and the log agrees with the run row."""

from __future__ import annotations

from dataclasses import dataclass, field

from fsm.records import FINAL_STATUSES, Event, verify_chain
from fsm.store.base import Store


@dataclass
class AuditReport:
    run_id: str
    events: int
    problems: list[str] = field(default_factory=list)
    #: The hash of the last event: record it elsewhere to detect a rewrite of the whole log.
    head: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def audit(store: Store, run_id: str) -> AuditReport:
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
    report.problems.extend(_consistency(run.state, run.status, run.used.steps,
                                        run.used.cost_micros, events))
    report.problems.extend(_approvals(store, run_id, events))
    report.problems.extend(_effects(store, run_id, events))
    report.head = head
    return report


def _approvals(store: Store, run_id: str, events: list[Event]) -> list[str]:
    """Every decision in the log matches the approvals table, and the other way round."""
    out = []
    logged = {e.detail.get("approval_id"): e for e in events if e.kind == "decision"}
    rows = store.approvals(run_id, pending_only=False)
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


def _effects(store: Store, run_id: str, events: list[Event]) -> list[str]:
    """Every finished write has its tool event in the log, with the same arguments."""
    out = []
    calls = {e.detail.get("key"): e for e in events if e.kind == "tool" and e.detail.get("key")}
    for eff in store.effects(run_id):
        if eff.status != "DONE":
            continue
        e = calls.get(eff.key)
        if e is None:
            out.append(f"effect {eff.key} ({eff.tool}) is done but the log has no call for it")
        elif e.tool != eff.tool or ("args" in e.detail and e.detail["args"] != eff.args):
            out.append(f"event seq {e.seq}: the log's call {e.tool} {e.detail.get('args')} "
                       f"differs from the effect record {eff.tool} {eff.args}")
    return out


def _consistency(state: str, status: str, steps: int, cost: int, events: list[Event]) -> list[str]:
    out = []
    if events and events[-1].state_after != state:
        out.append(f"the log ends in state {events[-1].state_after!r} but the run is in {state!r}")
    policy_calls = sum(1 for e in events
                       if e.kind == "policy" and e.detail.get("step_used", True))
    recovered = sum(1 for e in events if e.kind == "recover")
    if policy_calls != steps:
        out.append(f"the log has {policy_calls} policy calls but the run counts {steps} steps"
                   + (f" ({recovered} recovered)" if recovered else ""))
    logged_cost = sum(e.cost_micros for e in events)
    if logged_cost != cost:
        out.append(f"the log's cost is {logged_cost} micros but the run counts {cost}")
    if status in FINAL_STATUSES:
        stops = [e for e in events if e.kind == "stop"]
        if not stops or stops[-1].detail.get("status") != status:
            out.append(f"the run is {status} but the log's last stop does not say so")
    return out
