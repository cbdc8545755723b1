"""What only the SQLite store does: pragmas, schema migrations, snapshot migrations,
pinned definitions, translated errors, and storage that stays flat per step."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fsm import (
    Action,
    Budgets,
    DefinitionChanged,
    Engine,
    RunState,
    SQLiteStore,
    StoreError,
    ToolSpec,
    WorkflowSpec,
    define_workflow,
)
from fsm.auditor.audit import audit
from fsm.records import GENESIS, SCHEMA_VERSION, StepCommit, migrate
from fsm.records.transcript import read_all
from fsm.settings import Settings
from fsm.store import open_store
from fsm.store.schema import MIGRATIONS


def pragma(store: SQLiteStore, name: str) -> Any:
    return store.db.read(f"PRAGMA {name}")[0][0]


# -- pragmas ----------------------------------------------------------------------------------

def test_wal_and_full_sync_by_default(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    assert pragma(store, "journal_mode") == "wal"
    assert pragma(store, "synchronous") == 2  # FULL
    assert pragma(store, "busy_timeout") == 10_000
    assert store.schema_version == len(MIGRATIONS)


@pytest.mark.parametrize(("mode", "code"), [("OFF", 0), ("normal", 1), ("FULL", 2), ("EXTRA", 3)])
def test_synchronous_is_configurable(tmp_path: Path, mode: str, code: int) -> None:
    assert pragma(SQLiteStore(str(tmp_path / "a.db"), synchronous=mode), "synchronous") == code


def test_open_store_follows_the_settings_it_is_given(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSM_DB", str(tmp_path / "env.db"))
    monkeypatch.setenv("FSM_SYNCHRONOUS", "normal")
    monkeypatch.setenv("FSM_SQLITE_BUSY_TIMEOUT", "0.25")
    monkeypatch.chdir(tmp_path)
    with open_store(settings=Settings.load()) as store:
        assert store.path == str(tmp_path / "env.db")
        assert pragma(store, "synchronous") == 1
        assert pragma(store, "busy_timeout") == 250
    with open_store(str(tmp_path / "x.db"), settings=Settings.load(),
                    synchronous="FULL") as other:
        assert pragma(other, "synchronous") == 2
    # A library call without settings reads no environment: the defaults apply.
    with open_store() as plain:
        assert plain.path == "fsm.db" and (tmp_path / "fsm.db").exists()
        assert pragma(plain, "synchronous") == 2
        assert pragma(plain, "busy_timeout") == 10_000


def test_a_bad_synchronous_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="must be OFF, NORMAL, FULL or EXTRA, not 'fast'"):
        SQLiteStore(str(tmp_path / "a.db"), synchronous="fast")


# -- errors are translated ----------------------------------------------------------------------

def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 300)
    with pytest.raises(StoreError, match="cannot open database"):
        SQLiteStore(str(junk))


def test_a_database_from_a_newer_fsm_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "new.db")
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 3}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=f"schema version {len(MIGRATIONS) + 3}, newer"):
        SQLiteStore(path)


def test_a_locked_database_is_a_store_error_after_the_busy_timeout(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    store = SQLiteStore(path, busy_timeout_ms=50)
    run = store.create_run(_run("r1"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked"):
            store.commit(StepCommit(run=run, expected_version=1))
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.commit(StepCommit(run=run, expected_version=1)).version == 2


def test_a_failing_statement_inside_a_commit_is_a_store_error_and_rolls_back(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    run = store.create_run(_run("r1"))
    # The database refuses the commit's message row after the run row was updated.
    store.db.connection.execute("CREATE TRIGGER no_messages BEFORE INSERT ON messages "
                      "BEGIN SELECT RAISE(ABORT, 'messages are refused here'); END")
    bad = StepCommit(run=run.model_copy(update={"message_count": 1, "state": "moved"}),
                     expected_version=1, messages=read_all([{"role": "user", "content": "x"}]))
    with pytest.raises(StoreError, match="messages are refused here"):
        store.commit(bad)
    assert store.load_run("r1").version == 1 and store.load_run("r1").state == "s"


def test_a_store_that_committed_last_still_sees_another_writer_and_a_lost_lease(
    tmp_path: Path,
) -> None:
    """A store skips reading the run row before a commit while it knows the run's version
    from its own last commit; another writer's commit or lease is still seen."""
    from fsm import ConcurrentUpdate, LeaseLost
    from fsm.records import Event, verify_chain

    path = str(tmp_path / "a.db")
    mine, theirs = SQLiteStore(path), SQLiteStore(path)

    def step(run: RunState, owner: str | None = None) -> StepCommit:
        return StepCommit(run=run.model_copy(update={"step": run.step + 1}),
                          expected_version=run.version, owner=owner,
                          events=[Event(run_id="r1", step=run.step + 1, time=1.0, kind="policy")])

    run = mine.create_run(_run("r1"))
    run = mine.commit(step(run))  # ``mine`` now knows version 2
    theirs.commit(step(theirs.load_run("r1")))  # the run moves on to version 3 elsewhere
    with pytest.raises(ConcurrentUpdate) as info:
        mine.commit(step(run))
    assert (info.value.expected, info.value.found) == (2, 3)

    run = mine.load_run("r1")
    mine.acquire("r1", "me.example:1:a", 1000.0, ttl=30.0)
    run = mine.commit(step(run, "me.example:1:a"))
    theirs.acquire("r1", "them.example:2:b", 1031.0, ttl=30.0)  # expired, taken over
    with pytest.raises(LeaseLost):
        mine.commit(step(run, "me.example:1:a"))
    events = theirs.events("r1")
    assert [e.seq for e in events] == [0, 1, 2]  # nothing of the refused commits
    assert verify_chain(events) is None  # one chain, from either writer


def test_the_status_column_follows_every_commit_from_either_store(tmp_path: Path) -> None:
    """A commit leaves an unchanged status column as it is (rewriting it would rewrite
    its indexes); the column still says what the snapshot says after every commit, from
    this store or another one."""
    path = str(tmp_path / "a.db")
    mine, theirs = SQLiteStore(path), SQLiteStore(path)

    def commit(store: SQLiteStore, run: RunState, status: str) -> RunState:
        return store.commit(StepCommit(
            run=run.model_copy(update={"status": status, "step": run.step + 1}),
            expected_version=run.version))

    def column() -> str:
        db = sqlite3.connect(path)
        try:
            return str(db.execute("SELECT status FROM runs WHERE run_id = 'r1'").fetchone()[0])
        finally:
            db.close()

    run = mine.create_run(_run("r1"))
    for status in ("running", "awaiting_approval", "awaiting_approval"):
        run = commit(mine, run, status)
        assert column() == status == mine.load_run("r1").status
    commit(theirs, theirs.load_run("r1"), "running")  # ``mine`` last saw awaiting_approval
    run = commit(mine, mine.load_run("r1"), "awaiting_approval")
    assert column() == "awaiting_approval"
    run = commit(mine, run, "done")
    assert column() == "done"
    assert [r.run_id for r in theirs.list_runs("done")] == ["r1"]


# -- schema and snapshot migrations -------------------------------------------------------------

V1_SNAPSHOT = {
    # A run snapshot as schema 1 wrote it: flat spend fields, no ``used``, no compaction.
    "schema_version": 1, "run_id": "old", "workflow": "loop", "definition_hash": "x" * 16,
    "user": "asha", "status": "running", "state": "working", "step": 4, "steps_used": 4,
    "tokens_in": 120, "tokens_out": 30, "cost_micros_used": 900, "active_seconds": 1.5,
    "facts": {"order": {"order_id": "A-1001"}}, "message_count": 9, "version": 99,
    "created_at": 100.0, "updated_at": 200.0,
}


def test_an_old_run_snapshot_migrates_on_load() -> None:
    run = RunState.model_validate(V1_SNAPSHOT)
    assert run.schema_version == SCHEMA_VERSION == 3
    assert run.used.model_dump() == {"steps": 4, "input_tokens": 120, "output_tokens": 30,
                                     "cost_micros": 900, "active_seconds": 1.5}
    assert run.compaction is None and run.facts == {"order": {"order_id": "A-1001"}}
    assert migrate(dict(V1_SNAPSHOT))["schema_version"] == 3


V2_PENDING = {
    # Schema 2 kept one Pending model for three kinds, every field on each.
    "call": {"kind": "call", "tool": "refund_item", "args": {"amount_paise": 9}, "key": "r:3",
             "events": [], "step": 3, "approval_id": "a1"},
    "event": {"kind": "event", "tool": None, "args": {"amount_paise": 9}, "key": None,
              "events": ["approved", "declined"], "step": 3, "approval_id": "a2"},
    "approved": {"kind": "approved", "tool": "refund_item", "args": {"amount_paise": 9},
                 "key": "r:3", "events": [], "step": 3, "approval_id": "a3"},
}


@pytest.mark.parametrize("kind", sorted(V2_PENDING))
def test_a_version_2_pending_becomes_its_own_kind(kind: str) -> None:
    old = {**V1_SNAPSHOT, "schema_version": 2, "used": {"steps": 4},
           "pending": V2_PENDING[kind]}
    run = RunState.model_validate(old)
    assert run.pending is not None and run.pending.kind == kind
    assert type(run.pending).__name__ == {"call": "CallAwaitingApproval",
                                          "event": "EventAwaitingPerson",
                                          "approved": "ApprovedCall"}[kind]
    assert run.pending.args == {"amount_paise": 9} and run.pending.approval_id is not None
    dumped = run.pending.model_dump()
    assert "events" not in dumped or kind == "event"
    assert "key" not in dumped or kind != "event"


def _v1_database(path: str) -> None:
    """A database as fsm's first schema left it: one run with a v1 snapshot and a log row."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO runs (run_id, workflow, status, version, snapshot, created_at, updated_at)"
        " VALUES ('old', 'loop', 'running', 7, ?, 100.0, 200.0)", (json.dumps(V1_SNAPSHOT),),
    )
    db.execute(
        "INSERT INTO events (run_id, seq, step, time, kind, prev_hash, hash) "
        "VALUES ('old', 0, 0, 100.0, 'start', ?, 'h0')", (GENESIS,),
    )
    db.close()


def test_a_version_1_database_migrates_and_keeps_its_runs(tmp_path: Path) -> None:
    path = str(tmp_path / "v1.db")
    _v1_database(path)
    store = SQLiteStore(path)
    assert store.schema_version == len(MIGRATIONS)
    cols = {r[1] for r in store.db.read("PRAGMA table_info(runs)")}
    assert {"lease_owner", "lease_at", "lease_until", "log_count", "log_head"} <= cols
    run = store.load_run("old")
    assert (run.version, run.schema_version, run.used.steps, run.used.cost_micros) == (7, 3, 4, 900)
    # The log head of a run logged before the head was kept is filled in from its log.
    assert store.log_head("old") == (1, "h0")
    store.acquire("old", "somebody:1:x", 300.0)
    after = store.commit(StepCommit(run=run, expected_version=7))
    assert after.version == 8
    stored = json.loads(store.db.read("SELECT snapshot FROM runs WHERE run_id = 'old'")[0][0])
    assert stored["schema_version"] == 3 and "steps_used" not in stored
    reopened = SQLiteStore(path)  # opening again migrates nothing twice
    assert reopened.schema_version == len(MIGRATIONS) and reopened.load_run("old").version == 8


# -- a trivial one-state workflow ---------------------------------------------------------------

class Fetch(BaseModel):
    i: int


def fetch(args: Fetch, ctx: Any) -> dict[str, Any]:
    """A read-only tool with a result of about 200 bytes."""
    return {"i": args.i, "text": "lorem ipsum dolor sit amet " * 6}


def loop(description: str = "Fetch item i.") -> WorkflowSpec:
    return define_workflow(
        "loop", transitions={"working": {}}, tools_by_state={"working": ["fetch"]},
        initial="working", terminal=set(), finish_states={"working"},
        tools=[ToolSpec("fetch", fetch, description, Fetch)],
    )


def counting(view: Any) -> Action:
    return Action(tool="fetch", args={"i": view.step})  # new args each step: no repeats


def _run(run_id: str) -> RunState:
    return RunState(run_id=run_id, workflow="loop", definition_hash="x" * 16, state="s")


def test_resuming_under_a_changed_definition_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    old = loop()
    run = Engine(old, SQLiteStore(path), counting, budgets=Budgets(max_steps=3)).start(
        "go", run_id="r1", drive=False)
    new = loop("Fetch item number i.")
    assert new.definition_hash != old.definition_hash
    engine = Engine(new, SQLiteStore(path), counting)
    with pytest.raises(DefinitionChanged) as info:
        engine.resume("r1")
    err = info.value
    assert (err.recorded, err.current) == (old.definition_hash, new.definition_hash)
    assert old.definition_hash in str(err) and new.definition_hash in str(err)
    assert "run 'r1'" in str(err)
    after = SQLiteStore(path)
    assert after.load_run("r1") == run and len(after.messages("r1")) == 1
    assert Engine(old, after, counting).resume("r1").used.steps == 3


# -- storage per step ---------------------------------------------------------------------------

def _bytes_per_step(tmp_path: Path, steps: int) -> float:
    path = tmp_path / f"steps{steps}.db"

    def size() -> int:
        """Bytes on disk (database and WAL after a checkpoint) less free pages; the
        ``-shm`` index holds no data."""
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        free *= db.execute("PRAGMA page_size").fetchone()[0]
        db.close()
        wal = path.with_name(path.name + "-wal")
        return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0) - free

    # Bytes written do not depend on the sync mode; OFF keeps the test fast.
    store = SQLiteStore(str(path), synchronous="OFF")
    engine = Engine(loop(), store, counting, budgets=Budgets(max_steps=steps))
    engine.start("go", run_id="r", drive=False)
    empty = size()
    run = engine.resume("r")
    assert (run.status, run.used.steps) == ("budget_exhausted", steps)
    assert audit(store, "r").ok
    store.close()
    return (size() - empty) / steps


def test_bytes_per_step_stay_flat_from_100_to_1000_steps(tmp_path: Path) -> None:
    short, long = _bytes_per_step(tmp_path, 100), _bytes_per_step(tmp_path, 1000)
    assert 300 < short < 5000, short  # a step's rows, not the whole transcript
    assert abs(long - short) / short < 0.25, (short, long)
