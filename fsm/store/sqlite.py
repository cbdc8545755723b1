"""The SQLite store: one file, WAL, ``BEGIN IMMEDIATE``, one transaction per step.

Tables: ``runs`` (a small snapshot per run, with its version and lease), ``messages``
(the transcript, one row per message), ``views`` (what the model saw, per step),
``events`` (the hash-chained log), ``effects`` (write intents and results),
``approvals`` and ``artifacts``. Nothing grows with the length of a run except by
appending its own rows.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import urllib.parse
from types import TracebackType
from typing import Any

from fsm.errors import StoreError, StoreUnavailable, is_transient
from fsm.signing import for_database, verify_keys
from fsm.store._dialect import SQLITE
from fsm.store._statements import SIGNED_RUN
from fsm.store.database import Database
from fsm.store.schema import MIGRATIONS
from fsm.store.sql import SQLStore


class SQLiteDatabase(Database):
    """One SQLite file: one connection, WAL, ``BEGIN IMMEDIATE`` under a lock, the
    schema's migrations and the signing key (the arguments: see :class:`SQLiteStore`)."""

    dialect = SQLITE

    def __init__(self, path: str, *, synchronous: str = "FULL",
                 busy_timeout_ms: int = 10_000, readonly: bool = False,
                 adopt: bool = True, key_file: str | None = None) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        super().__init__()
        self.path = path
        self.location = path
        self.readonly = readonly
        #: Seconds a statement waits for another connection's lock (the busy timeout).
        self.busy_seconds = busy_timeout_ms / 1000
        self.lock = threading.RLock()
        name = os.fspath(path)
        in_memory = name in ("", ":memory:") or name.startswith("file::memory:")
        key_path = None if in_memory else (key_file or f"{name}.key")
        if readonly:
            self.connection = _open_readonly(path, busy_timeout_ms)
            self.keys = verify_keys(key_path)
            return
        try:
            self.connection = sqlite3.connect(path, timeout=busy_timeout_ms / 1000,
                                              isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {path!r}: {exc}") from None
        try:
            self.connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Before anything changes the file: another program's database is left as it is.
            _refuse_foreign(self.connection, path, adopt)
            self.connection.execute("PRAGMA journal_mode = WAL")
            self.connection.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._migrate()
            self.keys = for_database(key_path, signed=self._signed(), where=repr(path))
        except sqlite3.Error as exc:
            self.connection.close()
            raise _failed(f"cannot open database {path!r}", exc, self.busy_seconds,
                          path=path) from None
        except UnicodeDecodeError as exc:
            self.connection.close()
            raise StoreError(f"cannot open database {path!r}: {_garbled(exc)}") from None
        except BaseException:
            self.connection.close()
            raise

    # -- plumbing -------------------------------------------------------------------

    def tx(self) -> _Transaction:
        """``with self.tx() as db``: one ``BEGIN IMMEDIATE`` … ``COMMIT`` under the
        store's lock; any failure rolls back, and SQLite's errors become ``StoreError``."""
        return _Transaction(self)

    def rollback(self) -> None:
        """Roll back what is still open: SQLite itself ends a transaction a full disk or
        an I/O error broke, and a second ROLLBACK would fail."""
        if self.connection.in_transaction:
            try:
                self.connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._rows(sql, args, False)

    def column(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        return self._rows(sql, args, True)

    def _rows(self, sql: str, args: tuple[Any, ...], first: bool) -> list[Any]:
        with self.lock:
            try:
                cur = self.connection.execute(sql, args)
                # A resumed run reads every message: iterating the cursor for one column
                # costs half as much as its rows fetched whole.
                return [v for (v,) in cur] if first else cur.fetchall()
            except sqlite3.Error as exc:
                if str(exc).startswith(_NOT_UTF8):
                    raise self._not_utf8(sql, str(exc)) from None
                raise _failed(f"database {self.path!r}", exc, self.busy_seconds) from None
            except UnicodeDecodeError as exc:
                raise StoreError(f"database {self.path!r}: {_garbled(exc)}") from None
            except OverflowError:
                raise StoreError(f"database {self.path!r}: a number in the query is too large "
                                 f"(at most {2**63 - 1})") from None

    def where(self) -> str:
        return repr(self.path)

    def _not_utf8(self, sql: str, message: str) -> StoreError:
        """A text value that is not UTF-8 (a damaged file): which table, column and runs,
        without the value itself (it may be long, and it is not text)."""
        table = re.search(r"\bFROM\s+(\w+)", sql)
        column = re.match(re.escape(_NOT_UTF8) + r" column '(\w+)'", message)
        if table is None or column is None:
            return StoreError(f"database {self.path!r}: a text value is not valid UTF-8 (the "
                              "file is damaged); restore the database from a backup")
        runs = self._not_utf8_runs(table.group(1), column.group(1))
        whose = f"run {runs[0]!r}" if len(runs) == 1 else \
            f"runs {', '.join(map(repr, runs[:5]))}" + (" …" if len(runs) > 5 else "") \
            if runs else "a run"
        return StoreError(
            f"database {self.path!r}: a row of {whose} in table {table.group(1)!r} is damaged "
            f"and cannot be read (its {column.group(1)!r} is not valid UTF-8 text); restore "
            "the database from a backup, or inspect it with fsm audit")

    def _not_utf8_runs(self, table: str, column: str) -> list[str]:
        try:
            rows = self.connection.execute(
                f"SELECT CAST(run_id AS BLOB), CAST({column} AS BLOB) FROM {table}").fetchall()
        except sqlite3.Error:
            return []
        bad = []
        for run_id, value in rows:
            try:
                if value is not None:
                    value.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(run_id.decode("utf-8", "replace"))
        return sorted(set(bad))

    def _migrate(self) -> None:
        current = self.connection.execute("PRAGMA user_version").fetchone()[0]
        if current > len(MIGRATIONS):
            raise StoreError(
                f"database {self.path!r} has schema version {current}, newer than this fsm "
                f"understands ({len(MIGRATIONS)}); upgrade fsm to open it"
            )
        for version, script in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            with self.tx() as db:
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {version}")

    def _signed(self) -> str | None:
        """The signature of one signed run of the database (``None``: none is signed)."""
        row = self.connection.execute(SIGNED_RUN).fetchone()
        return None if row is None else str(row[0])

    @property
    def schema_version(self) -> int:
        return int(self.read("PRAGMA user_version")[0][0])

    def close(self) -> None:
        with self.lock:
            self.connection.close()

    def serial(self) -> threading.RLock:
        return self.lock


class SQLiteStore(SQLStore):
    """A durable store in one SQLite file.

    ``readonly`` opens an existing fsm database and changes nothing in it. ``adopt=False``
    refuses a file that already holds other tables but no fsm schema, before anything in
    it changes (the command line opens files so); a file with another program's schema
    version is always refused.

    ``key_file`` holds the key that signs the log's heads (:mod:`fsm.signing`); default:
    the file's path with ``.key`` added, made (owner-only) while the database holds no
    signed run. A database that holds signed runs and whose key file is missing is
    refused. A database in memory (``:memory:``) has its key in memory.
    """

    db: SQLiteDatabase

    def __init__(self, path: str, *, synchronous: str = "FULL",
                 busy_timeout_ms: int = 10_000, readonly: bool = False,
                 adopt: bool = True, key_file: str | None = None) -> None:
        super().__init__(SQLiteDatabase(path, synchronous=synchronous,
                                        busy_timeout_ms=busy_timeout_ms, readonly=readonly,
                                        adopt=adopt, key_file=key_file))

    @property
    def path(self) -> str:
        return self.db.path

    @property
    def busy_seconds(self) -> float:
        """Seconds a statement waits for another connection's lock (the busy timeout)."""
        return self.db.busy_seconds


#: How Python's sqlite3 begins the error of a text value that is not UTF-8.
_NOT_UTF8 = "Could not decode to UTF-8"


def _refuse_foreign(db: sqlite3.Connection, path: str, adopt: bool) -> None:
    """Refuse a database of another program: it has tables, but not fsm's schema. With
    ``adopt``, fsm adds its schema to a file whose tables carry no schema version (an
    application sharing its database with fsm on purpose)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = sorted(r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"))
    if version == 0 and (adopt or not tables):
        return  # a new (or empty, or shared) file: fsm creates its schema in it
    if version == 0 or not {"runs", "events"} <= set(tables):
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise StoreError(
            f"{path!r} is not an fsm database (it has no fsm tables"
            + (f", but tables of another program: {shown}" if tables else "")
            + "); give the --db file your runs are in, or the name of a new file")


def _garbled(exc: UnicodeDecodeError) -> str:
    """SQLite reported an error whose text is not even UTF-8: the file is damaged."""
    shown = exc.object[:80].decode("utf-8", "backslashreplace") \
        if isinstance(exc.object, bytes) else ""
    return (f"the database file is damaged (SQLite says: {shown}); restore it from a "
            "backup")


def _failed(prefix: str, exc: sqlite3.Error, wait: float, tail: str = "", *,
            path: str | None = None, plain: bool = False) -> StoreError:
    """SQLite's error as one line: :class:`StoreUnavailable` when another connection held
    the database for longer than the busy timeout (what it waited for, and how long)."""
    if is_transient(exc):
        return StoreUnavailable(f"{prefix}: waited {wait:g}s for another process's lock on "
                                f"the database ({exc}){tail}; try again")
    return StoreError(f"{prefix}: {exc if plain else _what(exc, path)}{tail}")


def _what(exc: sqlite3.Error, path: str | None = None) -> str:
    """SQLite's message, with what to do about the common ones."""
    text = str(exc)
    code = getattr(exc, "sqlite_errorname", "")
    if path is not None and code == "SQLITE_CANTOPEN" and _read_only_place(path):
        return f"{text} (the file or its folder is read-only: a read-only mount?)"
    if code == "SQLITE_FULL" or "database or disk is full" in text:
        return f"{text} (free some disk space, then resume the run)"
    if code.startswith("SQLITE_IOERR"):
        return f"{text} (is the disk full or failing?)"
    if code.startswith("SQLITE_READONLY") or "readonly database" in text:
        return f"{text} (the file or its folder cannot be written)"
    return text


def _read_only_place(path: str) -> bool:
    folder = os.path.dirname(os.path.abspath(path))
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY) or not os.access(folder, os.W_OK)
    except OSError:
        return False


def _uri(path: str, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{query}"


def _open_readonly(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open an existing fsm database for reading only: nothing in the file changes.

    A folder that cannot be written has no room for SQLite's shared-memory file; no
    writer can be working there either, so the file is then read as immutable.
    """
    if not os.path.isfile(path):
        raise StoreError(f"no database at {path!r} (give --db FILE or set FSM_DB)")
    db = None
    try:
        try:
            db = sqlite3.connect(_uri(path, mode="ro"), uri=True, check_same_thread=False,
                                 timeout=busy_timeout_ms / 1000, isolation_level=None)
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.OperationalError:
            if db is not None:
                db.close()
            db = sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True,
                                 check_same_thread=False, isolation_level=None)
            version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        if db is not None:
            db.close()
        raise StoreError(f"cannot read database {path!r}: {_what(exc)}") from None
    except UnicodeDecodeError as exc:
        if db is not None:
            db.close()
        raise StoreError(f"cannot read database {path!r}: {_garbled(exc)}") from None
    problem = _not_ours(path, version, tables)
    if problem is not None:
        db.close()
        raise StoreError(problem)
    return db


def _not_ours(path: str, version: int, tables: set[str]) -> str | None:
    if version == 0 or "runs" not in tables or "events" not in tables:
        return (f"{path!r} is not an fsm database (it has no fsm tables); "
                "give the --db file your runs are in")
    if version > len(MIGRATIONS):
        return (f"database {path!r} has schema version {version}, newer than this fsm "
                f"understands ({len(MIGRATIONS)}); upgrade fsm to read it")
    if version < len(MIGRATIONS):
        return (f"database {path!r} has the older schema version {version} (this fsm uses "
                f"{len(MIGRATIONS)}); a command that writes, e.g. fsm sweep, upgrades it")
    return None


class _Transaction:
    """A write transaction of a :class:`SQLiteDatabase` (a class, not a generator: every
    step commits through one, and a generator's context manager costs more than the
    transaction's own ``BEGIN``)."""

    __slots__ = ("store",)

    def __init__(self, store: SQLiteDatabase) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self.store
        store.lock.acquire()
        try:
            if store.readonly:
                raise StoreError(f"database {store.path!r} was opened read-only")
            try:
                store.connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _failed(f"database {store.path!r}", exc, store.busy_seconds,
                              plain=True) from None
        except BaseException:
            store.lock.release()
            raise
        return store.connection

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        store = self.store
        try:
            if kind is None:
                try:
                    store.connection.execute("COMMIT")
                    return
                except BaseException as failed:
                    exc = failed
            store.rollback()
            if isinstance(exc, UnicodeDecodeError):
                raise StoreError(f"database {store.path!r}: {_garbled(exc)}; nothing of this "
                                 "write was saved") from None
            if isinstance(exc, sqlite3.Error):
                raise _failed(f"database {store.path!r}", exc, store.busy_seconds,
                              "; nothing of this write was saved") from None
            if isinstance(exc, OverflowError | ValueError):
                # A value SQLite cannot hold (an integer beyond 64 bits, a NUL in text).
                raise StoreError(f"database {store.path!r}: a value cannot be stored "
                                 f"({exc}); nothing of this write was saved") from None
            if exc is not None and kind is None:
                raise exc
        finally:
            store.lock.release()
