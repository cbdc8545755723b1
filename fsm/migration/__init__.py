"""Migrating runs on purpose: select runs, check the plan, move each run in one
transaction.

::

    plan = plan_migration(store, WORKFLOW, from_version="1", to="current")
    print("\\n".join(plan.lines()))          # every run's verdict; nothing changed
    result = migrate(store, WORKFLOW, from_version="1", to="2", by="asha")

A plan with any problem is refused whole (:class:`~fsm.errors.MigrationRefused`) and
changes nothing. Each run then moves all or nothing: one commit writes a ``migrated``
event (both hashes, both versions, the state map) into its hash chain; a run that
changed since the plan was checked, or that another process is driving, is left as it
was and reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fsm._names import name_problem
from fsm.definition.spec import WorkflowSpec
from fsm.errors import (
    ConcurrentUpdate,
    LeaseLost,
    MigrationRefused,
    RunLocked,
    UsageError,
)
from fsm.migration.plan import (
    WAIT_KINDS,
    Plan,
    RunVerdict,
    WaitKind,
    check_plan,
    run_waits_for,
    state_waits_for,
)
from fsm.records import FINAL_STATUSES, Event, RunState
from fsm.runtime.migrating import move_run
from fsm.store.base import Store
from fsm.store.roles import Definitions, Effects, Migrations, Versions

__all__ = ["WAIT_KINDS", "Migration", "Plan", "RunVerdict", "WaitKind", "migrate",
           "parse_map", "plan_migration", "run_waits_for", "state_waits_for",
           "unfinished_writes"]


@dataclass
class Migration:
    """What a migration did: the plan, the runs moved, the runs left as they were."""

    plan: Plan
    moved: list[str] = field(default_factory=list)
    #: (run id, why) of runs that changed or were being driven when their turn came.
    left: list[tuple[str, str]] = field(default_factory=list)


def parse_map(pairs: Sequence[str]) -> dict[str, str]:
    """``["old=new", ...]`` as a state map; a pair that is not one is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise UsageError(f"--map {pair!r} is not OLD=NEW (a state of the run's version, "
                             "then a state of the target)")
        if old.strip() in out:
            raise UsageError(f"--map maps {old.strip()!r} twice")
        out[old.strip()] = new.strip()
    return out


def target_of(workflow: WorkflowSpec, to: str) -> WorkflowSpec:
    """The kept version ``to`` names (``current``: the one the code defines now)."""
    found = workflow.named(to)
    if found is None:
        kept = ", ".join(v.label for v in workflow.versions)
        raise UsageError(f"workflow {workflow.name!r} keeps no version {to!r} (kept: {kept}, "
                         "or current)")
    return found


def plan_migration(store: Migrations, workflow: WorkflowSpec, *, runs: Sequence[str] = (),
                   from_version: str | None = None, to: str = "current",
                   state_map: Mapping[str, str] | None = None,
                   by: str = "operator") -> Plan:
    """The plan moving ``runs`` (or every run of ``workflow`` on version ``from_version``
    that has not ended) to version ``to`` of ``workflow``, checked; nothing changes."""
    problem = name_problem(by)
    if problem is not None:
        raise UsageError(f"who migrates: {problem.replace('a reviewer name', 'the name')}")
    target = target_of(workflow, to)
    selected = _selected(store, workflow, runs, from_version)
    labels = store.version_labels(r.definition_hash for r, _ in selected)
    return check_plan(workflow, target,
                      [(r, events, labels[r.definition_hash]) for r, events in selected],
                      dict(state_map or {}), by.strip(),
                      unfinished=unfinished_writes(store, [r for r, _ in selected]))


def unfinished_writes(store: Effects, runs: Sequence[RunState]) -> dict[str, str]:
    """Run id → tool, for the runs whose next step claimed a write and never committed."""
    out = {}
    for r in runs:
        claim = store.effect(f"{r.run_id}:{r.step + 1}")
        if claim is not None and claim.status == "STARTED":
            out[r.run_id] = claim.tool
    return out


def _selected(store: Versions, workflow: WorkflowSpec, runs: Sequence[str],
              from_version: str | None) -> list[tuple[RunState, list[Event]]]:
    if bool(runs) == (from_version is not None):
        raise UsageError("give the runs to migrate, or --workflow W --from VERSION (not both)")
    if runs:
        picked = [store.load_run(r) for r in dict.fromkeys(runs)]
    else:
        assert from_version is not None
        hashes = _hashes(store, workflow, from_version)
        picked = [r for r in store.list_runs(workflow=workflow.name)
                  if r.definition_hash in hashes and r.status not in FINAL_STATUSES]
    return [(r, store.events(r.run_id)) for r in picked]


def _hashes(store: Definitions, workflow: WorkflowSpec, version: str) -> set[str]:
    """The definitions of ``workflow`` that ``version`` names (a label or a hash)."""
    found = {d.definition_hash for d in store.definitions(workflow.name)
             if version in (d.version, d.definition_hash)}
    found |= {v.definition_hash for v in workflow.versions
              if version in (v.version, v.definition_hash)}
    found |= {c.definition_hash for c in store.definition_counts(workflow.name)
              if c.definition_hash == version}
    if not found:
        known = sorted({d.label for d in store.definitions(workflow.name)})
        raise UsageError(f"no version {version!r} of workflow {workflow.name!r} is recorded "
                         f"here (recorded: {', '.join(known) or 'none'}); name a version "
                         "label or a definition hash (fsm definitions lists them)")
    return found


def migrate(store: Store, workflow: WorkflowSpec, *, runs: Sequence[str] = (),
            from_version: str | None = None, to: str = "current",
            state_map: Mapping[str, str] | None = None, by: str = "operator",
            dry_run: bool = False, clock: Callable[[], float] = time.time) -> Migration:
    """Check the plan (see :func:`plan_migration`), then move each run it moves, each in
    one transaction. ``dry_run`` only checks. A plan with problems raises
    :class:`~fsm.errors.MigrationRefused` and changes nothing."""
    plan = plan_migration(store, workflow, runs=runs, from_version=from_version, to=to,
                          state_map=state_map, by=by)
    if dry_run:
        return Migration(plan)
    if not plan.ok:
        raise MigrationRefused(workflow.name, plan.target.label, plan.all_problems(),
                               plan.lines())
    result = Migration(plan)
    for v in plan.moving:
        assert v.move is not None
        try:
            move_run(store, v.run_id, v.move, version=v.version, clock=clock)
        except (RunLocked, ConcurrentUpdate, LeaseLost) as exc:
            result.left.append((v.run_id, str(exc)))
        else:
            result.moved.append(v.run_id)
    return result
