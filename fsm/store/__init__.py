"""Stores: where runs live. SQLite by default (one machine); PostgreSQL for a fleet;
in-memory for tests. :func:`open_store` picks one from a URL."""

from __future__ import annotations

from fsm._location import default_db_path
from fsm.errors import StoreError
from fsm.settings import Settings
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


def open_store(db: str | None = None, *, settings: Settings | None = None,
               synchronous: str | None = None, pool_size: int | None = None,
               readonly: bool = False, adopt: bool = True) -> Store:
    """Open the store ``db`` names (default: ``settings.db``, else ``fsm.db``).

    ``postgresql://...`` opens a :class:`~fsm.store.postgres.PostgresStore` (pool size
    ``pool_size``, else ``settings.pg_pool``; its timeouts from ``settings.pg_*_timeout``,
    see :class:`~fsm.store.pg_session.Timeouts`); a path or ``sqlite:///path`` a
    :class:`SQLiteStore` (``synchronous``, else ``settings.synchronous``, sets its mode;
    ``settings.sqlite_busy_timeout`` the seconds it waits for another process's lock).
    ``settings`` default to :meth:`Settings.defaults` (the environment is read by the
    command line, or by a program that passes ``Settings.load()``). ``readonly`` opens an
    existing fsm database for reading only: it is never created, migrated or changed;
    ``adopt=False`` refuses a SQLite file that holds another program's tables.
    """
    s = settings or Settings.defaults()
    url = db or s.db
    path = sqlite_path(url)
    if path is None:
        try:
            from fsm.store.postgres import PostgresStore  # psycopg is an optional extra
        except ImportError as exc:
            raise StoreError(f"PostgreSQL needs psycopg: pip install 'fsm[postgres]' ({exc})") \
                from None
        from fsm.store.pg_session import Timeouts

        return PostgresStore(url, pool_size=pool_size or s.pg_pool, readonly=readonly,
                             timeouts=Timeouts.of(s), key_file=s.key_file)
    busy = int(s.sqlite_busy_timeout * 1000)
    if readonly:
        return SQLiteStore(path, readonly=True, busy_timeout_ms=busy, key_file=s.key_file)
    return SQLiteStore(path, synchronous=synchronous or s.synchronous, adopt=adopt,
                       busy_timeout_ms=busy, key_file=s.key_file)


__all__ = ["Claimed", "Lease", "MemoryStore", "SQLiteStore", "Store", "StoreError", "URL_HELP",
           "default_db_path", "open_store", "sqlite_path"]
