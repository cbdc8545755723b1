"""A fake shop: orders, a payment gateway with a ledger, and an outbox.

It behaves like an external provider: it keeps its own tables and writes them in
its own transactions on its own connection, never inside the engine's step
transaction. The gateway ignores an idempotency key it has already seen.

The tables live in the same database as the runs: a SQLite file (:class:`Shop`) or
a PostgreSQL database (:class:`PostgresShop`, for a fleet of workers), so "paid
exactly once" can be checked across every worker. :func:`open_shop` picks one.

A database that fails for now (a lost connection, a pool or lock timeout) is not the
gateway's answer: the PostgreSQL shop raises :class:`fsm.Unavailable`, and the run's
step is tried again later (SQLite's busy database is recognised as such too).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fsm import Unavailable
from fsm.errors import is_transient
from fsm.observability.faults import fault

DAY = 86_400

#: order id → (customer, item id, item name, price in paise, days since delivery)
DEMO_ORDERS = {
    "A-1001": ("asha", "kettle-1", "electric kettle", 35_000, 5),
    "A-1002": ("ravi", "headphones-1", "noise-cancelling headphones", 180_000, 10),
    "A-1003": ("meera", "shoes-1", "running shoes", 90_000, 60),
    "A-1004": ("asha", "lamp-1", "desk lamp", 42_000, 3),
    "A-1005": ("dev", "toaster-1", "toaster", 42_000, 2),
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS shop_orders (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, item_id TEXT NOT NULL,
    item_name TEXT NOT NULL, price_paise INTEGER NOT NULL, delivered_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_payments (
    idempotency_key TEXT PRIMARY KEY, order_id TEXT NOT NULL, item_id TEXT NOT NULL,
    amount_paise INTEGER NOT NULL, at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_outbox (
    idempotency_key TEXT PRIMARY KEY, customer TEXT NOT NULL, text TEXT NOT NULL, at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_calls (
    n INTEGER PRIMARY KEY AUTOINCREMENT, api TEXT NOT NULL, idempotency_key TEXT, at REAL NOT NULL
);
"""


class Shop:
    """The shop's backend on its own SQLite connection (``":memory:"`` for tests)."""

    def __init__(self, path: str = ":memory:", clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
        try:
            self._db.row_factory = sqlite3.Row
            if path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def seed_demo(self) -> Shop:
        now = self.clock()
        with self._tx():
            for oid, (cust, item, name, price, days) in DEMO_ORDERS.items():
                self._db.execute(
                    "INSERT OR IGNORE INTO shop_orders VALUES (?, ?, ?, ?, ?, ?)",
                    (oid, cust, item, name, price, now - days * DAY),
                )
        return self

    def add_order(self, order_id: str, customer: str, item_id: str, item_name: str,
                  price_paise: int, delivered_days_ago: float) -> None:
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO shop_orders VALUES (?, ?, ?, ?, ?, ?)",
                (order_id, customer, item_id, item_name, price_paise,
                 self.clock() - delivered_days_ago * DAY),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Shop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tx(self) -> _Tx:
        return _Tx(self)

    def order(self, order_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM shop_orders WHERE order_id = ?", (order_id,)
            ).fetchone()
        return dict(row) if row else None

    def pay(self, key: str, order_id: str, item_id: str, amount_paise: int) -> dict[str, Any]:
        """Refund through the gateway. A key seen before returns its first outcome."""
        with self._tx():
            self._db.execute("INSERT INTO shop_calls (api, idempotency_key, at) VALUES (?, ?, ?)",
                             ("refund", key, self.clock()))
            seen = self._db.execute(
                "SELECT * FROM shop_payments WHERE idempotency_key = ?", (key,)
            ).fetchone()
            if seen is not None:
                return {"status": "ok", "payment": key, "amount_paise": seen["amount_paise"],
                        "duplicate": True}
            other = self._db.execute(
                "SELECT idempotency_key FROM shop_payments WHERE order_id = ? AND item_id = ?",
                (order_id, item_id),
            ).fetchone()
            if other is not None:
                return {"status": "failed",
                        "reason": f"item already refunded (payment {other[0]})"}
            self._db.execute("INSERT INTO shop_payments VALUES (?, ?, ?, ?, ?)",
                             (key, order_id, item_id, amount_paise, self.clock()))
        return {"status": "ok", "payment": key, "amount_paise": amount_paise}

    def payment(self, key: str) -> dict[str, Any] | None:
        """The payment made under ``key``, as :meth:`pay` first answered it; ``None``: none."""
        with self._lock:
            seen = self._db.execute("SELECT amount_paise FROM shop_payments "
                                    "WHERE idempotency_key = ?", (key,)).fetchone()
        return None if seen is None else {"status": "ok", "payment": key,
                                          "amount_paise": seen[0]}

    def send(self, key: str, customer: str, text: str) -> dict[str, Any]:
        with self._tx():
            self._db.execute("INSERT INTO shop_calls (api, idempotency_key, at) VALUES (?, ?, ?)",
                             ("reply", key, self.clock()))
            self._db.execute("INSERT OR IGNORE INTO shop_outbox VALUES (?, ?, ?, ?)",
                             (key, customer, text, self.clock()))
        return {"status": "sent", "message": key}

    def ledger(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM shop_payments ORDER BY at, idempotency_key")
            return [dict(r) for r in rows]

    def outbox(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._db.execute("SELECT * FROM shop_outbox ORDER BY at")]

    def calls(self, api: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM shop_calls ORDER BY n")
            return [dict(r) for r in rows if api is None or r["api"] == api]


class _Tx:
    def __init__(self, shop: Shop) -> None:
        self.shop = shop

    def __enter__(self) -> None:
        self.shop._lock.acquire()
        self.shop._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        try:
            self.shop._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.shop._lock.release()


_PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS shop_orders (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, item_id TEXT NOT NULL,
    item_name TEXT NOT NULL, price_paise BIGINT NOT NULL, delivered_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_payments (
    idempotency_key TEXT PRIMARY KEY, order_id TEXT NOT NULL, item_id TEXT NOT NULL,
    amount_paise BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_outbox (
    idempotency_key TEXT PRIMARY KEY, customer TEXT NOT NULL, text TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS shop_calls (
    n BIGSERIAL PRIMARY KEY, api TEXT NOT NULL, idempotency_key TEXT,
    at DOUBLE PRECISION NOT NULL
);
"""
#: Advisory lock key that serialises creating the shop's tables.
_PG_SCHEMA_LOCK = 0x53484F50


@contextmanager
def _reachable(what: str) -> Iterator[None]:
    """The database failing for now is :class:`fsm.Unavailable`, not an answer."""
    try:
        yield
    except Exception as exc:
        if is_transient(exc) and not isinstance(exc, Unavailable):
            lines = [part.strip() for part in str(exc).splitlines() if part.strip()]
            raise Unavailable(f"shop {what}: {type(exc).__name__}: "
                              f"{'; '.join(lines)}") from exc
        raise


class PostgresShop:
    """The shop's backend in a PostgreSQL database, on a small pool of its own.

    Its sessions have the timeouts of fsm's own (:class:`fsm.store.pg_session.Timeouts`,
    from ``FSM_PG_*_TIMEOUT``): no statement or lock wait lasts for ever, and the tables
    are created under a lock only when they are missing.
    """

    def __init__(self, url: str, clock: Callable[[], float] = time.time) -> None:
        import psycopg  # an optional extra: only a PostgreSQL shop needs it
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from fsm.settings import Settings
        from fsm.store.pg_session import Timeouts, session_kwargs

        self.path = url
        self.clock = clock
        t = Timeouts.of(Settings.load())  # the workflow's own edge: FSM_PG_*_TIMEOUT
        name = f"fsm-shop-{os.getpid()}"
        kwargs: dict[str, Any] = {**session_kwargs(url, t, name), "row_factory": dict_row}
        # A first connection of its own: a wrong URL fails here at once, with its reason.
        with _reachable("schema"), psycopg.connect(
                url, connect_timeout=max(1, int(t.connect)),
                **session_kwargs(url, t, name,
                                 idle_in_transaction_session_timeout=t.migration / 2),
                row_factory=dict_row) as conn:
            self._create_tables(conn, t.migration)
        self._pool = ConnectionPool(url, min_size=1, max_size=4, open=False, name="shop",
                                    kwargs=kwargs, check=ConnectionPool.check_connection,
                                    timeout=t.connect)
        with _reachable("pool"):
            try:
                self._pool.open(wait=True, timeout=t.connect)
            except BaseException:
                self._pool.close()
                raise

    @staticmethod
    def _create_tables(conn: Any, wait: float) -> None:
        """The shop's tables, created under a lock when missing (waiting at most ``wait``
        seconds for another process creating them; a frozen one loses its session)."""
        found = conn.execute("SELECT to_regclass('shop_calls') IS NOT NULL AS ok").fetchone()
        if found and found["ok"]:
            return
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {int(wait * 1000)}")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SCHEMA_LOCK,))
            fault("shop_schema_locked", 0)
            conn.execute(_PG_SCHEMA)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with _reachable("read"), self._pool.connection() as conn:
            return list(conn.execute(sql, args).fetchall())  # type: ignore[arg-type]

    def seed_demo(self) -> PostgresShop:
        now = self.clock()
        with _reachable("seed"), self._pool.connection() as conn, conn.transaction():
            for oid, (cust, item, name, price, days) in DEMO_ORDERS.items():
                conn.execute("INSERT INTO shop_orders VALUES (%s, %s, %s, %s, %s, %s) "
                             "ON CONFLICT DO NOTHING",
                             (oid, cust, item, name, price, now - days * DAY))
        return self

    def add_order(self, order_id: str, customer: str, item_id: str, item_name: str,
                  price_paise: int, delivered_days_ago: float) -> None:
        with _reachable("orders"), self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO shop_orders VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (order_id) "
                "DO UPDATE SET customer = EXCLUDED.customer, item_id = EXCLUDED.item_id, "
                "item_name = EXCLUDED.item_name, price_paise = EXCLUDED.price_paise, "
                "delivered_at = EXCLUDED.delivered_at",
                (order_id, customer, item_id, item_name, price_paise,
                 self.clock() - delivered_days_ago * DAY))

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresShop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def order(self, order_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM shop_orders WHERE order_id = %s", (order_id,))
        return rows[0] if rows else None

    def pay(self, key: str, order_id: str, item_id: str, amount_paise: int) -> dict[str, Any]:
        """Refund through the gateway. A key seen before returns its first outcome."""
        with _reachable("gateway"), self._pool.connection() as conn, conn.transaction():
            # One payment decision per order at a time, whichever worker asks.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (order_id,))
            conn.execute("INSERT INTO shop_calls (api, idempotency_key, at) VALUES (%s, %s, %s)",
                         ("refund", key, self.clock()))
            seen: Any = conn.execute("SELECT * FROM shop_payments WHERE idempotency_key = %s",
                                     (key,)).fetchone()
            if seen is not None:
                return {"status": "ok", "payment": key, "amount_paise": seen["amount_paise"],
                        "duplicate": True}
            other: Any = conn.execute(
                "SELECT idempotency_key FROM shop_payments WHERE order_id = %s AND item_id = %s",
                (order_id, item_id)).fetchone()
            if other is not None:
                return {"status": "failed",
                        "reason": f"item already refunded (payment {other['idempotency_key']})"}
            conn.execute("INSERT INTO shop_payments VALUES (%s, %s, %s, %s, %s)",
                         (key, order_id, item_id, amount_paise, self.clock()))
        return {"status": "ok", "payment": key, "amount_paise": amount_paise}

    def payment(self, key: str) -> dict[str, Any] | None:
        """The payment made under ``key``, as :meth:`pay` first answered it; ``None``: none."""
        with _reachable("gateway"):
            rows = self._rows("SELECT amount_paise FROM shop_payments "
                              "WHERE idempotency_key = %s", (key,))
        return None if not rows else {"status": "ok", "payment": key,
                                      "amount_paise": rows[0]["amount_paise"]}

    def send(self, key: str, customer: str, text: str) -> dict[str, Any]:
        with _reachable("outbox"), self._pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO shop_calls (api, idempotency_key, at) VALUES (%s, %s, %s)",
                         ("reply", key, self.clock()))
            conn.execute("INSERT INTO shop_outbox VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (key, customer, text, self.clock()))
        return {"status": "sent", "message": key}

    def ledger(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM shop_payments ORDER BY at, idempotency_key")

    def outbox(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM shop_outbox ORDER BY at")

    def calls(self, api: str | None = None) -> list[dict[str, Any]]:
        rows = self._rows("SELECT * FROM shop_calls ORDER BY n")
        return [r for r in rows if api is None or r["api"] == api]


AnyShop = Shop | PostgresShop


def open_shop(url: str, clock: Callable[[], float] = time.time) -> AnyShop:
    """The shop in the database ``url`` names: ``postgresql://...``, a path or ``sqlite:///path``."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresShop(url, clock)
    return Shop(url.removeprefix("sqlite:///"), clock)
