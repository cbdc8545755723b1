"""Moving one run to another definition: one transaction, under the run's lease.

The plan that decided the move (:mod:`fsm.migration`) was checked against the run at one
version; the move is refused if the run has changed since, and a run being driven by
another process is refused by its lease. Either way nothing of the run changes.
"""

from __future__ import annotations

from collections.abc import Callable

from fsm.definition.versions import definition_record
from fsm.errors import ConcurrentUpdate
from fsm.records import CallAwaitingApproval, EventAwaitingPerson, RunState
from fsm.runtime import review
from fsm.runtime.context import RunMove, StepContext, Transcripts
from fsm.runtime.step import Step
from fsm.store.base import Store
from fsm.store.lease import new_owner

#: Seconds the move holds the run's lease (it takes one short transaction).
LEASE_SECONDS = 30.0


def move_run(store: Store, run_id: str, move: RunMove, *, version: int,
             clock: Callable[[], float]) -> RunState:
    """Apply ``move`` to run ``run_id``, which the plan saw at ``version``; the run after
    it. :class:`~fsm.errors.RunLocked` when another process drives the run,
    :class:`~fsm.errors.ConcurrentUpdate` when it changed since the plan was checked."""
    owner = new_owner()
    store.acquire(run_id, owner, clock(), ttl=LEASE_SECONDS)
    try:
        run = store.load_run(run_id)
        if run.version != version:
            raise ConcurrentUpdate(run_id, version, run.version)
        store.record_definition(definition_record(move.to, clock()))
        ctx = StepContext(spec=move.to, store=store, clock=clock,
                          transcripts=Transcripts(store), owner=owner)
        waiting = isinstance(run.pending, CallAwaitingApproval | EventAwaitingPerson)
        approval = review.pending_approval(store, run) if waiting else None
        with Step(ctx, run, step=run.step) as s:
            s.migrate(move, approval)
        return s.landed
    finally:
        store.release(run_id, owner)
