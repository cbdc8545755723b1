"""The retail tables on SQLite and PostgreSQL, each on a connection of its own.

One row per document (JSON text, money in cents); the users' lookup columns (email, name,
zip) kept beside their document; ``retail_writes`` recording each write under its
idempotency key in the write's own transaction. The first process that opens the tables
fills them from its data (the pinned ``db.json`` unless it is given another database of the
schema, :mod:`workflows.retail.data`) and records which; opening them with other data is
refused in one line.

Their sessions wait no longer than fsm's own: SQLite for ``FSM_SQLITE_BUSY_TIMEOUT``
seconds; every PostgreSQL session with the statement, lock and idle-in-transaction
timeouts of :class:`fsm.store.pg_session.Timeouts` (``FSM_PG_*_TIMEOUT``), the lock
timeout bounding the wait for the advisory lock that creating, filling and resetting the
tables take. A wait that runs out, or a database that fails for now, is
:class:`fsm.errors.StoreUnavailable`, in one line that says what was waited for.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fsm.errors import StoreError, StoreUnavailable, Unavailable, is_transient
from fsm.settings import Settings
from fsm.store.pg_session import Timeouts, failure, session_kwargs
from workflows.retail.base import RetailDatabase, doc_text, initial_rows, user_keys
from workflows.retail.data import DataInvalid, RetailData, pinned
from workflows.retail.shapes import Doc

_TABLES = """
CREATE TABLE IF NOT EXISTS retail_products (
    product_id TEXT PRIMARY KEY, position INTEGER NOT NULL, name TEXT NOT NULL,
    doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS retail_items (
    item_id TEXT PRIMARY KEY, product_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS retail_users (
    user_id TEXT PRIMARY KEY, position INTEGER NOT NULL, email TEXT NOT NULL,
    first_name TEXT NOT NULL, last_name TEXT NOT NULL, zip TEXT NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS retail_users_email ON retail_users (email);
CREATE INDEX IF NOT EXISTS retail_users_name ON retail_users (last_name, first_name, zip);
CREATE TABLE IF NOT EXISTS retail_orders (
    order_id TEXT PRIMARY KEY, position INTEGER NOT NULL, user_id TEXT NOT NULL,
    doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS retail_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_SQLITE_WRITES = """
CREATE TABLE IF NOT EXISTS retail_writes (
    n INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, tool TEXT NOT NULL,
    args TEXT NOT NULL, result TEXT NOT NULL, at REAL NOT NULL);
"""
_PG_WRITES = """
CREATE TABLE IF NOT EXISTS retail_writes (
    n BIGSERIAL PRIMARY KEY, key TEXT NOT NULL UNIQUE, tool TEXT NOT NULL,
    args TEXT NOT NULL, result TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
"""
_INSERTS = (
    "INSERT INTO retail_products VALUES (?, ?, ?, ?)",
    "INSERT INTO retail_items VALUES (?, ?)",
    "INSERT INTO retail_users VALUES (?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO retail_orders VALUES (?, ?, ?, ?)",
)
_TRUNCATE = ("retail_writes", "retail_orders", "retail_users", "retail_items",
             "retail_products", "retail_meta")


class _SQLTx:
    """A transaction over one DB-API connection; ``mark`` is the dialect's placeholder."""

    def __init__(self, conn: Any, mark: str, lock: str = "") -> None:
        self.conn = conn
        self.mark = mark
        #: Appended to reads of rows a write will change (``FOR UPDATE`` on PostgreSQL).
        self.lock = lock

    def _one(self, sql: str, *args: Any) -> Any:
        row = self.conn.execute(sql.replace("?", self.mark), args).fetchone()
        return None if row is None else row[0]

    def _doc(self, sql: str, *args: Any) -> Doc | None:
        text = self._one(sql + self.lock, *args)
        return None if text is None else json.loads(text)

    def user(self, user_id: str) -> Doc | None:
        return self._doc("SELECT doc FROM retail_users WHERE user_id = ?", user_id)

    def order(self, order_id: str) -> Doc | None:
        return self._doc("SELECT doc FROM retail_orders WHERE order_id = ?", order_id)

    def product(self, product_id: str) -> Doc | None:
        text = self._one("SELECT doc FROM retail_products WHERE product_id = ?", product_id)
        return None if text is None else json.loads(text)

    def product_names(self) -> dict[str, str]:
        rows = self.conn.execute("SELECT name, product_id FROM retail_products "
                                 "ORDER BY position").fetchall()
        return {r[0]: r[1] for r in rows}

    def product_of_item(self, item_id: str) -> str | None:
        found: str | None = self._one("SELECT product_id FROM retail_items WHERE item_id = ?",
                                      item_id)
        return found

    def user_by_email(self, email: str) -> str | None:
        found: str | None = self._one(
            "SELECT user_id FROM retail_users WHERE email = ? ORDER BY position LIMIT 1",
            email.lower())
        return found

    def user_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str | None:
        found: str | None = self._one(
            "SELECT user_id FROM retail_users WHERE last_name = ? AND first_name = ? "
            "AND zip = ? ORDER BY position LIMIT 1", last_name.lower(), first_name.lower(), zip)
        return found

    def put_user(self, doc: Doc) -> None:
        sql = ("UPDATE retail_users SET email = ?, first_name = ?, last_name = ?, zip = ?, "
               "doc = ? WHERE user_id = ?")
        self.conn.execute(sql.replace("?", self.mark),
                          (*user_keys(doc), doc_text(doc), doc["user_id"]))

    def put_order(self, doc: Doc) -> None:
        self.conn.execute("UPDATE retail_orders SET doc = ? WHERE order_id = ?"
                          .replace("?", self.mark), (doc_text(doc), doc["order_id"]))


class _SQLRetail(RetailDatabase):
    """What the SQLite and PostgreSQL backends share: the SQL of records and dumps."""

    mark = "?"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.mark)

    def _unavailable(self, doing: str, exc: BaseException) -> StoreError:
        """``exc``, a failure of the database for now, in one line."""
        raise NotImplementedError

    @contextmanager
    def _reached(self, doing: str) -> Iterator[None]:
        """The database failing for now (a lock wait or a statement that ran out of time, a
        lost connection, a busy file) as :class:`StoreUnavailable`; anything else as it is."""
        try:
            yield
        except Exception as exc:
            if isinstance(exc, Unavailable) or not is_transient(exc):
                raise
            raise self._unavailable(doing, exc) from None

    def _recorded(self, tx: Any, key: str) -> Any:
        text = tx._one("SELECT result FROM retail_writes WHERE key = ?", key)
        return None if text is None else json.loads(text)

    def _record(self, tx: Any, key: str, tool: str, args: dict[str, Any],
                result: Any) -> None:
        tx.conn.execute(self._sql("INSERT INTO retail_writes (key, tool, args, result, at) "
                                  "VALUES (?, ?, ?, ?, ?)"),
                        (key, tool, doc_text(args), json.dumps(result), time.time()))

    def _documents(self, tx: Any) -> tuple[list[Doc], list[Doc], list[Doc]]:
        def docs(table: str) -> list[Doc]:
            rows = tx.conn.execute(f"SELECT doc FROM {table} ORDER BY position").fetchall()
            return [json.loads(r[0]) for r in rows]

        return docs("retail_products"), docs("retail_users"), docs("retail_orders")

    def _rows(self, tx: Any) -> dict[str, list[tuple[str, str]]]:
        def rows(table: str, key: str) -> list[tuple[str, str]]:
            return [(r[0], r[1]) for r in
                    tx.conn.execute(f"SELECT {key}, doc FROM retail_{table}").fetchall()]

        return {"products": rows("products", "product_id"), "users": rows("users", "user_id"),
                "orders": rows("orders", "order_id")}

    def _writes(self, tx: Any) -> list[dict[str, Any]]:
        rows = tx.conn.execute("SELECT key, tool, args, result FROM retail_writes "
                               "ORDER BY n").fetchall()
        return [{"key": r[0], "tool": r[1], "args": json.loads(r[2]),
                 "result": json.loads(r[3])} for r in rows]

    def _seed(self, conn: Any) -> None:
        """Fill the tables from :attr:`data`, once (the caller holds the write lock); tables
        filled from other data are refused."""
        cur = conn.execute("SELECT value FROM retail_meta WHERE name = 'data'").fetchone()
        if cur is not None:
            self._same_data(cur[0])
            return
        for sql, rows in zip(_INSERTS, initial_rows(self.data), strict=True):
            conn.cursor().executemany(self._sql(sql), rows)
        conn.execute(self._sql("INSERT INTO retail_meta VALUES ('data', ?)"),
                     (self.data.label,))

    def _same_data(self, recorded: str) -> None:
        """Refuse tables that record other data than :attr:`data` (by SHA-256)."""
        if recorded.rsplit(" ", 1)[-1] != self.data.sha256:
            raise DataInvalid(
                f"retail database {getattr(self, 'name', self.path)!r}: its tables were "
                f"filled from {recorded}, not from {self.data.label}; open them with that "
                f"data (FSM_RETAIL_DATA), or give this data a database of its own")


class SQLiteRetail(_SQLRetail):
    """The retail tables in a SQLite file, on a connection of their own.

    ``busy_timeout`` is the seconds a statement waits for another connection's write
    lock (default: ``FSM_SQLITE_BUSY_TIMEOUT``)."""

    def __init__(self, path: str, *, data: RetailData | None = None,
                 busy_timeout: float | None = None) -> None:
        self.path = path
        self.data = data or pinned()
        self.busy_timeout = Settings.load().sqlite_busy_timeout if busy_timeout is None \
            else busy_timeout
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=self.busy_timeout, isolation_level=None,
                                   check_same_thread=False)
        try:
            with self._reached("cannot open the tables"):
                if path != ":memory:":
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_TABLES + _SQLITE_WRITES)
            with self._transaction(write=True, doing="cannot open the tables") as tx:
                self._seed(tx.conn)
        except BaseException:
            self._db.close()
            raise

    def _unavailable(self, doing: str, exc: BaseException) -> StoreError:
        return StoreUnavailable(
            f"retail database {self.path!r}: {doing}: waited {self.busy_timeout:g}s for "
            f"another process's lock on the database ({exc}); try again")

    @contextmanager
    def _transaction(self, *, write: bool, doing: str = "") -> Iterator[_SQLTx]:
        with self._lock, self._reached(doing or ("write" if write else "read")):
            self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield _SQLTx(self._db, "?")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def reset(self) -> None:
        """Back to the data it was filled from: every write forgotten (for benchmarks and
        tests)."""
        with self._transaction(write=True, doing="reset") as tx:
            for table in _TRUNCATE:
                tx.conn.execute(f"DELETE FROM {table}")
            self._seed(tx.conn)

    def close(self) -> None:
        with self._lock:
            self._db.close()


#: Advisory lock key that serialises creating and filling the retail tables.
PG_LOCK = 0x52455441


class PostgresRetail(_SQLRetail):
    """The retail tables in a PostgreSQL database, on a small pool of their own.

    Every session has ``timeouts`` (default: from ``FSM_PG_*_TIMEOUT``, as fsm's own):
    opening or resetting the tables waits at most ``timeouts.lock`` for another process
    that holds their lock (it is creating, filling or resetting them)."""

    mark = "%s"

    def __init__(self, url: str, *, data: RetailData | None = None,
                 timeouts: Timeouts | None = None) -> None:
        import psycopg  # an optional extra: only a PostgreSQL database needs it
        from psycopg_pool import ConnectionPool

        from fsm.store.postgres import redact

        self.path = url
        self.name = redact(url)
        self.data = data or pinned()
        t = self.timeouts = timeouts or Timeouts.of(Settings.load())
        kwargs = session_kwargs(url, t, "fsm-retail")
        # A first connection of its own: a wrong URL fails here at once, with its reason.
        with self._reached("cannot open the tables"), psycopg.connect(
                url, connect_timeout=max(1, int(t.connect)), **kwargs) as conn:
            recorded = self._filled(conn)
            if recorded is not None:
                self._same_data(recorded)
            else:
                initial_rows(self.data)  # made before the lock: the transaction never idles
                with conn.transaction():
                    self._locked(conn)
                    conn.execute(_TABLES + _PG_WRITES)
                    self._seed(conn)
        self._pool = ConnectionPool(url, min_size=1, max_size=4, open=False, name="retail",
                                    kwargs=kwargs, check=ConnectionPool.check_connection,
                                    timeout=t.connect)
        try:
            with self._reached("cannot open the pool"):
                self._pool.open(wait=True, timeout=t.connect)
        except BaseException:
            self._pool.close()
            raise

    @staticmethod
    def _filled(conn: Any) -> str | None:
        """What the tables were filled from, when they are there and filled already (read
        without the lock); else ``None``."""
        found = conn.execute("SELECT to_regclass('retail_meta') IS NOT NULL").fetchone()
        if not (found and found[0]):
            return None
        row = conn.execute("SELECT value FROM retail_meta WHERE name = 'data'").fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _locked(conn: Any) -> None:
        """Take the tables' lock for this transaction. The session's ``lock_timeout``
        bounds the wait: another process holding it longer is an error, not a hang."""
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (PG_LOCK,))

    def _unavailable(self, doing: str, exc: BaseException) -> StoreError:
        return failure(f"retail database {self.name}: {doing}", exc, self.timeouts)

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[_SQLTx]:
        with self._reached("write" if write else "read"), self._pool.connection() as conn, \
                conn.transaction():
            # A write locks the rows it reads (order, then its user), so two writes to one
            # order, whichever workers run them, happen one after the other.
            yield _SQLTx(conn, "%s", " FOR UPDATE" if write else "")

    def reset(self) -> None:
        """Back to the data it was filled from: every write forgotten (for benchmarks and
        tests)."""
        initial_rows(self.data)
        with self._reached("reset"), self._pool.connection() as conn, conn.transaction():
            self._locked(conn)
            conn.execute("TRUNCATE " + ", ".join(_TRUNCATE))
            self._seed(conn)

    def close(self) -> None:
        self._pool.close()
