"""The desk's rows on every store: a handover and its notification land with the commit
that hands the run over, or neither does; the queue filters; the subjects index."""

from __future__ import annotations

from typing import Any

import pytest
import storekit

from fsm import ConcurrentUpdate, RunState, Store
from fsm.records import Event, Handover, StepCommit
from fsm.store.desk import OPEN, Queue

store = storekit.store  # the fixture: each test on every kind of store


def _run(run_id: str, workflow: str = "wf", **changes: Any) -> RunState:
    return RunState(run_id=run_id, workflow=workflow, definition_hash="d" * 16, user="asha",
                    state="s", created_at=1000.0, updated_at=1000.0).model_copy(
        update=changes)


def _handover(run: RunState, at: float, **changes: Any) -> Handover:
    return Handover(handover_id=f"h-{run.run_id}", run_id=run.run_id, workflow=run.workflow,
                    user=run.user, request="help", state=run.state, handed_at=at,
                    cause="model_event", reason="cannot verify").model_copy(update=changes)


def _hand_over(store: Store, run_id: str, at: float, workflow: str = "wf",
               **changes: Any) -> Handover:
    run = store.create_run(_run(run_id, workflow))
    stopped = run.model_copy(update={"status": "handed_over", "updated_at": at})
    row = _handover(stopped, at, **changes)
    store.commit(StepCommit(run=stopped, expected_version=run.version, handover=row,
                            events=[Event(run_id=run_id, step=1, time=at, kind="stop",
                                          detail={"status": "handed_over"})]))
    return row


def test_a_handover_and_its_notification_land_with_the_commit(store: Store) -> None:
    row = _hand_over(store, "r1", 2000.0)
    assert store.run_handovers("r1") == [row] and store.handover(row.handover_id) == row
    (note,) = store.notifications(run_id="r1")
    assert (note.key, note.approval_id, note.kind) == (f"{row.handover_id}:waiting",
                                                       row.handover_id, "waiting")
    assert [n.key for n in store.due_notifications(3000.0)] == [note.key]
    run = store.load_run("r1")
    taken = row.model_copy(update={"taken_by": "sam", "taken_at": 2100.0})
    store.commit(StepCommit(run=run, expected_version=run.version, handover=taken))
    assert store.run_handovers("r1") == [taken] and len(store.notifications(run_id="r1")) == 1


def test_a_commit_that_fails_writes_no_handover_and_no_notification(store: Store) -> None:
    run = store.create_run(_run("r2"))
    stopped = run.model_copy(update={"status": "handed_over"})
    with pytest.raises(ConcurrentUpdate):
        store.commit(StepCommit(run=stopped, expected_version=run.version + 5,
                                handover=_handover(stopped, 2000.0)))
    assert store.run_handovers("r2") == [] and store.notifications(run_id="r2") == []


def test_the_queue_is_newest_first_and_filtered(store: Store) -> None:
    _hand_over(store, "a", 1000.0)
    _hand_over(store, "b", 3000.0, cause="in_doubt", reason="in doubt after a write")
    _hand_over(store, "c", 2000.0, workflow="other")
    _hand_over(store, "d", 4000.0, taken_by="sam", taken_at=4001.0)
    _hand_over(store, "e", 5000.0, closed_at=5001.0, outcome="closed", note="n",
               closed_by="sam", taken_by="sam", taken_at=5000.5)

    def ids(queue: Queue = OPEN, **page: int) -> list[str]:
        return [h.run_id for h in store.handovers(queue, **page)]

    assert ids() == ["d", "b", "c", "a"] and store.count_handovers() == 4
    assert ids(Queue(open_only=False)) == ["e", "d", "b", "c", "a"]
    assert ids(Queue(workflow="wf")) == ["d", "b", "a"]
    assert ids(Queue(cause="in_doubt")) == ["b"]
    assert ids(Queue(taken_by="")) == ["b", "c", "a"]
    assert ids(Queue(taken_by="sam")) == ["d"]
    assert ids(limit=2, offset=1) == ["b", "c"]
    assert store.count_handovers(Queue(workflow="wf", taken_by="")) == 2


def test_the_subjects_index_keeps_each_run_once(store: Store) -> None:
    for run_id, at in (("s1", 1.0), ("s2", 2.0)):
        run = store.create_run(_run(run_id))
        for _ in range(2):
            run = store.commit(StepCommit(run=run.model_copy(update={"updated_at": at}),
                                          expected_version=run.version,
                                          subject="order A-1002"))
    assert store.subject_runs("wf", "order A-1002") == ["s1", "s2"]
    assert store.subject_runs("wf", "order A-1003") == []
    assert store.subject_runs("other", "order A-1002") == []
