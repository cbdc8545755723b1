"""A rolling deploy on a PostgreSQL fleet of real ``fsm worker`` processes.

Release 1 defines version 1 of the refund workflow; release 2 defines version 2 and keeps
version 1. Old workers run release 1, new workers release 2, all importing the workflow
as ``deploykit:WORKFLOW``. While both are up, old workers leave the runs of version 2 to
the new ones; once the old workers are stopped, the new ones finish the runs of version
1 too. Every run ends done, each order is paid exactly once, every log audits clean.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import deploykit
import pytest
from fleetkit import Fleet, wait_for

from fsm import Engine, open_store
from fsm.auditor.audit import audit
from fsm.records import FINAL_STATUSES
from fsm.store import Store
from workflows.refund.shop import PostgresShop

SUPPORT = str(Path(deploykit.__file__).resolve().parent)
WORKER = ("--poll-seconds", "0.1", "--lease-seconds", "5", "--concurrency", "3")


@pytest.fixture
def shop(pg_url: str) -> Iterator[PostgresShop]:  # type: ignore[override]
    s = PostgresShop(pg_url).seed_demo()
    yield s
    s.close()


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:  # type: ignore[override]
    s = open_store(pg_url)
    yield s
    s.close()


@pytest.fixture
def fleet(pg_url: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_url, tmp_path, FLEET_SLEEP="0.02")
    yield f
    f.close()


def orders(shop: PostgresShop, first: int, n: int) -> list[tuple[str, str, int]]:
    """``n`` orders of distinct customers; every third above the approval limit."""
    out = []
    for i in range(first, first + n):
        price = 70_000 + 1_000 * i if i % 3 == 0 else 20_000 + 500 * i
        oid, customer = f"R-{3000 + i}", f"cust{i}"
        shop.add_order(oid, customer, f"item-{i}", f"item {i}", price, 3)
        out.append((oid, customer, price))
    return out


def submit(store: Store, shop: PostgresShop, release: str,
           batch: list[tuple[str, str, int]]) -> list[str]:
    """Create a run per order as ``fsm submit deploykit:WORKFLOW`` under ``release``."""
    engine = Engine(deploykit.release(release, shop), store)
    for oid, customer, _ in batch:
        engine.start(f"Order {oid}: it broke", user=customer, run_id=f"v{release}-{oid}",
                     drive=False, meta={"workflow_ref": "deploykit:WORKFLOW",
                                        "policy": "default"})
    return [f"v{release}-{oid}" for oid, _, _ in batch]


def settled(store: Store, run_ids: list[str]) -> bool:
    """Every run has ended or waits for a person."""
    return all(store.load_run(r).status in FINAL_STATUSES | {"awaiting_approval"}
               for r in run_ids)


def taken(log: str) -> set[str]:
    return set(re.findall(r"taken (\S+) \(", log))


def test_a_rolling_deploy_finishes_every_run_on_its_version(
        store: Store, shop: PostgresShop, fleet: Fleet) -> None:
    one, two = deploykit.v1(), deploykit.v2()
    first = orders(shop, 0, 9)
    old_runs = submit(store, shop, "1", first)
    old = [fleet.start(*WORKER, DEPLOY_RELEASE="1", PYTHONPATH=SUPPORT) for _ in range(2)]
    wait_for("release 1 to settle its runs", lambda: settled(store, old_runs), 90)

    # The deploy begins: release 2's code creates runs while only old workers are up.
    second = orders(shop, 9, 9)
    new_runs = submit(store, shop, "2", second)
    wait_for("an old worker to leave version 2 alone", lambda: all(
        "leaves runs of refund version 2" in fleet.log(w) for w in old), 30)
    time.sleep(1.0)  # ten polls: no old worker takes a run of version 2
    assert {store.load_run(r).step for r in new_runs} == {0}
    assert all(store.lease(r) is None for r in new_runs)

    new = [fleet.start(*WORKER, DEPLOY_RELEASE="2", PYTHONPATH=SUPPORT) for _ in range(2)]
    wait_for("release 2 to settle its runs", lambda: settled(store, new_runs), 90)
    for w in old:  # the old release goes away
        assert fleet.stop(w) == 0
    waiting = [r for r in old_runs + new_runs
               if store.load_run(r).status == "awaiting_approval"]
    assert {r.split("-")[0] for r in waiting} == {"v1", "v2"}
    decider = Engine(deploykit.release("2", shop), store)  # a person, on the new release
    for r in waiting:
        decider.decide(r, True, "supervisor", "receipt checked", drive=False)
    everything = old_runs + new_runs
    wait_for("every run to finish", lambda: all(
        store.load_run(r).status in FINAL_STATUSES for r in everything), 90)

    runs = {r: store.load_run(r) for r in everything}
    assert {r.status for r in runs.values()} == {"done"}
    assert {runs[r].definition_hash for r in old_runs} == {one.definition_hash}
    assert {runs[r].definition_hash for r in new_runs} == {two.definition_hash}
    paid = sorted((p["order_id"], p["amount_paise"]) for p in shop.ledger())
    assert paid == sorted((oid, price) for oid, _, price in first + second)  # once each
    assert len(shop.calls("refund")) == len(everything)
    old_logs, new_logs = [fleet.log(w) for w in old], [fleet.log(w) for w in new]
    assert not set().union(*map(taken, old_logs)) & set(new_runs)
    waited_v1 = {r for r in waiting if r.startswith("v1")}
    assert waited_v1 <= set().union(*map(taken, new_logs))  # new workers finish old runs
    clean = [r for r in everything if audit(store, r).ok]
    assert clean == everything, [audit(store, r).problems for r in everything]
    assert {c.definition_hash: c.runs for c in store.definition_counts("refund")} == {
        one.definition_hash: len(old_runs), two.definition_hash: len(new_runs)}
    for w in new:
        assert fleet.stop(w) == 0
    print(f"rolling deploy: {len(everything)} runs ({len(old_runs)} on version 1, "
          f"{len(new_runs)} on version 2; {len(waiting)} approved by a person), "
          f"{len(paid)} payments of {sum(a for _, a in paid)} paise, each once, "
          f"{len(clean)} of {len(everything)} audits clean; old workers took "
          f"{len(set().union(*map(taken, old_logs)))} runs, new workers "
          f"{len(set().union(*map(taken, new_logs)))}")
