"""A deploy never strands a run: each run keeps the definition it started on.

A refund waits for approval under version 1; version 2 (a new state, a new description
of ``refund_item``) is deployed, keeping version 1. The waiting run is decided and paid
under version 1 while new runs start on version 2, on SQLite and on PostgreSQL. Code that
does not keep a run's version refuses it in one line that names the workflow, the
version and the hash it needs, and how to migrate it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from deploykit import V2_REFUND_DESCRIPTION, v1, v2

from fsm import DefinitionChanged, Engine, MemoryStore, SQLiteStore, Store
from fsm.auditor.audit import audit
from fsm.policy import View
from fsm.store import open_store
from workflows.refund import clerk
from workflows.refund.shop import AnyShop, PostgresShop, Shop

LARGE = "Order A-1002: my headphones stopped working, I want my money back"
SMALL = "Order A-1001: the kettle arrived broken"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, AnyShop]]:
    """A store and the shop the refunds are paid through."""
    store: Store
    shop: AnyShop
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        store, shop = open_store(url), PostgresShop(url).seed_demo()
    elif request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        store, shop = SQLiteStore(path), Shop(path).seed_demo()
    else:
        store, shop = MemoryStore(), Shop().seed_demo()
    yield store, shop
    shop.close()
    store.close()


class Watching:
    """The clerk, noting the description of ``refund_item`` each run was shown."""

    def __init__(self) -> None:
        self.shown: dict[str, set[str]] = {}

    def __call__(self, view: View) -> object:
        for tool in view.tools:
            if tool["name"] == "refund_item":
                self.shown.setdefault(view.run_id, set()).add(tool["description"])
        return clerk(view)


def paid(shop: AnyShop) -> list[tuple[str, str, int]]:
    return sorted((p["idempotency_key"], p["order_id"], p["amount_paise"])
                  for p in shop.ledger())


def test_a_paused_run_is_decided_and_paid_on_its_version_after_a_deploy(
        where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    before = Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
    assert (before.status, before.state) == ("awaiting_approval", "awaiting_approval")
    one, two = v1(shop), v2(shop)

    watching = Watching()
    deployed = Engine(two, store, watching)  # the new release: version 2, keeping version 1
    new = deployed.start(SMALL, user="asha", run_id="new")
    assert (new.status, new.definition_hash) == ("done", two.definition_hash)
    after = deployed.decide("big", True, "supervisor", "checked the receipt")
    assert (after.status, after.state) == ("done", "done")
    assert after.definition_hash == one.definition_hash
    assert paid(shop) == [("big:6", "A-1002", 180_000), ("new:6", "A-1001", 35_000)]
    # Each run was shown the tools of its own version.
    assert watching.shown == {"new": {V2_REFUND_DESCRIPTION},
                              "big": {one.tools["refund_item"].description}}
    assert store.definition(one.definition_hash).version == "1"  # type: ignore[union-attr]
    assert store.definition(two.definition_hash).version == "2"  # type: ignore[union-attr]
    assert {d.label for d in store.definitions("refund")} == {"1", "2"}
    assert audit(store, "big").ok and audit(store, "new").ok


def test_code_without_the_runs_version_refuses_it_in_one_line(
        where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
    two_only = v2(shop, keep_v1=False)
    before = store.load_run("big")
    with pytest.raises(DefinitionChanged) as info:
        Engine(two_only, store, clerk).decide("big", True, "supervisor")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        f"run 'big' needs workflow 'refund' version 1 (definition {v1().definition_hash}), "
        "which this code does not define (it keeps 2;")
    assert "fsm migrate big --to current" in message
    assert (info.value.version, info.value.recorded) == ("1", v1().definition_hash)
    assert store.load_run("big") == before and paid(shop) == []
    assert [a.decision for a in store.approvals("big", pending_only=False)] == [None]


def test_an_old_release_refuses_a_run_of_the_new_version(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    Engine(v2(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
    with pytest.raises(DefinitionChanged, match="needs workflow 'refund' version 2"):
        Engine(v1(shop), store, clerk).decide("big", True, "supervisor")
    assert Engine(v2(shop), store, clerk).decide("big", True, "sup").status == "done"


def test_a_sweep_expires_approvals_of_every_version_it_keeps(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    now = [1_000_000.0]
    with SQLiteStore(path) as store, Shop(path).seed_demo() as shop:
        Engine(v1(shop), store, clerk, clock=lambda: now[0]).start(LARGE, user="ravi",
                                                                    run_id="old")
        Engine(v2(shop), store, clerk, clock=lambda: now[0]).start(LARGE, user="ravi",
                                                                    run_id="new")
        now[0] += 73 * 3600
        swept = Engine(v1(shop), store, clock=lambda: now[0]).sweep()
        assert swept == ["old"]
        assert [r for r, _ in swept.skipped] == ["new"] and "version 2" in swept.skipped[0][1]
        assert Engine(v2(shop), store, clock=lambda: now[0]).sweep() == ["new"]
        assert {store.load_run(r).state for r in ("old", "new")} == {"handed_over"}
