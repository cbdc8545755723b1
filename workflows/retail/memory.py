"""The retail database in this process: documents as text in dicts, transactions under
one lock (stores in memory, tests, and the benchmark's expected databases)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from workflows.retail.base import RetailDatabase, doc_text, initial_rows, user_keys
from workflows.retail.data import RetailData, pinned
from workflows.retail.operations import OPERATIONS, modify_pending_order_items
from workflows.retail.shapes import Doc


class _MemoryTx:
    """Reads see this transaction's own puts; :meth:`commit` applies them."""

    def __init__(self, db: MemoryRetail) -> None:
        self.db = db
        self.users: dict[str, str] = {}
        self.keys: dict[str, tuple[str, str, str, str]] = {}
        self.orders: dict[str, str] = {}

    def user(self, user_id: str) -> Doc | None:
        text = self.users.get(user_id) or self.db._users.get(user_id)
        return json.loads(text) if text else None

    def order(self, order_id: str) -> Doc | None:
        text = self.orders.get(order_id) or self.db._orders.get(order_id)
        return json.loads(text) if text else None

    def product(self, product_id: str) -> Doc | None:
        text = self.db._products.get(product_id)
        return json.loads(text) if text else None

    def product_names(self) -> dict[str, str]:
        return dict(self.db._product_names)

    def product_of_item(self, item_id: str) -> str | None:
        return self.db._items.get(item_id)

    def _find(self, match: Callable[[tuple[str, str, str, str]], bool]) -> str | None:
        keys = {**self.db._keys, **self.keys}
        return next((user_id for user_id, k in keys.items() if match(k)), None)

    def user_by_email(self, email: str) -> str | None:
        return self._find(lambda k: k[0] == email.lower())

    def user_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str | None:
        wanted = (first_name.lower(), last_name.lower(), zip)
        return self._find(lambda k: k[1:] == wanted)

    def put_user(self, doc: Doc) -> None:
        self.users[doc["user_id"]] = doc_text(doc)
        self.keys[doc["user_id"]] = user_keys(doc)

    def put_order(self, doc: Doc) -> None:
        self.orders[doc["order_id"]] = doc_text(doc)

    def commit(self) -> None:
        self.db._users.update(self.users)
        self.db._keys.update(self.keys)
        self.db._orders.update(self.orders)


class MemoryRetail(RetailDatabase):
    """The retail database in this process, fresh from ``data`` (default: the pinned one).

    ``upstream_price_bug=True`` runs ``modify_pending_order_items`` as τ²-bench's tool
    does (see :mod:`workflows.retail.operations`), to compare with its expected databases.
    """

    def __init__(self, path: str = ":memory:", *, data: RetailData | None = None,
                 upstream_price_bug: bool = False) -> None:
        self.path = path
        self.data = data or pinned()
        if upstream_price_bug:
            self.operations = {**OPERATIONS, "modify_pending_order_items": partial(
                modify_pending_order_items, upstream_price_bug=True)}
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Back to the data it was filled from: every write forgotten."""
        products, items, users, orders = initial_rows(self.data)
        self._products = {row[0]: row[3] for row in products}
        self._product_names = {row[2]: row[0] for row in products}
        self._items = dict(items)
        self._users = {row[0]: row[-1] for row in users}
        self._keys = {row[0]: tuple(row[2:6]) for row in users}
        self._orders = {row[0]: row[-1] for row in orders}
        self._log: list[dict[str, Any]] = []

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[_MemoryTx]:
        with self._lock:
            tx = _MemoryTx(self)
            yield tx
            tx.commit()

    def _recorded(self, tx: Any, key: str) -> Any:
        return next((w["result"] for w in self._log if w["key"] == key), None)

    def _record(self, tx: Any, key: str, tool: str, args: dict[str, Any],
                result: Any) -> None:
        self._log.append({"key": key, "tool": tool, "args": args,
                          "result": json.loads(json.dumps(result))})

    def _documents(self, tx: Any) -> tuple[list[Doc], list[Doc], list[Doc]]:
        return ([json.loads(t) for t in self._products.values()],
                [json.loads(t) for t in self._users.values()],
                [json.loads(t) for t in self._orders.values()])

    def _writes(self, tx: Any) -> list[dict[str, Any]]:
        return [dict(w) for w in self._log]

    def _rows(self, tx: Any) -> dict[str, list[tuple[str, str]]]:
        return {"products": list(self._products.items()), "users": list(self._users.items()),
                "orders": list(self._orders.items())}
