"""Every store keeps the definitions it sees, names each run's definition in its row, and
claims only runs of the definitions a worker asks for."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import storekit
from deploykit import v1, v2

from fsm import RunState, SQLiteStore, Store
from fsm.definition.versions import definition_record
from fsm.records import DefinitionCount, DefinitionRecord, StepCommit
from fsm.store import open_store
from fsm.store.pg_schema import MIGRATIONS as PG_MIGRATIONS
from fsm.store.schema import MIGRATIONS

store = storekit.store  # the fixture: each test on every kind of store

#: The schema version before the migration that keeps definitions (later migrations run
#: again after it, so they must leave what exists alone).
BEFORE_DEFINITIONS = next(i for i, m in enumerate(MIGRATIONS) if "CREATE TABLE definitions" in m)
PG_BEFORE_DEFINITIONS = next(i for i, m in enumerate(PG_MIGRATIONS)
                             if "CREATE TABLE definitions" in m)


def run(run_id: str, definition: str, status: str = "running",
        workflow: str = "refund") -> RunState:
    return RunState(run_id=run_id, workflow=workflow, definition_hash=definition,
                    state="collecting", status=status, created_at=1000.0, updated_at=1000.0)


def test_a_definition_is_kept_once_by_its_hash(store: Store) -> None:
    one, two = definition_record(v1(), 1.0), definition_record(v2(), 2.0)
    assert store.record_definition(one) is True
    assert store.record_definition(two) is True
    relabelled = one.model_copy(update={"version": "one", "recorded_at": 3.0})
    assert store.record_definition(relabelled) is False  # the first record stays
    assert store.definition(one.definition_hash) == one
    assert store.definition("0" * 16) is None
    assert store.definitions() == [one, two]  # in the order first seen
    assert store.definitions("refund") == [one, two] and store.definitions("other") == []


def test_a_second_store_on_the_same_database_sees_the_record(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    record = definition_record(v2(), 5.0)
    with SQLiteStore(path) as a, SQLiteStore(path) as b:
        assert a.record_definition(record) is True
        assert b.record_definition(record) is False
        assert b.definition(record.definition_hash) == record


def test_runs_are_counted_by_definition_and_status(store: Store) -> None:
    for r in (run("a", "h1"), run("b", "h1", "done"), run("c", "h2"), run("d", "h1"),
              run("e", "h3", workflow="other")):
        store.create_run(r)
    assert store.definition_counts("refund") == [
        DefinitionCount("refund", "h1", "done", 1, "b"),
        DefinitionCount("refund", "h1", "running", 2, "a"),
        DefinitionCount("refund", "h2", "running", 1, "c")]
    assert store.definition_counts(status="running")[0] == DefinitionCount(
        "other", "h3", "running", 1, "e")
    assert store.version_labels(["h1", "h1"]) == {"h1": "h1"}


def test_a_worker_claims_only_runs_of_its_definitions(store: Store) -> None:
    for r in (run("old1", "h1"), run("new1", "h2"), run("old2", "h1")):
        store.create_run(r)
    assert store.claim_runnable("w:1:a", 1000.0, 30.0, definitions=[]) == []
    got = store.claim_runnable("w:1:a", 1000.0, 30.0, definitions=["h1"], limit=10)
    assert sorted(c.run_id for c in got) == ["old1", "old2"]
    assert store.claim_runnable("w:1:a", 1000.0, 30.0, definitions=["h1"]) == []
    got = store.claim_runnable("w:2:b", 1000.0, 30.0, definitions=["h1", "h2"], limit=10)
    assert [c.run_id for c in got] == ["new1"]


def test_a_commit_that_moves_the_definition_moves_the_column(store: Store) -> None:
    created = store.create_run(run("m", "h1"))
    assert store.definition_column("m") == "h1"
    moved = created.model_copy(update={"definition_hash": "h2"})
    store.commit(StepCommit(run=moved, expected_version=created.version,
                            moves_definition=True))
    assert store.definition_column("m") == "h2"
    assert [c.run_id for c in store.claim_runnable("w:1:a", 1000.0, 30.0,
                                                   definitions=["h2"])] == ["m"]


def test_an_older_sqlite_database_gets_the_column_from_its_snapshots(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    with SQLiteStore(path) as s:
        s.create_run(run("before", "h0"))
    db = sqlite3.connect(path)  # as the schema before stores kept definitions left it
    db.executescript("DROP INDEX runs_definition; DROP TABLE definitions; "
                     "ALTER TABLE runs DROP COLUMN definition_hash; "
                     "DROP TABLE replies; DROP TABLE reply_tokens; "  # later migrations
                     "ALTER TABLE effects DROP COLUMN claim; "
                     "ALTER TABLE web_refusals DROP COLUMN hash; "
                     "ALTER TABLE runs DROP COLUMN refusal_count; "
                     "ALTER TABLE runs DROP COLUMN refusal_head; "
                     "DROP INDEX runs_parent; ALTER TABLE runs DROP COLUMN parent_run_id; "
                     "ALTER TABLE runs DROP COLUMN log_sig; "
                     f"PRAGMA user_version = {BEFORE_DEFINITIONS};")
    db.close()
    with SQLiteStore(path) as s:
        assert s.schema_version == len(MIGRATIONS)
        assert s.definition_column("before") == "h0"
        assert s.definitions() == []
        assert [c.run_id for c in s.claim_runnable("w:1:a", 1000.0, 30.0,
                                                   definitions=["h0"])] == ["before"]


def test_an_older_postgres_database_gets_the_column_from_its_snapshots(pg_url: str) -> None:
    import psycopg

    with open_store(pg_url) as s:
        s.create_run(run("before", "h0"))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE definitions; ALTER TABLE runs DROP COLUMN definition_hash; "
                     "DROP TABLE replies; DROP TABLE reply_tokens; "  # later migrations
                     "ALTER TABLE effects DROP COLUMN claim; "
                     "ALTER TABLE web_refusals DROP COLUMN hash; "
                     "ALTER TABLE runs DROP COLUMN refusal_count, DROP COLUMN refusal_head; "
                     "ALTER TABLE runs DROP COLUMN parent_run_id, DROP COLUMN log_sig; "
                     f"DELETE FROM fsm_schema WHERE version > {PG_BEFORE_DEFINITIONS}")
    with open_store(pg_url) as s:
        assert s.definition_column("before") == "h0"
        assert isinstance(s.definitions(), list) and s.definitions() == []


def test_a_record_reads_back_as_written(store: Store) -> None:
    record = DefinitionRecord(definition_hash="h9", workflow="w", version="9",
                              body={"name": "w", "text": "₹ and \u00e9", "n": [1, 2]},
                              recorded_at=7.0)
    store.record_definition(record)
    assert store.definition("h9") == record
