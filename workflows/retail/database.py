"""The retail database: τ²-bench's products, users and orders, on SQLite or PostgreSQL.

Like the refund shop, it behaves like an outside system: it keeps its own tables
(``retail_*``) in the same database as the runs and writes them in its own
transactions on its own connection, never inside the engine's step. Every run of one
database shares it. Documents are stored as JSON text, one row each, money in cents.

A write runs with its idempotency key: the key, the tool, its arguments and its result
are recorded in ``retail_writes`` in the write's own transaction, and a key seen before
returns the recorded result without changing anything again (so the write tools are
retry-safe). ``check(tx)`` runs inside the same transaction, before the tool, and may
refuse by raising: the policy is checked against the rows the write will change.

:func:`open_retail` picks the backend: ``postgresql://...``, a SQLite path or
``sqlite:///path``, or ``""``/``":memory:"`` for one in this process
(:class:`MemoryRetail`, which the benchmark also uses for its expected databases).
The tables are filled from τ²-bench's pinned ``db.json``, or from any database of its
retail schema (``open_retail(location, data=load(PATH))``, or ``FSM_RETAIL_DATA=PATH``
for the registered desk; :mod:`workflows.retail.data`).
"""

from __future__ import annotations

from workflows.retail.base import Check, RetailDatabase, initial_rows
from workflows.retail.data import RetailData, configured
from workflows.retail.memory import MemoryRetail
from workflows.retail.sql import PostgresRetail, SQLiteRetail

__all__ = ["Check", "MemoryRetail", "PostgresRetail", "RetailDatabase", "SQLiteRetail",
           "initial_rows", "open_retail"]


def open_retail(location: str, data: RetailData | None = None) -> RetailDatabase:
    """The retail database at ``location`` (the runs' own database, or one in memory),
    filled from ``data`` (default: ``$FSM_RETAIL_DATA``'s file, else the pinned one)."""
    data = data or configured()
    if location.startswith(("postgresql://", "postgres://")):
        return PostgresRetail(location, data=data)
    if location in ("", ":memory:"):
        return MemoryRetail(data=data)
    return SQLiteRetail(location.removeprefix("sqlite:///"), data=data)
