"""Stores: where runs live. SQLite by default (one machine); PostgreSQL for a fleet;
in-memory for tests. :func:`open_store` picks one from a URL."""

from __future__ import annotations

import os

from fsm.errors import StoreError
from fsm.location import default_db_path
from fsm.store.base import Claimed, Lease, Store
from fsm.store.memory import MemoryStore
from fsm.store.sqlite import SQLiteStore

URL_HELP = ("a database URL: postgresql://user@host/dbname selects PostgreSQL; "
            "a file path or sqlite:///path selects SQLite")


def sqlite_path(url: str) -> str | None:
    """The file a SQLite URL or path names; ``None`` for a PostgreSQL URL.

    Raises :class:`StoreError` for any other ``scheme://``.
    """
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if not path:
            raise StoreError(f"database URL {url!r} names no file: use sqlite:///path/to/file.db")
        return path
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise StoreError(f"database URL scheme {scheme!r} is not supported ({URL_HELP})")
    return url


def open_store(db: str | None = None, *, synchronous: str | None = None,
               pool_size: int | None = None, readonly: bool = False,
               adopt: bool = True) -> Store:
    """Open the store ``db`` names (default :func:`default_db_path`).

    ``postgresql://...`` opens a :class:`~fsm.store.postgres.PostgresStore` (pool size
    ``pool_size``, else ``$FSM_PG_POOL``); a path or ``sqlite:///path`` a
    :class:`SQLiteStore` (``FSM_SYNCHRONOUS`` sets its mode). ``readonly`` opens an
    existing fsm database for reading only: it is never created, migrated or changed;
    ``adopt=False`` refuses a SQLite file that holds another program's tables.
    """
    url = default_db_path(db)
    path = sqlite_path(url)
    if path is None:
        try:
            from fsm.store.postgres import PostgresStore  # psycopg is an optional extra
        except ImportError as exc:
            raise StoreError(f"PostgreSQL needs psycopg: pip install 'fsm[postgres]' ({exc})") \
                from None
        return PostgresStore(url, pool_size=pool_size, readonly=readonly)
    if readonly:
        return SQLiteStore(path, readonly=True)
    mode = synchronous or os.environ.get("FSM_SYNCHRONOUS") or "FULL"
    return SQLiteStore(path, synchronous=mode, adopt=adopt)


__all__ = ["Claimed", "Lease", "MemoryStore", "SQLiteStore", "Store", "StoreError", "URL_HELP",
           "default_db_path", "open_store", "sqlite_path"]
