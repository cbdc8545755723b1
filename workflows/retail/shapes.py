"""The retail documents, and τ²-bench's shape of them.

The desk keeps products, users and orders as JSON documents with money in integer
cents (``price_cents``, ``amount_cents``, ``balance_cents``). τ²-bench keeps dollars
as floats. This module converts at one boundary, both ways:

- :func:`from_tau2` turns ``db.json`` into documents (every amount there has at most
  two decimals, so ``round(dollars * 100)`` is exact);
- :func:`tau2_product`, :func:`tau2_user` and :func:`tau2_order` give the shape
  τ²-bench's pydantic models dump (every optional order field present, ``None`` when
  unset; dollars as ``cents / 100``, the same float ``json`` parses from the decimal),
  which is what tools show the model and what :func:`db_hash` hashes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

Doc = dict[str, Any]

#: The optional fields of τ²-bench's ``Order``, dumped as ``None`` when unset.
ORDER_OPTIONAL = ("cancel_reason", "exchange_items", "exchange_new_items",
                  "exchange_payment_method_id", "exchange_price_difference", "return_items",
                  "return_payment_method_id")


def cents(dollars: float) -> int:
    """``12.5`` → ``1250``; refuses an amount with more than two decimals."""
    value = round(dollars * 100)
    if value / 100 != dollars:
        raise ValueError(f"{dollars!r} is not a whole number of cents")
    return value


def dollars(amount_cents: int) -> float:
    """``1250`` → ``12.5``: the float τ²-bench holds for the same amount."""
    return amount_cents / 100


def money(amount_cents: int) -> str:
    """``123456`` → ``"$1,234.56"``; ``-500`` → ``"-$5.00"``."""
    sign = "-" if amount_cents < 0 else ""
    whole, rest = divmod(abs(amount_cents), 100)
    return f"{sign}${whole:,}.{rest:02d}"


# -- τ²-bench's shape → documents ---------------------------------------------------------

def _variant_doc(v: Mapping[str, Any]) -> Doc:
    return {"item_id": v["item_id"], "options": dict(v["options"]),
            "available": bool(v["available"]), "price_cents": cents(v["price"])}


def product_doc(p: Mapping[str, Any]) -> Doc:
    return {"name": p["name"], "product_id": p["product_id"],
            "variants": {k: _variant_doc(v) for k, v in p["variants"].items()}}


def _method_doc(m: Mapping[str, Any]) -> Doc:
    doc = {k: v for k, v in m.items() if k != "balance"}
    if m["source"] == "gift_card":
        doc["balance_cents"] = cents(m["balance"])
    return doc


def user_doc(u: Mapping[str, Any]) -> Doc:
    return {"user_id": u["user_id"], "name": dict(u["name"]), "address": dict(u["address"]),
            "email": u["email"],
            "payment_methods": {k: _method_doc(m) for k, m in u["payment_methods"].items()},
            "orders": list(u["orders"])}


def order_doc(o: Mapping[str, Any]) -> Doc:
    doc: Doc = {
        "order_id": o["order_id"], "user_id": o["user_id"], "address": dict(o["address"]),
        "items": [{"name": i["name"], "product_id": i["product_id"], "item_id": i["item_id"],
                   "price_cents": cents(i["price"]), "options": dict(i["options"])}
                  for i in o["items"]],
        "status": o["status"],
        "fulfillments": [{"tracking_id": list(f["tracking_id"]),
                          "item_ids": list(f["item_ids"])} for f in o["fulfillments"]],
        "payment_history": [{"transaction_type": p["transaction_type"],
                             "amount_cents": cents(p["amount"]),
                             "payment_method_id": p["payment_method_id"]}
                            for p in o["payment_history"]],
    }
    for name in ORDER_OPTIONAL:
        doc[name] = o.get(name)
    diff = doc.pop("exchange_price_difference")
    doc["exchange_price_difference_cents"] = None if diff is None else cents(diff)
    return doc


def from_tau2(db: Mapping[str, Any]) -> tuple[list[Doc], list[Doc], list[Doc]]:
    """``db.json`` as (products, users, orders) documents, in file order."""
    return ([product_doc(p) for p in db["products"].values()],
            [user_doc(u) for u in db["users"].values()],
            [order_doc(o) for o in db["orders"].values()])


# -- documents → τ²-bench's shape ---------------------------------------------------------

def tau2_variant(v: Mapping[str, Any]) -> Doc:
    return {"item_id": v["item_id"], "options": dict(v["options"]),
            "available": v["available"], "price": dollars(v["price_cents"])}


def tau2_product(p: Mapping[str, Any]) -> Doc:
    return {"name": p["name"], "product_id": p["product_id"],
            "variants": {k: tau2_variant(v) for k, v in p["variants"].items()}}


def _tau2_method(m: Mapping[str, Any]) -> Doc:
    out = {k: v for k, v in m.items() if k != "balance_cents"}
    if "balance_cents" in m:
        out["balance"] = dollars(m["balance_cents"])
    return out


def tau2_user(u: Mapping[str, Any]) -> Doc:
    return {"user_id": u["user_id"], "name": dict(u["name"]), "address": dict(u["address"]),
            "email": u["email"],
            "payment_methods": {k: _tau2_method(m) for k, m in u["payment_methods"].items()},
            "orders": list(u["orders"])}


def tau2_order(o: Mapping[str, Any]) -> Doc:
    diff = o.get("exchange_price_difference_cents")
    out: Doc = {
        "order_id": o["order_id"], "user_id": o["user_id"], "address": dict(o["address"]),
        "items": [{"name": i["name"], "product_id": i["product_id"], "item_id": i["item_id"],
                   "price": dollars(i["price_cents"]), "options": dict(i["options"])}
                  for i in o["items"]],
        "status": o["status"],
        "fulfillments": [{"tracking_id": list(f["tracking_id"]),
                          "item_ids": list(f["item_ids"])} for f in o["fulfillments"]],
        "payment_history": [{"transaction_type": p["transaction_type"],
                             "amount": dollars(p["amount_cents"]),
                             "payment_method_id": p["payment_method_id"]}
                            for p in o["payment_history"]],
    }
    for name in ORDER_OPTIONAL:
        out[name] = o.get(name)
    out["exchange_price_difference"] = None if diff is None else dollars(diff)
    return out


def tau2_db(products: Iterable[Doc], users: Iterable[Doc], orders: Iterable[Doc]) -> Doc:
    """The whole database as τ²-bench's ``RetailDB.model_dump()``."""
    return {"products": {p["product_id"]: tau2_product(p) for p in products},
            "users": {u["user_id"]: tau2_user(u) for u in users},
            "orders": {o["order_id"]: tau2_order(o) for o in orders}}


def db_hash(db: Mapping[str, Any]) -> str:
    """τ²-bench's database hash: SHA-256 of ``json.dumps(db, sort_keys=True, default=str)``."""
    return hashlib.sha256(json.dumps(db, sort_keys=True, default=str).encode()).hexdigest()


_TO_TAU2 = {"products": tau2_product, "users": tau2_user, "orders": tau2_order}


@lru_cache(maxsize=16384)
def _piece(kind: str, key: str, text: str) -> str:
    """``"key": {document}`` as ``json.dumps(..., sort_keys=True)`` writes it inside the
    whole database; kept for each stored document text, which rarely changes."""
    return f"{json.dumps(key)}: {json.dumps(_TO_TAU2[kind](json.loads(text)), sort_keys=True)}"


def rows_hash(tables: Mapping[str, Iterable[tuple[str, str]]]) -> str:
    """:func:`db_hash` of the database whose documents are stored as these (key, JSON
    text) rows, by table: the same text as ``json.dumps`` of the whole, assembled from
    each document's piece, so that only documents that changed are encoded again."""
    out = hashlib.sha256()
    for n, kind in enumerate(sorted(tables)):
        out.update((", " if n else "{").encode() + f"{json.dumps(kind)}: {{".encode())
        pieces = sorted((key, _piece(kind, key, text)) for key, text in tables[kind])
        out.update(", ".join(piece for _, piece in pieces).encode())
        out.update(b"}")
    out.update(b"}")
    return out.hexdigest()
