"""Commands that only read open the database read-only: nothing in it changes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fsm.store import SQLiteStore, StoreError

READERS = [
    pytest.param(["runs"], id="runs"),
    pytest.param(["history", "r"], id="history"),
    pytest.param(["show", "r"], id="show"),
    pytest.param(["audit", "r"], id="audit"),
    pytest.param(["approvals"], id="approvals"),
    pytest.param(["diagram", "refund", "--run", "r"], id="diagram-run"),
]


def fsm(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=60)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file in ``folder`` with its bytes and modification time."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def fsm_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("runs") / "runs.db"
    done = fsm(db, "run", "refund", "Order A-1002: dead", "--user", "ravi", "--run-id", "r")
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize("command", READERS)
def test_a_missing_database_is_an_error_not_a_new_file(tmp_path: Path,
                                                       command: list[str]) -> None:
    db = tmp_path / "nothing-here.db"
    proc = fsm(db, *command)
    assert proc.returncode == 1
    assert proc.stderr == f"error: no database at {str(db)!r} (give --db FILE or set FSM_DB)\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READERS)
def test_another_programs_database_is_refused_untouched(tmp_path: Path,
                                                        command: list[str]) -> None:
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    con.execute("INSERT INTO notes (text) VALUES ('keep me')")
    con.commit()
    con.close()
    before = snapshot(tmp_path)
    proc = fsm(other, *command)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {str(other)!r} is not an fsm database")
    assert snapshot(tmp_path) == before  # byte-identical, same mtime, no -wal or -shm


@pytest.mark.parametrize("command", READERS)
def test_reading_an_fsm_database_changes_nothing_in_it(fsm_db: Path,
                                                       command: list[str]) -> None:
    before = fsm_db.read_bytes(), fsm_db.stat().st_mtime_ns
    proc = fsm(fsm_db, *command)
    assert proc.returncode == 0, proc.stderr
    assert (fsm_db.read_bytes(), fsm_db.stat().st_mtime_ns) == before
    wal = fsm_db.with_name(fsm_db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_database_whose_folder_cannot_be_written_is_still_read(tmp_path: Path) -> None:
    """SQLite cannot create its shared-memory file next to the database, as in a folder
    that cannot be written (here the name points into a folder that does not exist, which
    fails the same way for root too); the store then reads the file as immutable, which
    is safe because no writer can work there either."""
    db = tmp_path / "runs.db"
    assert fsm(db, "run", "refund", "Order A-1001: kettle", "--user", "asha",
               "--run-id", "k").returncode == 0
    (tmp_path / "runs.db-shm").symlink_to(tmp_path / "no-such-folder" / "shm")
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            con.execute("SELECT COUNT(*) FROM runs")
        finally:
            con.close()
    before = db.read_bytes()
    listed = fsm(db, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"run_id": "k"' in listed.stdout
    assert fsm(db, "audit", "k").returncode == 0
    assert db.read_bytes() == before


def test_a_read_only_store_refuses_to_write(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with SQLiteStore(str(db)):
        pass
    with SQLiteStore(str(db), readonly=True) as store:
        assert store.list_runs() == []
        with pytest.raises(StoreError, match="opened read-only"):
            store.release("r", "me")


def test_writing_commands_still_create_a_new_database(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    assert fsm(db, "sweep").returncode == 0
    with SQLiteStore(str(db), readonly=True) as store:
        assert store.schema_version >= 3
