"""One system database, and the roles that keep their rows in it.

A SQL store is a :class:`Database` (its connection or pool, transactions, reads, errors,
schema, signing keys: :class:`~fsm.store.sqlite.SQLiteDatabase`,
:class:`~fsm.store.postgres.PostgresDatabase`) and one object per role over it
(:class:`Role`: runs, effects, approvals, definitions, the inbox, conversations, the
desk, leases). The roles hold no connection of their own: a commit that writes the rows
of several roles does so in one of the database's transactions
(:func:`~fsm.store._statements.commit_writes`).
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

from pydantic import BaseModel

from fsm.errors import RowDamaged, RunNotFound
from fsm.records import Approval, RunState
from fsm.signing import Keys
from fsm.store._columns import UNREADABLE, approval_from, damaged, run_from
from fsm.store._dialect import Dialect
from fsm.store._statements import Head, Statements, Write, statements
from fsm.store.base import missing
from fsm.store.desk import TOMBSTONE_COLUMNS, Tombstone

__all__ = ["Database", "Role"]

_Model = TypeVar("_Model", bound=BaseModel)

#: Log heads a database keeps (see :meth:`~fsm.store._sql_runs.SQLRuns.commit`); past this
#: many, it starts over.
HEADS_KEPT = 4096


class Database(ABC):
    """A system database in one dialect: what every role's SQL runs on.

    A dialect's database gives a transaction (:meth:`tx`), a read (:meth:`read`), how a
    commit's writes are sent (:meth:`send`), how messages name it (:meth:`where`), its
    schema version, and its end (:meth:`close`). What it knows of the run rows its own
    commits left (:attr:`heads`) is shared by the roles that write a run's row.
    """

    #: Its spelling of the shared SQL.
    dialect: Dialect
    #: Where the database is (a path or a URL): workflow resources are opened from it.
    location: str = ""
    #: The key that signs every commit's log head, and the public keys that verify them.
    keys: Keys
    #: Opened for reading only: every write is refused.
    readonly: bool = False

    def __init__(self) -> None:
        #: The statements of the dialect.
        self.sql: Statements = statements(self.dialect)
        #: The dialect's parameter placeholder.
        self.mark = self.dialect.mark
        #: run_id → the run row as this process's last commit of it left it.
        self.heads: dict[str, Head] = {}

    @abstractmethod
    def tx(self) -> AbstractContextManager[Any]:
        """One transaction: commits when the block ends, rolls back if it raises."""

    @abstractmethod
    def read(self, sql: str, args: tuple[Any, ...] = ()) -> Sequence[Any]:
        """The rows of one read."""

    @abstractmethod
    def where(self) -> str:
        """The database as a message names it."""

    @property
    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def close(self) -> None: ...

    async def open_async(self) -> bool:
        """Open the async driver for the running loop (see :meth:`Store.open_async
        <fsm.store.base.Store.open_async>`); a dialect without one answers False."""
        return False

    async def close_async(self) -> None:  # noqa: B027 - optional hook
        """Close what :meth:`open_async` opened for the running loop."""

    def admission(self) -> asyncio.Semaphore | None:
        """What admits steps to the running loop's async driver (None: none is open)."""
        return None

    def column(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """The first column of ``sql``'s rows."""
        return [r[0] for r in self.read(sql, args)]

    def serial(self) -> AbstractContextManager[Any]:
        """Held around a commit until what the database knows of the run is right again (a
        failed commit forgets its head before another thread can commit from it)."""
        return nullcontext()

    def send(self, db: Any, writes: list[Write], locked: bool) -> None:
        """Execute ``writes`` in order (``locked``: the run row is locked already)."""
        for sql, args, many, expect_one in writes:
            if many:
                db.executemany(sql, args)
            elif db.execute(sql, args).rowcount != 1 and expect_one is not None:
                raise expect_one(db)

    def remember(self, run_id: str, head: Head) -> None:
        """Keep the run row a commit left (a bounded number of them)."""
        if len(self.heads) >= HEADS_KEPT:
            self.heads.clear()
        self.heads[run_id] = head

    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        """Set ``wake`` whenever a run may have become runnable; False: the caller polls."""
        return False

    @contextmanager
    def sweep_lock(self) -> Iterator[bool]:
        """The fleet-wide right to sweep; one process's database has nobody else."""
        yield True


class Role:
    """One role's rows in a :class:`Database`, and the reads every role makes alike."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sql = db.sql
        self.mark = db.mark
        self.dialect = db.dialect

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> Sequence[Any]:
        return self.db.read(sql, args)

    def _damaged(self, table: str, run_id: str | None, exc: BaseException, *,
                 key: str | None = None) -> RowDamaged:
        return damaged(self.db.where(), table, run_id, exc, key=key)

    def _row(self, model: type[_Model], table: str, values: Mapping[str, Any], *,
             key: str | None = None) -> _Model:
        """``values`` as the record ``model``, or the row is damaged."""
        try:
            return model.model_validate(dict(values))
        except UNREADABLE as exc:
            raise self._damaged(table, values.get("run_id"), exc, key=key) from None

    def _approval(self, values: Mapping[str, Any]) -> Approval:
        """An approvals row (:data:`~fsm.store._columns.APPROVAL_COLUMNS`), or the row is
        damaged."""
        try:
            return approval_from(values)
        except UNREADABLE as exc:
            raise self._damaged("approvals", values.get("run_id"), exc,
                                key=values.get("approval_id")) from None

    def _run(self, row: Sequence[Any], run_id: str | None) -> RunState:
        """A run from (snapshot, version) of its row, or the row is damaged."""
        try:
            return run_from(row[0], row[1])
        except UNREADABLE as exc:  # JSONDecodeError and ValidationError too
            raise self._damaged("runs", run_id, exc) from None

    def _run_row(self, columns: str, run_id: str) -> Any:
        """``columns`` of the run's row, or :class:`RunNotFound`."""
        rows = self._read(f"SELECT {columns} FROM runs WHERE run_id = {self.mark}", (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        return rows[0]

    def _exists(self, run_id: str) -> None:
        """Raise ``RunNotFound`` unless the run exists: asked only when a read of its
        rows found none, so a read of an existing run costs one query."""
        if not self._read(f"SELECT 1 FROM runs WHERE run_id = {self.mark}", (run_id,)):
            raise self.not_found(run_id)

    def tombstone(self, run_id: str) -> Tombstone | None:
        """What is kept of a pruned run, or ``None``."""
        rows = self._read(f"SELECT {', '.join(TOMBSTONE_COLUMNS)} FROM tombstones "
                          f"WHERE run_id = {self.mark}", (run_id,))
        if not rows:
            return None
        return Tombstone.model_validate(dict(zip(TOMBSTONE_COLUMNS, tuple(rows[0]),
                                                 strict=True)))

    def not_found(self, run_id: str) -> RunNotFound:
        """The error for a run this database does not hold (see :func:`missing`)."""
        return missing(run_id, self.tombstone)
