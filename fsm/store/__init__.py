"""Stores: where runs live. SQLite by default; in-memory for tests."""

from __future__ import annotations

import os

from fsm.errors import StoreError
from fsm.location import default_db_path
from fsm.store.base import Store
from fsm.store.memory import MemoryStore
from fsm.store.sqlite import SQLiteStore


def open_store(db: str | None = None, *, synchronous: str | None = None) -> SQLiteStore:
    """Open the SQLite store at :func:`default_db_path` (``FSM_SYNCHRONOUS`` sets the mode)."""
    mode = synchronous or os.environ.get("FSM_SYNCHRONOUS") or "FULL"
    return SQLiteStore(default_db_path(db), synchronous=mode)


__all__ = ["MemoryStore", "SQLiteStore", "Store", "StoreError", "default_db_path", "open_store"]
