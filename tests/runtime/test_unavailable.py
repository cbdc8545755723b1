"""An infrastructure error never ends a run, and is never a tool's answer.

A shop whose database fails for now (a pool timeout, a lost connection, a busy SQLite
file) under a refund: the step rolls back, the run stays ``running`` and is tried
again; the model never reads the error; the money moves once; no step of the budget is
spent on a failed try; after the bound the run is handed over, never ``failed``; the
count of tries holds across processes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import PoolTimeout

from fsm import Engine, SQLiteStore, Unavailable
from fsm.auditor.audit import audit
from fsm.definition.tools import ToolContext
from fsm.policy import Action, Usage, View
from fsm.records import RunState
from fsm.runtime.retry import Retry
from fsm.store.base import Store
from workflows.refund import Shop, build, clerk

KETTLE = "Order A-1001: the kettle arrived broken, please refund it"
NOW = Retry(tries=4, first=0.0, most=0.0)


class FlakyShop:
    """The shop, whose ``api`` fails ``times`` times with ``error()`` before it works."""

    def __init__(self, shop: Shop, api: str, times: int, error: Callable[[], Exception]):
        self.shop, self.api, self.left, self.error = shop, api, times, error
        self.failed = 0

    def get(self, ctx: ToolContext) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.shop, name)
        if name != self.api:
            return real

        def flaky(*args: Any, **kwargs: Any) -> Any:
            if self.left != 0:
                self.left -= 1
                self.failed += 1
                raise self.error()
            return real(*args, **kwargs)

        return flaky


class Costly:
    """The clerk, each answer costing 100 tokens and 7 micros."""

    def __call__(self, view: View) -> Any:
        action = clerk(view)
        action = action if isinstance(action, Action) else Action.model_validate(action)
        return action.model_copy(update={"usage": Usage(input_tokens=80, output_tokens=20,
                                                        cost_micros=7)})


def drive(engine: Engine, run_id: str, *, start: bool = True) -> tuple[RunState, list[str]]:
    """Start (or resume) the run and resume it after every Unavailable, as a worker does."""
    said: list[str] = []
    call: Callable[[], RunState] = (
        (lambda: engine.start(KETTLE, user="asha", run_id=run_id)) if start
        else (lambda: engine.resume(run_id)))
    for _ in range(20):
        try:
            return call(), said
        except Unavailable as exc:
            said.append(str(exc))
            call = lambda: engine.resume(run_id)  # noqa: E731
    raise AssertionError(f"still unavailable after 20 tries: {said}")


def clean_run(shop: Shop) -> RunState:
    store = SQLiteStore(":memory:")
    run = Engine(build(shop), store, Costly()).start(KETTLE, user="asha", run_id="ref")
    assert run.status == "done"
    return run


#: A write's first failed try asked the model (7 micros); its claim is then recovered,
#: without asking. A read's step is asked again on every try.
@pytest.mark.parametrize("api, error, lost", [
    pytest.param("pay", lambda: PoolTimeout("couldn't get a connection after 10.00 sec"),
                 [7, 0], id="gateway-pool-timeout"),
    pytest.param("order", lambda: sqlite3.OperationalError("database is locked"),
                 [7, 7], id="read-database-locked"),
    pytest.param("send", lambda: Unavailable("outbox: connection lost"),
                 [7, 0], id="declared-unavailable"),
])
def test_an_infrastructure_error_is_retried_not_answered(
        tmp_path: Path, api: str, error: Callable[[], Exception], lost: list[int]) -> None:
    path = str(tmp_path / "runs.db")
    with Shop(path) as shop, SQLiteStore(path) as store:
        shop.seed_demo()
        flaky = FlakyShop(shop, api, 2, error)
        engine = Engine(build(flaky), store, Costly(), retry=NOW)
        run, said = drive(engine, "r")
        assert run.status == "done", run.reason
        assert flaky.failed == 2 and len(said) == 2
        assert "try 1 of 4" in said[0] and "try 2 of 4" in said[1]
        # Paid once; the model never read the error.
        assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [
            ("A-1001", 35_000)]
        transcript = str(store.messages("r"))
        assert type(error()).__name__ not in transcript and "error" not in transcript
        events = store.events("r")
        faults = [e for e in events if e.kind == "unavailable"]
        assert [e.detail["tries"] for e in faults] == [1, 2]
        assert all(type(error()).__name__ in (e.reason or "") for e in faults)
        # No step of the budget went on the failed tries; what their model calls cost
        # is counted all the same.
        ref = clean_run(Shop().seed_demo())
        assert run.used.steps == ref.used.steps
        assert [e.cost_micros for e in faults] == lost
        assert run.used.cost_micros == sum(e.cost_micros for e in events)
        assert run.unavailable == 0
        assert audit(store, "r").ok, audit(store, "r").problems


def test_after_the_bound_the_run_is_handed_over_never_failed(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with Shop(path) as shop, SQLiteStore(path) as store:
        shop.seed_demo()
        flaky = FlakyShop(shop, "pay", -1, lambda: PoolTimeout("pool exhausted"))
        run, said = drive(Engine(build(flaky), store, clerk, retry=NOW), "r")
        assert (run.status, run.state) == ("handed_over", "refunding")
        assert run.reason == ("the infrastructure failed 4 tries in a row: refund_item: "
                              "PoolTimeout: pool exhausted")
        assert len(said) == 3 and flaky.failed == 4
        (handover,) = store.run_handovers("r")
        assert handover.cause == "unavailable" and "PoolTimeout" in handover.reason
        assert shop.ledger() == []
        assert run.used.steps == 5  # the five steps to refunding; the failed tries none
        assert audit(store, "r").ok, audit(store, "r").problems


def test_the_count_of_tries_holds_across_processes(tmp_path: Path) -> None:
    """Each try in a new engine on a new connection, as separate processes would."""
    path = str(tmp_path / "runs.db")
    with Shop(path) as shop:
        shop.seed_demo()
        flaky = FlakyShop(shop, "order", -1, lambda: sqlite3.OperationalError(
            "database is locked"))
        tries = []
        for n in range(4):
            with SQLiteStore(path) as store:
                engine = Engine(build(flaky), store, clerk, retry=NOW)
                try:
                    run = engine.start(KETTLE, user="asha", run_id="r") if n == 0 \
                        else engine.resume("r")
                except Unavailable as exc:
                    tries.append(exc.tries)
                    continue
        assert tries == [1, 2, 3]
        assert (run.status, run.used.steps) == ("handed_over", 0)


def test_a_run_backing_off_stays_leased_until_its_next_try(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with Shop(path) as shop, SQLiteStore(path) as store:
        shop.seed_demo()
        flaky = FlakyShop(shop, "order", 1, lambda: PoolTimeout("pool exhausted"))
        clock = [1000.0]
        engine = Engine(build(flaky), store, clerk, clock=lambda: clock[0],
                        retry=Retry(tries=3, first=40.0, most=40.0))
        with pytest.raises(Unavailable) as caught:
            engine.start(KETTLE, user="asha", run_id="r")
        assert caught.value.retry_in is not None and 20.0 <= caught.value.retry_in <= 40.0
        lease = store.lease("r")
        assert lease is not None and lease.owner == engine.owner
        assert lease.until == pytest.approx(1000.0 + caught.value.retry_in)
        assert store.claim_runnable("other:1:x", 1000.0 + 19, 30.0) == []
        assert [c.run_id for c in store.claim_runnable(
            "other:1:x", 1000.0 + 41, 30.0)] == ["r"]


def test_a_commit_the_database_refuses_for_now_is_retried(tmp_path: Path) -> None:
    """The store itself failing for now (its busy timeout passed) at a step's commit."""
    path = str(tmp_path / "runs.db")

    class Busy(SQLiteStore):
        left = 2

        def commit(self, commit: Any) -> RunState:
            if commit.events and commit.events[0].kind == "policy" and self.left:
                self.left -= 1
                blocker = sqlite3.connect(path, isolation_level=None)
                blocker.execute("BEGIN IMMEDIATE")
                try:
                    return super().commit(commit)
                finally:
                    blocker.execute("ROLLBACK")
                    blocker.close()
            return super().commit(commit)

    with Shop(path) as shop, Busy(path, busy_timeout_ms=50) as store:
        shop.seed_demo()
        store_: Store = store
        run, said = drive(Engine(build(shop), store_, clerk, retry=NOW), "r")
        assert run.status == "done" and len(said) == 2
        assert "waited 0.05s for another process's lock on the database" in said[0]
        assert len(shop.ledger()) == 1
        assert audit(store, "r").ok, audit(store, "r").problems


def test_a_decision_stands_when_the_next_step_fails_for_now(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with Shop(path) as shop, SQLiteStore(path) as store:
        shop.seed_demo()
        flaky = FlakyShop(shop, "pay", 1, lambda: PoolTimeout("pool exhausted"))
        engine = Engine(build(flaky), store, clerk, retry=NOW)
        run = engine.start("Order A-1002: my headphones died", user="ravi", run_id="big")
        assert run.status == "awaiting_approval"
        run = engine.decide("big", True, "priya", "receipt checked")
        assert (run.status, run.state) == ("running", "refunding")  # decided; tried later
        (approval,) = store.approvals("big", pending_only=False)
        assert (approval.decision, approval.reviewer) == ("approved", "priya")
        assert shop.ledger() == []
        run = engine.resume("big")
        assert run.status == "done"
        assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [
            ("A-1002", 180_000)]
        assert audit(store, "big").ok, audit(store, "big").problems
