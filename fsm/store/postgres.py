"""The PostgreSQL store: the same contract as SQLite, for many workers on many machines.

psycopg 3 with a connection pool; one transaction per step; the run row is locked
(``SELECT ... FOR UPDATE``) by every commit, effect claim and lease change, so the
fence (this writer still holds the lease, at this version) is checked in the same
transaction as the write. Runnable runs are claimed with ``FOR UPDATE SKIP LOCKED``;
a trigger ``NOTIFY``-es the workers when a run becomes runnable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import select
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from fsm._bridge import await_, bridged, entered
from fsm.errors import FSMError, StoreError, StoreUnavailable
from fsm.observability.faults import fault
from fsm.signing import default_key_file, for_database, verify_keys
from fsm.store._dialect import POSTGRES
from fsm.store._statements import DATABASE_IDENTITY, SIGNED_RUN, Write
from fsm.store.database import Database
from fsm.store.pg_schema import CHANNEL, MIGRATION_LOCK, MIGRATIONS, SWEEP_LOCK
from fsm.store.pg_session import Timeouts, failure, session_kwargs
from fsm.store.sql import SQLStore


def _line(exc: Exception) -> str:
    """libpq's message on one line (it puts a hint on a line of its own)."""
    return "; ".join(part.strip() for part in str(exc).splitlines() if part.strip()) or \
        type(exc).__name__


#: Seconds since a pooled connection last spoke with the server within which it is lent
#: again without asking the server, unless the server has said something on its socket.
FRESH_SECONDS = 2.0


class PooledConnection(psycopg.Connection[Any]):
    """A connection of a store's pool, and when it was last known to be alive (monotonic):
    opened, asked, or lent (its last statement ended before it came back to the pool)."""

    heard_at: float = float("-inf")


class PooledAsyncConnection(psycopg.AsyncConnection[Any]):
    """:class:`PooledConnection` for the async pool."""

    heard_at: float = float("-inf")


def _opened(conn: PooledConnection) -> None:
    conn.heard_at = time.monotonic()


async def _opened_async(conn: PooledAsyncConnection) -> None:
    conn.heard_at = time.monotonic()


def still_open(conn: PooledConnection) -> None:
    """The pool's check of a connection before it lends it: raises if the connection is
    gone, and asks the server (psycopg's own check, a round trip) only when it must.

    A connection opened or lent in the last :data:`FRESH_SECONDS` whose socket has nothing
    unread is lent as it is: it spoke with the server a moment ago, and a session the server
    ended since (``pg_terminate_backend``, a shutdown, a crash of its process) would have
    left its last message, or the end of the stream, on the socket. An idle connection of
    the pool is sent nothing else: it listens to no channel. Any other connection is
    asked, so that one whose server went without a word (a host lost, an address moved,
    an idle connection dropped by a firewall) is found dead here and replaced. A session
    ended after this check fails its next statement, as it would after the round trip."""
    if not _vouched_for(conn):
        ConnectionPool.check_connection(conn)
    conn.heard_at = time.monotonic()


async def still_open_async(conn: PooledAsyncConnection) -> None:
    """:func:`still_open` for the async pool."""
    if not _vouched_for(conn):
        await AsyncConnectionPool.check_connection(conn)
    conn.heard_at = time.monotonic()


def _vouched_for(conn: PooledConnection | PooledAsyncConnection) -> bool:
    """Whether ``conn`` may be lent without asking the server (raises if it is closed)."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    return time.monotonic() - conn.heard_at < FRESH_SECONDS and _quiet(conn)


def _quiet(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the connection's socket has nothing unread (False where the system has no
    ``poll()``, or the socket cannot be asked)."""
    if not hasattr(select, "poll"):
        return False
    try:
        ready = select.poll()
        ready.register(conn.pgconn.socket, select.POLLIN)
        return not ready.poll(0)
    except (OSError, psycopg.Error):
        return False


def _names_a_database(url: str, shown: str) -> None:
    """Refuse a URL that names no database (``postgresql://``): libpq would pick one."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise StoreError(f"database URL {shown} cannot be read: {_line(exc)}") from None
    if not str(params.get("dbname") or "").strip():
        raise StoreError(f"database URL {shown} names no database: use "
                         "postgresql://user@host/dbname")


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


#: Connections a store's pool opens at most, unless told otherwise.
DEFAULT_POOL = 10


class PostgresDatabase(Database):
    """A PostgreSQL database: a connection pool, one transaction per write, the schema's
    migrations under an advisory lock, ``LISTEN`` for runnable runs, the sweep's lock and
    the signing key (the arguments: see :class:`PostgresStore`)."""

    dialect = POSTGRES

    def __init__(self, url: str, *, pool_size: int | None = None,
                 application_name: str | None = None, connect_timeout: float | None = None,
                 readonly: bool = False, timeouts: Timeouts | None = None,
                 key_file: str | None = None) -> None:
        super().__init__()
        self.url = url
        self.location = url
        self.name = redact(url)
        self.readonly = readonly
        _names_a_database(url, self.name)
        size = pool_size or DEFAULT_POOL
        self.pool_size = size
        t = timeouts or Timeouts()
        if connect_timeout is not None:
            t = dataclasses.replace(t, connect=connect_timeout)
        self.timeouts = t
        # Named after the process, so an operator (or a test) can find its sessions.
        self._app = application_name or f"fsm-{os.getpid()}"
        self._kwargs = session_kwargs(url, t, self._app)
        if readonly:
            # Every transaction of a reader is read only: the server refuses any write.
            self._kwargs["options"] = (f"{self._kwargs['options']} "
                                       "-c default_transaction_read_only=on").strip()
            self._check_schema()
        else:
            self._migrate()
        #: The async pools opened for event loops (:meth:`open_async`).
        #: loop → its async pool (:meth:`open_async`)
        self._async_pools: dict[asyncio.AbstractEventLoop, _AsyncPool] = {}
        self.pool = ConnectionPool(
            url, connection_class=PooledConnection, min_size=1, max_size=size,
            kwargs=self._kwargs, open=False, name="fsm", configure=_opened, check=still_open,
            timeout=t.connect,
        )
        try:
            self.pool.open(wait=True, timeout=t.connect)
        except psycopg.Error as exc:
            self.pool.close()
            raise failure(f"cannot open database {self.name}", self._refusal(exc), t) from None
        try:
            key_path = key_file or default_key_file(
                "/".join(str(v) for v in next(iter(self.read(DATABASE_IDENTITY)))))
            signed = None if readonly else next((str(r[0]) for r in self.read(SIGNED_RUN)),
                                                None)
            self.keys = verify_keys(key_path) if readonly else \
                for_database(key_path, signed=signed, where=self.name)
        except BaseException:
            self.pool.close()
            raise

    # -- plumbing -------------------------------------------------------------------

    def _connect(self, **settings: float) -> psycopg.Connection[Any]:
        """A session of its own (not the pool's), with ``settings`` (seconds) too."""
        kwargs = session_kwargs(self.url, self.timeouts, self._app, **settings) \
            if settings else self._kwargs
        try:
            return psycopg.connect(self.url, connect_timeout=max(1, int(self.timeouts.connect)),
                                   **kwargs)
        except psycopg.Error as exc:
            raise failure(f"cannot open database {self.name}", exc, self.timeouts) from None

    def _refusal(self, exc: psycopg.Error) -> psycopg.Error:
        """Why a pool could not open. A pool that timed out says only that it waited, so
        one connection of its own asks the server, whose refusal says why (too many
        connections for the role, no such database); ``exc`` if the server lets it in."""
        if not isinstance(exc, PoolTimeout):
            return exc
        try:
            # Briefly: a server that does not answer at all has been waited for already.
            psycopg.connect(self.url, connect_timeout=max(1, min(3, int(self.timeouts.connect))),
                            **self._kwargs).close()
        except psycopg.Error as refused:
            return refused
        return exc

    def _check_schema(self) -> None:
        """For a reader: the database has fsm's schema, at this fsm's version; nothing in
        it changes (a reader never creates or migrates the schema)."""
        with self._connect() as conn:
            current = self._schema_version(conn, "cannot read database")
        if current == 0:
            raise StoreError(f"database {self.name} is not an fsm database (it has no fsm "
                             "tables); give the --db database your runs are in")
        if current > len(MIGRATIONS):
            raise StoreError(f"database {self.name} has schema version {current}, newer than "
                             f"this fsm understands ({len(MIGRATIONS)}); upgrade fsm to read it")
        if current < len(MIGRATIONS):
            raise StoreError(f"database {self.name} has the older schema version {current} "
                             f"(this fsm uses {len(MIGRATIONS)}); a command that writes, e.g. "
                             "fsm sweep, upgrades it")

    def _schema_version(self, conn: psycopg.Connection[Any], doing: str) -> int:
        """The schema version ``fsm_schema`` records (0: none), read without a lock."""
        try:
            found = conn.execute("SELECT to_regclass('fsm_schema') IS NOT NULL").fetchone()
            row = conn.execute("SELECT max(version) FROM fsm_schema").fetchone() \
                if found and found[0] else None
        except psycopg.Error as exc:
            raise failure(f"{doing} {self.name}", exc, self.timeouts) from None
        return int((row[0] if row else None) or 0)

    def _migrate(self) -> None:
        """Bring the schema up to date. A database already at this version takes no lock;
        a migration waits at most ``timeouts.migration`` for another one, and the server
        ends a migrating session that idles half that long (a frozen process's)."""
        t = self.timeouts
        # A migration's statements may take long (an index on a large table); its waits
        # and its idling may not.
        with self._connect(idle_in_transaction_session_timeout=t.migration / 2,
                           statement_timeout=0) as conn:
            current = self._schema_version(conn, "cannot open database")
            if current == len(MIGRATIONS):
                return
            try:
                with conn.transaction():
                    conn.execute(f"SET LOCAL lock_timeout = {int(t.migration * 1000)}")
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    fault("migration_locked", 0)
                    conn.execute("CREATE TABLE IF NOT EXISTS fsm_schema (version INTEGER NOT NULL)")
                    row = conn.execute("SELECT max(version) FROM fsm_schema").fetchone()
                    self._run_migrations((row[0] if row else None) or 0, conn)
            except psycopg.Error as exc:
                if type(exc).__name__ == "LockNotAvailable":
                    raise StoreUnavailable(
                        f"database {self.name}: waited {t.migration:g}s for the schema "
                        "migration lock, which another fsm process holds (it may be frozen: "
                        "its session ends once idle; find it in pg_locks); try again") from None
                raise failure(f"database {self.name}: migration failed", exc, t) from None

    def _run_migrations(self, current: int, conn: psycopg.Connection[Any]) -> None:
        if current > len(MIGRATIONS):
            raise StoreError(
                f"database {self.name} has schema version {current}, newer than "
                f"this fsm understands ({len(MIGRATIONS)}); upgrade fsm to open it")
        for version, script in enumerate(MIGRATIONS, start=1):
            if version > current:
                conn.execute(script)
                conn.execute("INSERT INTO fsm_schema VALUES (%s)", (version,))

    @contextmanager
    def tx(self) -> Iterator[Any]:
        lender = self._async_pool()
        try:
            if lender is None:
                with self.pool.connection() as conn, conn.transaction():
                    yield conn
            else:
                with entered(lender.connection()) as aconn, entered(aconn.transaction()):
                    yield _Session(aconn)
        except psycopg.Error as exc:
            raise failure(f"database {self.name}", exc, self.timeouts) from None

    def where(self) -> str:
        return self.name

    def read(self, sql: str, args: tuple[Any, ...] = ()) -> Sequence[Any]:
        lender = self._async_pool()
        try:
            if lender is None:
                with self.pool.connection() as conn:
                    return conn.execute(sql, args).fetchall()
            with entered(lender.connection()) as aconn:
                return await_(_fetched(aconn, sql, args))
        except psycopg.Error as exc:
            raise failure(f"database {self.name}", exc, self.timeouts) from None

    # -- the async pool -------------------------------------------------------------------

    def _async_pool(self) -> AsyncConnectionPool[Any] | None:
        """The async pool code in a bridged greenlet uses (None: the synchronous pool)."""
        if not self._async_pools or not bridged():
            return None
        opened = self._async_pools.get(asyncio.get_running_loop())
        return opened.pool if opened is not None else None

    async def open_async(self) -> bool:
        """An async pool for the running loop (psycopg's, as large as the synchronous
        one, with the same check): code of this process in a bridged greenlet on the loop
        then reaches the database through it, without a thread. Each call is matched by
        one :meth:`close_async`; the last closes the pool."""
        loop = asyncio.get_running_loop()
        opened = self._async_pools.get(loop)
        if opened is not None:
            opened.users += 1
            return True
        t = self.timeouts
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.url, connection_class=PooledAsyncConnection, min_size=1,
            max_size=self.pool_size, kwargs=self._kwargs, open=False, name="fsm-async",
            configure=_opened_async, check=still_open_async, timeout=t.connect)
        try:
            await pool.open(wait=True, timeout=t.connect)
        except BaseException as exc:
            await asyncio.shield(pool.close())
            if isinstance(exc, psycopg.Error):
                raise failure(f"cannot open database {self.name}",
                              await asyncio.to_thread(self._refusal, exc), t) from None
            raise
        opened = self._async_pools.get(loop)  # another task may have opened one meanwhile
        if opened is None:
            self._async_pools[loop] = _AsyncPool(pool, asyncio.Semaphore(self.pool_size))
            return True
        opened.users += 1  # counted before the spare pool's close gives the loop away
        await pool.close()
        return True

    async def close_async(self) -> None:
        loop = asyncio.get_running_loop()
        opened = self._async_pools.get(loop)
        if opened is None:
            return
        opened.users -= 1
        if opened.users <= 0:
            del self._async_pools[loop]
            await opened.pool.close()

    def admission(self) -> asyncio.Semaphore | None:
        opened = self._async_pools.get(asyncio.get_running_loop())
        return opened.admit if opened is not None else None

    @property
    def schema_version(self) -> int:
        return int(self.read("SELECT max(version) FROM fsm_schema")[0][0])

    def server_version(self) -> str:
        return str(self.read("SHOW server_version")[0][0])

    def close(self) -> None:
        self.pool.close()

    def send(self, db: psycopg.Connection[Any], writes: list[Write], locked: bool) -> None:
        """The writes in one pipeline (one round trip). Unless the run row is locked
        already, its UPDATE goes first on its own: a stale version stops the commit
        before anything else is sent."""
        if not locked:
            (sql, args, _, expect_one), writes = writes[0], writes[1:]
            if db.execute(sql, args).rowcount != 1 and expect_one is not None:
                raise expect_one(db)
        checked: list[tuple[psycopg.Cursor[Any], Any]] = []
        with db.pipeline(), db.cursor() as cur:
            for sql, args, many, expect_one in writes:
                if many:
                    cur.executemany(sql, args)
                elif expect_one is None:
                    cur.execute(sql, args)
                else:
                    own = db.cursor()
                    own.execute(sql, args)
                    checked.append((own, expect_one))
        for own, expect_one in checked:
            if own.rowcount != 1:
                raise expect_one(db)

    # -- the fleet ------------------------------------------------------------------

    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        threading.Thread(target=self._listen, args=(wake, stop), daemon=True,
                         name="fsm-listen").start()
        return True

    def _listen(self, wake: threading.Event, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                with self._connect() as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    wake.set()  # anything missed while not listening
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            wake.set()
            except (psycopg.Error, FSMError):
                stop.wait(1.0)  # the server went away: polling covers the gap

    @contextmanager
    def sweep_lock(self) -> Iterator[bool]:
        # A session of its own, which the server ends once it idles ``timeouts.sweep``:
        # a sweeper frozen while holding the lock gives it back (two sweeps at once are
        # safe, as every decision is fenced; the lock only saves the work).
        try:
            conn = self._sweep_session()
        except StoreError:
            yield False
            return
        with conn:
            try:
                got = bool(conn.execute("SELECT pg_try_advisory_lock(%s)",
                                        (SWEEP_LOCK,)).fetchone()[0])  # type: ignore[index]
            except psycopg.Error:
                got = False
            if got:
                fault("sweep_locked", 0)
            yield got
            # Closing the connection ends the session, which releases the lock.

    def _sweep_session(self) -> psycopg.Connection[Any]:
        try:
            return self._connect(idle_session_timeout=self.timeouts.sweep)
        except StoreError as exc:
            if "idle_session_timeout" not in str(exc):
                raise
            return self._connect()  # a server before PostgreSQL 14 has no such setting


@dataclasses.dataclass
class _AsyncPool:
    """A loop's async pool, what admits steps to it (no more at once than it has
    connections), and how many callers opened it and have not closed it."""

    pool: AsyncConnectionPool[Any]
    admit: asyncio.Semaphore
    users: int = 1


async def _fetched(aconn: psycopg.AsyncConnection[Any], sql: str,
                   args: tuple[Any, ...]) -> list[Any]:
    return await (await aconn.execute(sql, args)).fetchall()


class _Cursor:
    """An async cursor used from a bridged greenlet as a synchronous one is."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.AsyncCursor[Any]) -> None:
        self._cur = cur

    def execute(self, sql: str, args: Any = None) -> _Cursor:
        await_(self._cur.execute(sql, args))
        return self

    def executemany(self, sql: str, args: Any) -> None:
        await_(self._cur.executemany(sql, args))

    def fetchone(self) -> Any:
        return await_(self._cur.fetchone())

    def fetchall(self) -> list[Any]:
        return await_(self._cur.fetchall())

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        await_(self._cur.close())


class _Session:
    """An async pool's connection in a transaction, used from a bridged greenlet as
    :meth:`PostgresDatabase.tx` gives a synchronous one: what the roles call on it."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Any = None) -> _Cursor:
        return _Cursor(await_(self._conn.execute(sql, args)))

    def cursor(self) -> _Cursor:
        return _Cursor(self._conn.cursor())

    def pipeline(self) -> Any:
        return entered(self._conn.pipeline())


class PostgresStore(SQLStore):
    """A durable store in a PostgreSQL database, shared by any number of processes.

    ``pool_size`` (default 10; ``FSM_PG_POOL`` at the command line) bounds the connections of
    this process's pool; a worker needs about one per run it drives at once, plus two. An
    event loop that drives steps on the loop (:meth:`open_async`, ``--store-on-loop``) has
    an async pool of the same size beside it.
    ``timeouts`` bound every statement, lock wait and idle transaction of its sessions
    (see :mod:`fsm.store.pg_session`); ``connect_timeout`` overrides its ``connect``.
    """

    db: PostgresDatabase

    def __init__(self, url: str, *, pool_size: int | None = None,
                 application_name: str | None = None, connect_timeout: float | None = None,
                 readonly: bool = False, timeouts: Timeouts | None = None,
                 key_file: str | None = None) -> None:
        super().__init__(PostgresDatabase(
            url, pool_size=pool_size, application_name=application_name,
            connect_timeout=connect_timeout, readonly=readonly, timeouts=timeouts,
            key_file=key_file))

    @property
    def url(self) -> str:
        return self.db.url

    @property
    def name(self) -> str:
        """The database's URL without its password."""
        return self.db.name

    @property
    def pool_size(self) -> int:
        return self.db.pool_size

    @property
    def timeouts(self) -> Timeouts:
        return self.db.timeouts

    def server_version(self) -> str:
        return self.db.server_version()
