"""The few ways SQLite and PostgreSQL differ, declared in one place.

Every statement of :mod:`fsm.store.statements` is written once and built with a
:class:`Dialect`: its placeholder, the clause that locks a row (PostgreSQL's
``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the database), the clause
with which a worker skips rows another holds, how a boolean is kept, where NULLs sort,
and which JSON text columns also keep a queryable JSONB copy. Both stores upsert with
``ON CONFLICT ... DO UPDATE``/``DO NOTHING`` and count changed rows the same way, so
neither needs ``RETURNING``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from fsm.records import canonical

__all__ = ["POSTGRES", "SQLITE", "Database", "Dialect", "jsonb_copy"]


def jsonb_copy(text: str) -> str:
    """The JSONB copy of JSON ``text``: JSONB cannot hold U+0000 (U+FFFD stands in), nor
    NaN or an infinity (null stands in; the text column keeps them)."""
    if "NaN" in text or "Infinity" in text:
        text = canonical(json.loads(text, parse_constant=lambda _: None))
    return text.replace("\\u0000", "\\ufffd")


@dataclass(frozen=True)
class Dialect:
    """One database's spelling of the shared SQL."""

    name: str
    #: The parameter placeholder.
    mark: str
    #: Appended to a SELECT of the row a write is fenced by (the run row), to lock it.
    lock: str = ""
    #: Appended to a SELECT that picks rows to take (a batch to prune, runs to claim).
    skip_locked: str = ""
    #: The ORDER BY term that puts unleased runs first.
    unleased_first: str = "lease_until IS NOT NULL, lease_until"
    #: JSON text column (table, column) → the column that keeps its JSONB copy.
    documents: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: How a JSONB copy's parameter is written.
    document_mark: str = ""
    #: How a boolean is kept (SQLite: 0 or 1).
    boolean: Callable[[bool], Any] = int
    #: Appended to a SELECT that orders definitions as first seen.
    definition_order: str = "recorded_at, definition_hash"
    #: The largest transcript index a read asks for (the column's integer type).
    max_index: int = 2**62
    #: The LIMIT that is no limit.
    no_limit: int | None = -1

    def marks(self, n: int) -> str:
        return ", ".join([self.mark] * n)

    def copy_of(self, table: str, column: str) -> str | None:
        """The column keeping the JSONB copy of ``table.column``, if this dialect keeps one."""
        return self.documents.get((table, column))


SQLITE = Dialect(name="sqlite", mark="?")

POSTGRES = Dialect(
    name="postgresql", mark="%s", lock=" FOR UPDATE", skip_locked=" FOR UPDATE SKIP LOCKED",
    unleased_first="lease_until NULLS FIRST",
    documents={("runs", "snapshot"): "doc", ("effects", "args"): "args_doc",
               ("effects", "result"): "result_doc", ("approvals", "args"): "args_doc",
               ("definitions", "body"): "doc"},
    document_mark="%s::jsonb", boolean=bool, definition_order="seq", max_index=2**31 - 1,
    no_limit=None,
)


class Database(ABC):
    """What the SQL both stores share uses of the store's own database, declared once:
    its dialect and placeholder, a transaction, a read, and how a message names the
    database. :class:`~fsm.store.sqlite.SQLiteStore` and
    :class:`~fsm.store.postgres.PostgresStore` give them; a store that lacks one cannot be
    made."""

    DIALECT: Dialect
    #: The dialect's parameter placeholder.
    MARK: str

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Any]:
        """One transaction: commits when the block ends, rolls back if it raises."""

    @abstractmethod
    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> Sequence[Any]:
        """The rows of one read."""

    @abstractmethod
    def _where(self) -> str:
        """The database as a message names it."""
