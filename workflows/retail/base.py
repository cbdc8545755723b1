"""What every retail database offers: calling a tool in one transaction, with its
idempotency key and a policy check inside it; dumping and hashing the whole database.

The backends are :mod:`workflows.retail.memory` and :mod:`workflows.retail.sql`;
:func:`workflows.retail.database.open_retail` picks one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from workflows.retail import shapes
from workflows.retail.data import RetailData, pinned
from workflows.retail.operations import OPERATIONS, WRITES, Tx
from workflows.retail.shapes import Doc

Check = Callable[[Tx], None]


def doc_text(doc: Doc) -> str:
    """A document as stored: compact JSON, UTF-8 kept."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def user_keys(doc: Doc) -> tuple[str, str, str, str]:
    """The columns a user is found by: email, first and last name (lower case), zip."""
    return (doc["email"].lower(), doc["name"]["first_name"].lower(),
            doc["name"]["last_name"].lower(), doc["address"]["zip"])


@lru_cache(maxsize=4)
def initial_rows(source: RetailData | None = None
                 ) -> tuple[tuple[tuple[Any, ...], ...], ...]:
    """The database ``source`` (default: the pinned one) as rows: products, items, users,
    orders (text documents)."""
    products, users, orders = shapes.from_tau2((source or pinned()).db())
    return (
        tuple((p["product_id"], n, p["name"], doc_text(p)) for n, p in enumerate(products)),
        tuple((item, p["product_id"]) for p in products for item in p["variants"]),
        tuple((u["user_id"], n, *user_keys(u), doc_text(u)) for n, u in enumerate(users)),
        tuple((o["order_id"], n, o["user_id"], doc_text(o)) for n, o in enumerate(orders)),
    )


class RetailDatabase:
    """What every backend offers: calling a tool, and reading the whole database."""

    path: str = ""
    #: The data the database was filled from, and goes back to on :meth:`reset`.
    data: RetailData
    #: name → function(tx, **arguments): the tools this database runs.
    operations: Mapping[str, Callable[..., Any]] = OPERATIONS

    def call(self, tool: str, args: Mapping[str, Any], *, key: str | None = None,
             check: Check | None = None) -> Any:
        """Run ``tool`` with ``args`` in one transaction (a write with its ``key``)."""
        fn = self.operations[tool]
        if tool not in WRITES:
            with self._transaction(write=False) as tx:
                if check is not None:
                    check(tx)
                return fn(tx, **args)
        with self._transaction(write=True) as tx:
            if key is not None:
                seen = self._recorded(tx, key)
                if seen is not None:
                    return seen
            if check is not None:
                check(tx)
            result = fn(tx, **args)
            if key is not None:
                self._record(tx, key, tool, dict(args), result)
            return result

    def dump(self) -> Doc:
        """The whole database in τ²-bench's shape (``RetailDB.model_dump()``)."""
        with self._transaction(write=False) as tx:
            return shapes.tau2_db(*self._documents(tx))

    def hash(self) -> str:
        """τ²-bench's hash of :meth:`dump` (computed from the stored rows, each document
        encoded once for as long as it does not change)."""
        with self._transaction(write=False) as tx:
            return shapes.rows_hash(self._rows(tx))

    def rows(self) -> dict[str, dict[str, Doc]]:
        """Every stored document by table and id, money in cents (what :meth:`hash`
        hashes)."""
        with self._transaction(write=False) as tx:
            return {table: {key: json.loads(text) for key, text in rows}
                    for table, rows in self._rows(tx).items()}

    def writes(self) -> list[dict[str, Any]]:
        """Every write applied, in order: key, tool, arguments, result."""
        with self._transaction(write=False) as tx:
            return self._writes(tx)

    def reset(self) -> None:
        """Back to the data it was filled from: every write forgotten (for benchmarks and
        tests)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection (nothing for a database in memory)."""

    def __enter__(self) -> RetailDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what each backend provides ------------------------------------------------------

    def _transaction(self, *, write: bool) -> Any:  # a context manager yielding a Tx
        raise NotImplementedError

    def _recorded(self, tx: Any, key: str) -> Any:
        raise NotImplementedError

    def _record(self, tx: Any, key: str, tool: str, args: dict[str, Any],
                result: Any) -> None:
        raise NotImplementedError

    def _documents(self, tx: Any) -> tuple[list[Doc], list[Doc], list[Doc]]:
        raise NotImplementedError

    def _writes(self, tx: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _rows(self, tx: Any) -> dict[str, list[tuple[str, str]]]:
        raise NotImplementedError
