"""The few ways SQLite and PostgreSQL differ, declared in one place.

Every statement of :mod:`fsm.store._statements` is written once and built with a
:class:`Dialect`: its placeholder, the clause that locks a row (PostgreSQL's
``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the database), the clause
with which a worker skips rows another holds, how a boolean is kept, where NULLs sort,
and which JSON text columns also keep a queryable JSONB copy. Both stores upsert with
``ON CONFLICT ... DO UPDATE``/``DO NOTHING`` and count changed rows the same way, so
neither needs ``RETURNING``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fsm.records import canonical

__all__ = ["POSTGRES", "SQLITE", "Dialect", "jsonb_copy"]


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
