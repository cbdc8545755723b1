"""The databases a command is pointed at: another program's file is refused untouched, a
reader never creates or migrates a schema, damage is one line that names what is damaged."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_inproc import HEADPHONES, KETTLE, Cli, error_line

from fsm.cli import exits


def foreign(path: Path, version: int) -> None:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        con.execute("INSERT INTO notes (body) VALUES ('precious')")
        con.execute(f"PRAGMA user_version = {version}")
    con.close()


def pragmas(path: Path) -> tuple[str, int, list[str]]:
    con = sqlite3.connect(path)
    try:
        return (con.execute("PRAGMA journal_mode").fetchone()[0],
                con.execute("PRAGMA user_version").fetchone()[0],
                [r[0] for r in con.execute("SELECT name FROM sqlite_master ORDER BY name")])
    finally:
        con.close()


@pytest.mark.parametrize("version", [0, 3, 9])
def test_a_writer_refuses_another_programs_sqlite_file_untouched(cli: Cli, tmp_path: Path,
                                                                 version: int) -> None:
    db = tmp_path / "app.db"
    foreign(db, version)
    before = db.read_bytes()
    line = error_line(cli("run", "refund", KETTLE, "--user", "asha", "--db", str(db)),
                      exits.ERROR)
    assert line == (f"error: {str(db)!r} is not an fsm database (it has no fsm tables, but "
                    "tables of another program: notes); give the --db file your runs are in, "
                    "or the name of a new file")
    assert pragmas(db) == ("delete", version, ["notes"])
    assert db.read_bytes() == before


def test_a_newer_fsm_database_asks_for_an_upgrade(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    assert cli("run", "refund", KETTLE, "--user", "asha", "--db", str(db)).code == 0
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA user_version = 99")
    con.close()
    error_line(cli("run", "refund", KETTLE, "--user", "asha", "--db", str(db)), exits.ERROR,
               "has schema version 99, newer than this fsm understands", "upgrade fsm")


def test_a_schema_whose_damage_sqlite_cannot_even_spell_is_one_line(cli: Cli,
                                                                    tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    assert cli("submit", "refund", KETTLE, "--run-id", "r1", "--db", str(db)).code == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = DELETE")  # every page in the file itself
    con.close()
    data = bytearray(db.read_bytes())
    at = data.find(b"tableviewsviews")
    assert at > 0
    data[at + 5] = 0xFF  # SQLite's message about the schema now holds that byte
    db.write_bytes(bytes(data))
    for args in (["runs"], ["audit", "r1"], ["run", "refund", KETTLE]):
        error_line(cli(*args, "--db", str(db)), exits.ERROR, "the database file is damaged",
                   "malformed database schema", "restore it from a backup")


@pytest.mark.parametrize("sql, table, column", [
    pytest.param("UPDATE runs SET snapshot = CAST(x'7bff7d' AS TEXT) WHERE run_id = 'w'",
                 "runs", "snapshot", id="snapshot"),
    pytest.param("UPDATE events SET detail = CAST(x'7bff7d' AS TEXT) WHERE run_id = 'w' "
                 "AND seq = 2", "events", "detail", id="event"),
])
def test_a_value_that_is_not_utf8_names_its_run_and_table_not_its_text(
        cli: Cli, tmp_path: Path, sql: str, table: str, column: str) -> None:
    db = tmp_path / "u.db"
    assert cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "w",
               "--db", str(db)).code == 0
    with sqlite3.connect(db) as con:
        con.execute(sql)
    con.close()
    line = error_line(cli("history", "w", "--db", str(db)), exits.ERROR)
    assert line == (f"error: database {str(db)!r}: a row of run 'w' in table {table!r} is "
                    f"damaged and cannot be read (its {column!r} is not valid UTF-8 text); "
                    "restore the database from a backup, or inspect it with fsm audit")


def _tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = "
                            "current_schema()").fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize("args", [["runs"], ["approvals"], ["history", "x"], ["show", "x"],
                                  ["audit", "x"], ["worker", "--stats"]])
def test_a_reader_never_creates_the_schema_in_postgresql(cli: Cli, pg_url: str,
                                                         args: list[str]) -> None:
    error_line(cli(*args, "--db", pg_url), exits.ERROR, "is not an fsm database "
               "(it has no fsm tables); give the --db database your runs are in")
    assert _tables(pg_url) == []


def test_a_reader_reads_a_postgresql_fsm_database(cli: Cli, pg_url: str) -> None:
    assert cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "r1",
               "--db", pg_url).code == 0
    listed = cli("runs", "--db", pg_url)
    assert listed.code == 0 and "r1" in listed.out
    assert cli("audit", "r1", "--db", pg_url).code == 0


@pytest.mark.parametrize("command", [["runs"], ["run", "refund", KETTLE]])
def test_a_postgresql_url_that_names_no_database_is_refused(cli: Cli,
                                                            command: list[str]) -> None:
    error_line(cli(*command, "--db", "postgresql://"), exits.ERROR,
               "database URL postgresql:// names no database: use "
               "postgresql://user@host/dbname")


def test_an_unreachable_postgresql_is_one_line(cli: Cli) -> None:
    error_line(cli("runs", "--db", "postgresql://nobody@127.0.0.1:1/x?connect_timeout=2"),
               exits.ERROR, "cannot open database", "Connection refused")
