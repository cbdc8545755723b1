"""Retention: finished runs are pruned in short batches, each leaving a tombstone; waiting
and running runs, and handovers still open, are never pruned."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import storekit

from fsm import RunState, SQLiteStore, Store
from fsm.records import Event, ForkOrigin, Handover, StepCommit
from fsm.records.transcript import read_all
from fsm.store import open_store
from fsm.store.prune import PRUNABLE, RUN_TABLES, prune
from fsm.store.schema import MIGRATIONS

store = storekit.store  # the fixture: each test on every kind of store


def _finished(store: Store, run_id: str, status: str, at: float, workflow: str = "wf",
              handover: dict[str, Any] | None = None, parent: str | None = None) -> RunState:
    origin = ForkOrigin(run_id=parent, step=1, seq=0, hash="0" * 64) if parent else None
    run = store.create_run(RunState(run_id=run_id, workflow=workflow, definition_hash="d" * 16,
                                    state="s", created_at=at - 10, updated_at=at - 10,
                                    forked_from=origin))
    ended = run.model_copy(update={"status": status, "updated_at": at,
                                   "message_count": 1})
    row = None
    if handover is not None:
        row = Handover(handover_id=f"h-{run_id}", run_id=run_id, workflow=workflow,
                       state="s", handed_at=at, cause="other", reason="r", **handover)
    return store.commit(StepCommit(
        run=ended, expected_version=run.version,
        messages=read_all([{"role": "user", "content": "x"}]),
        events=[Event(run_id=run_id, step=1, time=at, kind="stop",
                      detail={"status": status})], handover=row, subject="order 1"))


def test_finished_runs_are_pruned_and_leave_tombstones(store: Store) -> None:
    for i, status in enumerate(PRUNABLE):
        _finished(store, f"old-{status}", status, 1000.0 + i,
                  handover={"closed_at": 1100.0, "outcome": "closed", "note": "n",
                            "closed_by": "sam", "taken_by": "sam", "taken_at": 1050.0}
                  if status == "handed_over" else None)
    for status in ("running", "awaiting_approval", "model_unavailable"):
        _finished(store, f"live-{status}", status, 1000.0)
    _finished(store, "open-desk", "handed_over", 1000.0, handover={})
    _finished(store, "recent", "done", 5000.0)
    _finished(store, "other-wf", "done", 1000.0, workflow="other")
    heads = {r: store.log_head(r) for r in ("old-done", "old-failed")}
    dry = prune(store, before=2000.0, workflow="wf", dry_run=True, by="ops", now=9000.0)
    assert (dry.runs, dry.events) == (4, 4) and store.tombstone("old-done") is None
    done = prune(store, before=2000.0, workflow="wf", by="ops", now=9000.0, batch=3)
    assert (done.runs, done.events, done.batches) == (4, 4, 2)
    left = sorted(r.run_id for r in store.list_runs())
    assert left == ["live-awaiting_approval", "live-model_unavailable", "live-running",
                    "open-desk", "other-wf", "recent"]
    stone = store.tombstone("old-done")
    assert stone is not None
    assert (stone.workflow, stone.definition_hash, stone.status, stone.head,
            stone.log_count, stone.finished_at, stone.pruned_at, stone.pruned_by) == (
        "wf", "d" * 16, "done", heads["old-done"][1], heads["old-done"][0], 1000.0, 9000.0,
        "ops")
    assert store.subject_runs("wf", "order 1") == ["live-awaiting_approval",
                                                    "live-model_unavailable", "live-running",
                                                    "open-desk", "recent"]
    assert store.run_handovers("old-handed_over") == []
    assert store.notifications(run_id="old-handed_over") == []


def test_a_run_with_a_fork_not_pruned_is_kept_and_goes_after_its_forks(store: Store) -> None:
    """A fork's audit checks its link against its parent's log: the parent stays while a
    fork of it stays, and goes in a later batch of the same prune when its forks went."""
    _finished(store, "big", "done", 1000.0)
    _finished(store, "f1", "done", 1000.0, parent="big")  # finished: pruned first
    _finished(store, "f2", "awaiting_approval", 1000.0, parent="big")  # never pruned
    _finished(store, "solo", "done", 1000.0)
    _finished(store, "chain", "done", 1000.0)
    _finished(store, "chain-a", "done", 1000.0, parent="chain")
    _finished(store, "chain-b", "done", 5000.0, parent="chain-a")  # too recent: kept
    _finished(store, "gone", "done", 1000.0)
    _finished(store, "gone-a", "failed", 1000.0, parent="gone")
    dry = prune(store, before=2000.0, dry_run=True, by="ops", now=9000.0)
    assert (dry.runs, dry.kept) == (4, {"big": ["f2"], "chain": ["chain-a"],
                                        "chain-a": ["chain-b"]})
    assert len(store.list_runs()) == 9  # a dry run changes nothing
    done = prune(store, before=2000.0, by="ops", now=9000.0, batch=100)
    assert (done.runs, done.events, done.kept) == (4, 4, dry.kept)
    assert done.batches == 2  # gone went in a second batch, after gone-a
    assert sorted(r.run_id for r in store.list_runs()) == [
        "big", "chain", "chain-a", "chain-b", "f2"]
    assert [store.tombstone(r) is not None for r in ("f1", "solo", "gone", "gone-a")] == [
        True] * 4
    # Once the fork that kept it is gone, the parent goes too.
    assert prune(store, before=2000.0, statuses=("done",), by="ops", now=9000.0).kept == {
        "big": ["f2"], "chain": ["chain-a"], "chain-a": ["chain-b"]}
    assert prune(store, before=9000.0, by="ops", now=9000.0).kept == {"big": ["f2"]}
    assert sorted(r.run_id for r in store.list_runs()) == ["big", "f2"]


def test_only_the_statuses_asked_for_are_pruned(store: Store) -> None:
    _finished(store, "a", "done", 1000.0)
    _finished(store, "b", "failed", 1000.0)
    assert prune(store, before=2000.0, statuses=("failed",), by="ops", now=3000.0).runs == 1
    assert [r.run_id for r in store.list_runs()] == ["a"]


def test_every_table_with_rows_of_a_run_is_pruned(tmp_path: Path) -> None:
    con = sqlite3.connect(":memory:")
    for script in MIGRATIONS:
        con.executescript(script)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
              if any(c[1] == "run_id" for c in con.execute(f"PRAGMA table_info({t})"))}
    con.close()
    assert tables - {"runs", "tombstones"} == set(RUN_TABLES)
    db = tmp_path / "runs.db"
    with SQLiteStore(str(db)) as store:
        _finished(store, "gone", "handed_over", 1000.0,
                  handover={"closed_at": 1.0, "outcome": "closed", "note": "n",
                            "closed_by": "s", "taken_by": "s", "taken_at": 1.0})
        prune(store, before=2000.0, by="ops", now=3000.0)
    con = sqlite3.connect(db)
    try:
        for table in (*RUN_TABLES, "runs"):
            assert con.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = 'gone'"
                               ).fetchone() == (0,), table
    finally:
        con.close()


def test_a_worker_writes_while_a_prune_runs(tmp_path: Path) -> None:
    """Each batch is its own short transaction: a worker's commits land in between."""
    db = str(tmp_path / "runs.db")
    with SQLiteStore(db) as store:
        for i in range(300):
            _finished(store, f"old-{i:03d}", "done", 1000.0)
        live = store.create_run(RunState(run_id="live", workflow="wf", definition_hash="d",
                                         state="s", created_at=1.0, updated_at=1.0))
    stop = threading.Event()
    landed: list[int] = []

    def worker() -> None:
        with SQLiteStore(db, busy_timeout_ms=30_000) as own:
            run = live
            while not stop.is_set():
                run = own.commit(StepCommit(run=run.model_copy(update={"updated_at": 9e9}),
                                            expected_version=run.version))
                landed.append(run.version)
                stop.wait(0.002)  # a worker asks its model between commits

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        with SQLiteStore(db, busy_timeout_ms=30_000) as pruner:
            done = prune(pruner, before=2000.0, by="ops", now=3000.0, batch=20, pause=0.01)
    finally:
        stop.set()
        thread.join()
    assert (done.runs, done.batches) == (300, 15)
    assert len(landed) > 1 and landed == sorted(landed)


def test_on_postgresql_a_run_another_transaction_holds_is_skipped_not_waited_for(
        pg_url: str) -> None:
    import psycopg

    with open_store(pg_url) as store:
        for run_id in ("held", "free"):
            _finished(store, run_id, "done", 1000.0)
        with psycopg.connect(pg_url) as other:
            other.execute("SET lock_timeout = '5s'")
            other.execute("SELECT 1 FROM runs WHERE run_id = 'held' FOR UPDATE")
            done = prune(store, before=2000.0, by="ops", now=3000.0)
            assert done.runs == 1 and store.tombstone("free") is not None
            other.rollback()
        assert [r.run_id for r in store.list_runs()] == ["held"]
        assert prune(store, before=2000.0, by="ops", now=3000.0).runs == 1
