"""The retail database waits no longer than fsm's own sessions: every PostgreSQL session
has the statement, lock and idle-in-transaction timeouts of the settings, opening or
resetting the tables while another session holds their lock fails after the lock timeout
in one line, and SQLite waits the busy timeout of the settings. Nothing changes when it
fails."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fsm.errors import StoreUnavailable
from workflows.retail.base import initial_rows
from workflows.retail.database import PostgresRetail, SQLiteRetail
from workflows.retail.sql import PG_LOCK

ADDRESS = {"user_id": "noah_brown_6181", "address1": "1 Main", "address2": "",
           "city": "Austin", "state": "TX", "country": "USA", "zip": "73301"}


@pytest.fixture
def holder(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """Another session, which takes the retail tables' lock when told to."""
    initial_rows()  # made once beforehand, so that timings measure the waits only
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def hold(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SELECT pg_advisory_lock(%s)", (PG_LOCK,))


def release(conn: psycopg.Connection[Any]) -> None:
    assert conn.execute("SELECT pg_advisory_unlock(%s)", (PG_LOCK,)).fetchone() == (True,)


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("env, expected", [
    pytest.param({}, ("30s", "10s", "1min"), id="defaults"),
    pytest.param({"FSM_PG_STATEMENT_TIMEOUT": "5", "FSM_PG_LOCK_TIMEOUT": "0.25",
                  "FSM_PG_IDLE_TIMEOUT": "7"}, ("5s", "250ms", "7s"), id="from-the-settings"),
])
def test_every_retail_session_has_the_timeouts_of_the_settings(
        pg_url: str, monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
        expected: tuple[str, ...]) -> None:
    for name in ("FSM_PG_STATEMENT_TIMEOUT", "FSM_PG_LOCK_TIMEOUT", "FSM_PG_IDLE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with PostgresRetail(pg_url) as db:
        seen = set()
        for write in (False, True, False):  # the pool's sessions, reading and writing
            with db._transaction(write=write) as tx:
                seen.add(tx.conn.execute(
                    "SELECT current_setting('statement_timeout'), "
                    "current_setting('lock_timeout'), "
                    "current_setting('idle_in_transaction_session_timeout'), "
                    "current_setting('application_name')").fetchone())
    assert seen == {(*expected, "fsm-retail")}


def test_opening_while_another_session_holds_the_lock_fails_after_the_lock_timeout(
        pg_url: str, holder: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    monkeypatch.setenv("FSM_PG_LOCK_TIMEOUT", "0.5")
    hold(holder)
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        PostgresRetail(pg_url)
    took = time.monotonic() - t0
    assert took >= 0.5, took  # it waited for the lock (never past the test's timeout)
    assert one_line(info.value).startswith("retail database postgresql://")
    assert ": cannot open the tables: waited 0.5s for a lock another session holds " \
           "(lock_timeout); find the holder in pg_locks (" in str(info.value)
    assert str(info.value).endswith("; try again")
    # Nothing was created: the tables are made and filled in the locked transaction.
    assert holder.execute("SELECT to_regclass('retail_meta')").fetchone() == (None,)
    release(holder)
    with PostgresRetail(pg_url) as db:
        assert db.writes() == [] and len(db.dump()["orders"]) == 1000


def test_a_reset_while_another_session_holds_the_lock_fails_and_changes_nothing(
        pg_url: str, holder: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    monkeypatch.setenv("FSM_PG_LOCK_TIMEOUT", "0.5")
    with PostgresRetail(pg_url) as db:
        db.call("modify_user_address", ADDRESS, key="a:1")
        changed = db.hash()
        hold(holder)
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailable) as info:
            db.reset()
        took = time.monotonic() - t0
        assert took >= 0.5, took  # it waited for the lock (never past the test's timeout)
        assert ": reset: waited 0.5s for a lock another session holds (lock_timeout)" in \
            one_line(info.value)
        assert db.hash() == changed and [w["key"] for w in db.writes()] == ["a:1"]
        # Opening the filled tables takes no lock: another process still gets in.
        with PostgresRetail(pg_url) as other:
            assert other.hash() == changed
        release(holder)
        db.reset()
        assert db.writes() == [] and db.hash() != changed


def test_sqlite_waits_the_busy_timeout_of_the_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "runs.db")
    monkeypatch.setenv("FSM_SQLITE_BUSY_TIMEOUT", "0.3")
    with SQLiteRetail(path) as db:
        assert db.busy_timeout == 0.3
        db.call("modify_user_address", ADDRESS, key="a:1")
        changed = db.hash()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write lock
        try:
            for what, action in (("reset", db.reset),
                                 ("cannot open the tables", lambda: SQLiteRetail(path))):
                t0 = time.monotonic()
                with pytest.raises(StoreUnavailable) as info:
                    action()
                took = time.monotonic() - t0
                assert took >= 0.3, (what, took)  # it waited for the lock
                assert one_line(info.value) == (
                    f"retail database {path!r}: {what}: waited 0.3s for another process's "
                    "lock on the database (database is locked); try again")
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert db.hash() == changed and [w["key"] for w in db.writes()] == ["a:1"]
