"""The history check for releases: replay stored runs against a candidate definition.

For each selected run of the candidate's workflow it reports, one line each:

- the steps of its recorded path the candidate would refuse (:func:`fsm.auditor.replay.replay`);
- a waiting state it is in that the candidate no longer has, or where it no longer waits;
- a pending call whose tool or schema the candidate changed so that the call is refused;
- for a run that has not ended, what would strand it if it were migrated to the candidate
  with the state map given (:func:`fsm.migration.plan.check_plan`).

A release pipeline runs it (``fsm check-history``) against a copy of production's
database; any broken run fails the check.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fsm.auditor.replay import Replayed, replay
from fsm.definition.spec import WorkflowSpec
from fsm.migration import unfinished_writes
from fsm.migration.plan import call_problem, check_plan, run_waits_for, state_waits_for
from fsm.records import FINAL_STATUSES, ApprovedCall, CallAwaitingApproval, RunState
from fsm.store.roles import Migrations, RunReads


@dataclass
class RunHistory:
    """One run's verdict."""

    run_id: str
    status: str
    state: str
    version: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class HistoryReport:
    candidate: WorkflowSpec
    runs: list[RunHistory]

    @property
    def broken(self) -> list[RunHistory]:
        return [r for r in self.runs if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.broken

    def lines(self) -> list[str]:
        c = self.candidate
        out = [f"checked {len(self.runs)} run(s) of {c.name} against version {c.label} "
               f"(definition {c.definition_hash}): {len(self.broken)} would break"]
        for r in self.runs:
            verdict = "ok   " if r.ok else "BREAK"
            out.append(f"{verdict} {r.run_id} (version {r.version}, {r.status} in {r.state})")
            out += [f"  - {p}" for p in r.problems]
        return out


def select(store: RunReads, workflow: str, runs: Sequence[str] = (),
           sample: int | None = None, seed: int = 0) -> list[RunState]:
    """``runs``, else every run of ``workflow`` (``sample``: that many of them, picked at
    random with ``seed``, the same ones every time)."""
    if runs:
        return [store.load_run(r) for r in dict.fromkeys(runs)]
    found: list[RunState] = store.list_runs(workflow=workflow)
    if sample is not None and sample < len(found):
        found = sorted(random.Random(seed).sample(found, sample),
                       key=lambda r: (r.created_at, r.run_id))
    return found


def check_history(store: Migrations, candidate: WorkflowSpec, *, runs: Sequence[str] = (),
                  sample: int | None = None, seed: int = 0,
                  state_map: Mapping[str, str] | None = None) -> HistoryReport:
    """Replay the selected runs against ``candidate``; nothing runs, nothing changes."""
    names = dict(state_map or {})
    chosen = select(store, candidate.name, runs, sample, seed)
    labels = store.version_labels(r.definition_hash for r in chosen)
    out = []
    for run in chosen:
        h = RunHistory(run.run_id, run.status, run.state, labels[run.definition_hash])
        if run.workflow != candidate.name:
            h.problems.append(f"the run is of workflow {run.workflow!r}, not "
                              f"{candidate.name!r}")
        else:
            h.problems += replay(candidate, store, run.run_id, names)
            h.problems += _in_flight(store, candidate, run, names, h.version)
        out.append(h)
    return HistoryReport(candidate, out)


def _in_flight(store: Replayed, candidate: WorkflowSpec, run: RunState,
               names: Mapping[str, str], label: str) -> list[str]:
    """What the candidate does to a run that has not ended: where it waits, what it waits
    to have approved, and whether a migration with ``names`` would strand it."""
    if run.status in FINAL_STATUSES:
        return []
    state = names.get(run.state, run.state)
    waits = run_waits_for(run)
    out = []
    if state not in candidate.states:
        if waits is not None:
            out.append(f"it waits for {waits} in {state!r}, which the candidate does not have")
        else:
            out.append(f"it is in {state!r}, which the candidate does not have")
        return out
    if waits is not None and state_waits_for(candidate, state) != waits:
        out.append(f"it waits for {waits} in {state!r}, where the candidate does not wait "
                   "that way")
    pending = run.pending
    if isinstance(pending, CallAwaitingApproval | ApprovedCall):
        why = call_problem(candidate, state, pending.tool, pending.args)
        if why is not None:
            out.append(f"its pending call {pending.tool} is refused by the candidate: {why}")
    if out or run.definition_hash == candidate.definition_hash:
        return out
    plan = check_plan(candidate, candidate, [(run, store.events(run.run_id), label)],
                      names, "check-history", unfinished=unfinished_writes(store, [run]))
    return out + [f"a migration to the candidate would strand it: {p}"
                  for p in plan.all_problems()]
