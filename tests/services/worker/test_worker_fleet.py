"""A fleet of real ``fsm worker`` processes on one PostgreSQL database.

Each test starts worker processes, submits refund runs, and interferes for real:
two workers racing, SIGSTOP past the lease and SIGCONT, ``pg_terminate_backend``
of a worker's sessions, SIGTERM. The outcome is read from the database: the
gateway's ledger and calls, the runs, their leases and their audited logs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fleetkit import Fleet, driving, wait_for

from fsm import Engine, open_store
from fsm.auditor.audit import audit
from fsm.records import FINAL_STATUSES
from fsm.store import Store
from workflows.refund import build
from workflows.refund.shop import PostgresShop

LEASE = "2"


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
    f = Fleet(pg_url, tmp_path)
    yield f
    f.close()


def submit(store: Store, shop: PostgresShop, run_id: str, goal: str, user: str) -> None:
    """Create a run for the workers, as ``fsm submit`` does."""
    Engine(build(shop), store).start(goal, user=user, run_id=run_id, drive=False,
                                     meta={"workflow_ref": "refund", "policy": "default"})


def add_orders(shop: PostgresShop, n: int, *, large_every: int = 0) -> list[tuple[str, str, int]]:
    """``n`` orders of distinct customers: (order id, customer, price); every
    ``large_every``-th one above the approval limit."""
    out = []
    for i in range(n):
        large = large_every and i % large_every == 0
        price = 60_000 + 1_000 * i if large else 20_000 + 500 * i
        oid, customer = f"B-{2000 + i}", f"cust{i}"
        shop.add_order(oid, customer, f"item-{i}", f"item {i}", price, 3)
        out.append((oid, customer, price))
    return out


def finished(store: Store, *run_ids: str) -> bool:
    return all(store.load_run(r).status in FINAL_STATUSES for r in run_ids)


def assert_audits_clean(store: Store) -> None:
    for run in store.list_runs():
        report = audit(store, run.run_id)
        assert report.ok, (run.run_id, report.problems)


# -- claiming ------------------------------------------------------------------------------

def test_concurrent_claims_never_hand_out_a_run_twice(store: Store, shop: PostgresShop,
                                                      pg_url: str) -> None:
    for i in range(30):
        submit(store, shop, f"r{i}", "Order A-1001: broken kettle", "asha")
    got: dict[int, list[str]] = {n: [] for n in range(3)}
    barrier = threading.Barrier(3)
    deadline = time.monotonic() + 120  # only bounds a failure

    def claim(n: int) -> None:
        # Each claimer goes on until all 30 are handed out (a claim that finds the free
        # rows locked by another's transaction skips them and gets fewer, or none).
        s = open_store(pg_url)
        try:
            barrier.wait()
            while sum(map(len, got.values())) < 30 and time.monotonic() < deadline:
                got[n] += [c.run_id for c in
                           s.claim_runnable(f"host{n}.example:{n}:x", 1000.0, 30.0, limit=2)]
        finally:
            s.close()

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [r for runs in got.values() for r in runs]
    assert sorted(everything) == sorted(f"r{i}" for i in range(30))  # each exactly once
    for n, runs in got.items():
        # Each run's lease is its claimer's. (Which claimer gets how many is not promised:
        # on a busy machine one may find every row taken before its first try.)
        assert all(store.lease(r).owner == f"host{n}.example:{n}:x"  # type: ignore[union-attr]
                   for r in runs), (n, runs)


def test_two_workers_race_for_one_run_and_exactly_one_drives_it(
        store: Store, shop: PostgresShop, fleet: Fleet) -> None:
    submit(store, shop, "race", "Order A-1001: the kettle arrived broken", "asha")
    workers = [fleet.start("--policy", "fleetkit:sleepy_clerk", "--poll-seconds", "0.1",
                           FLEET_SLEEP="0.1") for _ in range(2)]
    wait_for("the run to finish", lambda: finished(store, "race"), 60)
    # The worker says so after its last commit has landed and its lease is given back.
    wait_for("a worker to say it finished the run",
             lambda: any("finished race (done)" in fleet.log(w) for w in workers), 30)
    logs = [fleet.log(w) for w in workers]
    assert sum(log.count("taken race") for log in logs) == 1, logs
    assert sum(log.count("finished race (done)") for log in logs) == 1, logs
    events = store.events("race")
    assert [e.kind for e in events].count("start") == 1
    assert "takeover" not in [e.kind for e in events]
    assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [("A-1001", 35_000)]
    assert len(shop.calls("refund")) == 1
    assert store.lease("race") is None
    assert_audits_clean(store)


# -- fencing -------------------------------------------------------------------------------

@pytest.mark.parametrize("state, refused", [
    pytest.param("refunding", "write", id="paused-before-the-payment"),
    pytest.param("verifying", "commit", id="paused-before-a-commit"),
])
@pytest.mark.parametrize("kind", ["threads", "async", "async-loop"])
def test_a_worker_paused_past_its_lease_can_neither_write_nor_commit(
        store: Store, shop: PostgresShop, fleet: Fleet, tmp_path: Path, state: str,
        refused: str, kind: str) -> None:
    submit(store, shop, "frozen", "Order A-1001: the kettle arrived broken", "asha")
    marker = tmp_path / "marker"
    a = fleet.start(*driving(kind, "marked_clerk"), "--lease-seconds", LEASE,
                    "--poll-seconds", "0.1", FLEET_SLOW_STATE=state, FLEET_MARKER=str(marker),
                    FLEET_SLOW_SECONDS="5")
    wait_for(f"worker A to reach {state}", marker.exists, 120)
    a.send_signal(signal.SIGSTOP)
    a_owner = store.lease("frozen").owner  # type: ignore[union-attr]
    b = fleet.start("--policy", "fleetkit:sleepy_clerk", "--lease-seconds", LEASE,
                    "--poll-seconds", "0.1", FLEET_SLEEP="0.01")
    wait_for("worker B to finish the run", lambda: finished(store, "frozen"), 120)
    assert f"taken frozen (refund) from {a_owner}" in fleet.log(b)
    a.send_signal(signal.SIGCONT)
    wait_for("worker A to drop the run", lambda: "dropped frozen" in fleet.log(a), 120)
    line = next(x for x in fleet.log(a).splitlines() if "dropped frozen" in x)
    assert "lease lost to" in line and "refused" in line, line
    assert "finished frozen" not in fleet.log(a)
    run = store.load_run("frozen")
    assert (run.status, run.state) == ("done", "done")
    # Paid once, by B: A's write never reached the gateway, and A's step never landed.
    assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [("A-1001", 35_000)]
    assert len(shop.calls("refund")) == 1
    assert [e.kind for e in store.events("frozen")].count("stop") == 1
    assert_audits_clean(store)
    assert a.poll() is None, "the paused worker survives losing a run"
    assert fleet.stop(a) == 0 and fleet.stop(b) == 0


@pytest.mark.parametrize("kind", ["threads", "async", "async-loop"])
def test_a_worker_whose_sessions_are_terminated_survives_and_the_runs_finish(
        store: Store, shop: PostgresShop, fleet: Fleet, pg_url: str, kind: str) -> None:
    orders = add_orders(shop, 6)
    for oid, customer, _ in orders:
        submit(store, shop, f"t-{oid}", f"Order {oid}: it broke", customer)
    w = fleet.start(*driving(kind, "sleepy_clerk"), "--lease-seconds", LEASE,
                    "--poll-seconds", "0.1", "--concurrency", "6", FLEET_SLEEP="0.1")
    fleet.started(w)
    terminated = 0
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for _ in range(40):
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s", (f"fsm-{w.pid}",)).fetchall()
            terminated += len(rows)
            threading.Event().wait(0.05)
    assert terminated > 0
    run_ids = [f"t-{oid}" for oid, _, _ in orders]
    wait_for("every run to finish", lambda: finished(store, *run_ids), 90)
    assert w.poll() is None, fleet.log(w)
    paid = sorted((p["order_id"], p["amount_paise"]) for p in shop.ledger())
    assert paid == sorted((oid, price) for oid, _, price in orders)
    assert {store.load_run(r).status for r in run_ids} == {"done"}
    assert_audits_clean(store)
    assert fleet.stop(w) == 0


# -- stopping ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["threads", "async", "async-loop"])
def test_sigterm_finishes_the_current_steps_releases_the_leases_and_exits(
        store: Store, shop: PostgresShop, fleet: Fleet, kind: str) -> None:
    orders = add_orders(shop, 3)
    run_ids = [f"s-{oid}" for oid, _, _ in orders]
    for (oid, customer, _), run_id in zip(orders, run_ids, strict=True):
        submit(store, shop, run_id, f"Order {oid}: it broke", customer)
    w = fleet.start(*driving(kind, "sleepy_clerk"), "--poll-seconds", "0.1",
                    FLEET_SLEEP="0.4")
    wait_for("the worker to take every run",
             lambda: all(f"taken {r}" in fleet.log(w) for r in run_ids), 60)
    assert fleet.stop(w) == 0
    log = fleet.log(w)
    assert log.rstrip().endswith("stopped"), log
    assert sum(f"released {r} (stopping)" in log for r in run_ids) == 3, log
    for r in run_ids:
        run = store.load_run(r)
        assert run.status == "running" and 0 < run.step < 7
        assert store.lease(r) is None  # released: resumable at once, by anyone
    other = fleet.start("--policy", "fleetkit:sleepy_clerk", "--poll-seconds", "0.1",
                        FLEET_SLEEP="0.01")
    wait_for("a new worker to finish them", lambda: finished(store, *run_ids), 60)
    assert sorted(p["order_id"] for p in shop.ledger()) == sorted(o for o, _, _ in orders)
    assert_audits_clean(store)
    assert fleet.stop(other) == 0


# -- approvals -----------------------------------------------------------------------------

def test_expiry_sweeps_racing_approvals_decide_each_approval_once(
        store: Store, shop: PostgresShop, fleet: Fleet, pg_url: str) -> None:
    spec = build(shop)
    orders = add_orders(shop, 8, large_every=1)
    from workflows.refund import clerk

    engine = Engine(spec, store, clerk)
    run_ids = []
    for oid, customer, _ in orders:
        run = engine.start(f"Order {oid}: it broke", user=customer, run_id=f"a-{oid}",
                           meta={"workflow_ref": "refund", "policy": "default"})
        assert run.status == "awaiting_approval"
        run_ids.append(run.run_id)
    late = str(spec.approval_ttl_seconds + 60)  # the workers see every approval expired
    workers = [fleet.start("--poll-seconds", "0.1", "--sweep-seconds", "0.1",
                           "--lease-seconds", LEASE, FSM_CLOCK_OFFSET=late) for _ in range(2)]
    refusals: list[str] = []
    approver = Engine(spec, store, clerk)
    for run_id in run_ids:  # racing the sweepers, on the real clock
        try:
            approver.decide(run_id, True, "priya", "ok", drive=False)
        except Exception as exc:  # noqa: BLE001 - every refusal must be one of these
            refusals.append(type(exc).__name__)
    wait_for("every run to finish", lambda: finished(store, *run_ids), 90)
    assert set(refusals) <= {"ApprovalAlreadyDecided", "ApprovalExpired", "RunLocked",
                             "ConcurrentUpdate", "LeaseLost", "InvalidRunState",
                             "NothingPending"}, refusals
    paid = {p["order_id"]: p["amount_paise"] for p in shop.ledger()}
    for (oid, _, price), run_id in zip(orders, run_ids, strict=True):
        (decided,) = store.approvals(run_id, pending_only=False)
        run = store.load_run(run_id)
        if decided.decision == "approved":
            assert (run.status, paid.get(oid)) == ("done", price)
        else:
            assert decided.decision == "expired"
            assert run.status == "handed_over" and oid not in paid
    logs = "".join(fleet.log(w) for w in workers)
    for run_id in run_ids:
        assert logs.count(f"expired {run_id}'s approval") <= 1
    assert len(shop.calls("refund")) == len(paid)
    assert_audits_clean(store)
    for w in workers:
        assert fleet.stop(w) == 0


def test_the_ledger_command_reads_the_shop_in_postgres(shop: PostgresShop, pg_url: str) -> None:
    shop.pay("k:1", "A-1001", "kettle-1", 35_000)
    out = subprocess.run([sys.executable, "-m", "workflows.refund", "ledger", "--db", pg_url,
                          "--json"], capture_output=True, text=True, check=True)
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    assert [(r["order_id"], r["amount_paise"], r["idempotency_key"]) for r in rows] == [
        ("A-1001", 35_000, "k:1")]
    bad = subprocess.run([sys.executable, "-m", "workflows.refund", "ledger", "--db",
                          pg_url.replace("fsm_test_", "fsm_nope_")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: cannot read the ledger in")
