"""Damaging a database as someone with write access to it would: plain SQL on the SQLite
file or the PostgreSQL server, never through fsm. The ``any_db`` fixture gives a fresh
database of each kind, as the URL a command line takes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of each kind: a SQLite file's path, a PostgreSQL URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "runs.db")
    else:
        yield request.getfixturevalue("pg_url")


def is_postgres(url: str) -> bool:
    return url.startswith("postgresql://")


def execute(url: str, sql: str, args: tuple[Any, ...] = ()) -> int:
    """Run one statement (``?`` placeholders on either database); the rows it changed."""
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(sql.replace("?", "%s"), args).rowcount
    con = sqlite3.connect(url)
    try:
        with con:
            return con.execute(sql, args).rowcount
    finally:
        con.close()


def query(url: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(sql.replace("?", "%s"), args).fetchall()
    con = sqlite3.connect(url)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def refuse_writes(url: str, run_id: str) -> None:
    """Make the database refuse every new version of run ``run_id``'s row (a trigger), as
    a database that cannot write one row does; leases still change."""
    message = f"writes of run {run_id} are refused"
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse_run_write() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF OLD.run_id = '{run_id}' AND NEW.version <> OLD.version THEN "
                f"RAISE EXCEPTION '{message}'; END IF; RETURN NEW; END $$")
            conn.execute("CREATE TRIGGER refuse_run_write BEFORE UPDATE ON runs FOR EACH ROW "
                         "EXECUTE FUNCTION refuse_run_write()")
        return
    execute(url, f"CREATE TRIGGER refuse_run_write BEFORE UPDATE ON runs WHEN OLD.run_id = "
                 f"'{run_id}' AND NEW.version <> OLD.version BEGIN SELECT RAISE(ABORT, "
                 f"'{message}'); END")
