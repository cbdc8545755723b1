"""A fake shop: orders, a payment gateway with a ledger, and an outbox.

It behaves like an external provider: it keeps its own tables and writes them in
its own transactions on its own connection, never inside the engine's step
transaction. The gateway ignores an idempotency key it has already seen.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

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


class LazyShop:
    """The shop of the current database, opened on first use.

    The path is ``FSM_SHOP_DB``, else ``FSM_DB``, else ``fsm.db``: the demo's shop
    lives in the same file as the runs, in tables of its own.
    """

    def __init__(self) -> None:
        self._shop: Shop | None = None
        self._path: str | None = None
        self._lock = threading.Lock()
        # The process's last use of the shop may be anywhere; close it when it ends.
        atexit.register(self.close)

    def get(self) -> Shop:
        path = os.environ.get("FSM_SHOP_DB") or os.environ.get("FSM_DB") or "fsm.db"
        with self._lock:
            if self._shop is None or self._path != path:
                if self._shop is not None:
                    self._shop.close()
                self._shop = Shop(path).seed_demo()
                self._path = path
            return self._shop

    def close(self) -> None:
        """Close the shop opened last (the next :meth:`get` opens it again)."""
        with self._lock:
            if self._shop is not None:
                self._shop.close()
            self._shop = self._path = None
