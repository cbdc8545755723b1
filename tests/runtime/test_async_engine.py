"""The async engine drives the engine's own rules from an event loop: a refund ends as the
synchronous engine ends it, an approval and a customer's reply go on from ``await``, a
run waiting on its model holds no thread, and a process killed in the middle of a step
is resumed by a new one with the refund paid once. Each on SQLite (the store's work in
the engine's threads) and on PostgreSQL (the steps on the loop, their statements awaited
through psycopg's async pool)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_desk import Ledger
from chat_desk import build as build_chat
from crashkit import Child

from fsm import AsyncEngine, Engine, MemoryStore, SQLiteStore
from fsm._bridge import bridged
from fsm.auditor.audit import audit
from fsm.errors import EngineClosed, RunNotFound
from fsm.observability.hooks import CommitInfo, Hooks
from fsm.policy import View
from fsm.runtime.driving import AsyncPolicyCalledSync
from fsm.sandbox.replay import replay_async
from fsm.store.base import Store
from fsm.store.postgres import PostgresDatabase, PostgresStore
from fsm.testing import ScriptedPolicy, state_path
from workflows.refund import Shop, build, clerk
from workflows.refund.shop import PostgresShop

SMALL = "Order A-1001: the kettle arrived broken, please refund it"
LARGE = "Order A-1002: my headphones stopped working, I want my money back"


async def async_clerk(view: View) -> Any:
    """The rule-based clerk, answering from the event loop as a model client would."""
    await asyncio.sleep(0)
    return clerk(view)


class Gathering:
    """An async policy that holds every caller until ``expected`` of them wait at once
    (or the deadline, which only bounds a failure); ``most`` is how many waited at once."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.waiting = 0
        self.most = 0
        self.threads: set[int] = set()
        self._all_in: asyncio.Event | None = None

    async def __call__(self, view: View) -> Any:
        if self._all_in is None:
            self._all_in = asyncio.Event()
        self.threads.add(threading.get_ident())
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        if self.waiting >= self.expected:
            self._all_in.set()
        try:
            await asyncio.wait_for(self._all_in.wait(), 120)
        except TimeoutError:
            pass
        self.waiting -= 1
        return clerk(view)


def _desk(tmp_path: Path) -> tuple[SQLiteStore, Shop, str]:
    db = str(tmp_path / "runs.db")
    return SQLiteStore(db), Shop(db).seed_demo(), db


def _opened(db: str) -> tuple[Store, Any]:
    """The store and the shop of ``db``: a SQLite file, or a PostgreSQL URL."""
    if db.startswith("postgresql:"):
        return PostgresStore(db), PostgresShop(db)
    return SQLiteStore(db), Shop(db)


@pytest.fixture(params=["sqlite", "postgres", "postgres-on-loop"])
def kind(request: pytest.FixtureRequest) -> str:
    """SQLite (the store's work in the engine's threads), PostgreSQL the same way, or
    PostgreSQL with the steps on the loop (``store_on_loop``: psycopg's async pool)."""
    return str(request.param)


@pytest.fixture
def on_loop(kind: str) -> bool:
    return kind == "postgres-on-loop"


@pytest.fixture
def where(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> str:
    """Where the runs and the shop live: a SQLite file, or a fresh PostgreSQL schema."""
    if kind == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def desk(where: str) -> Iterator[tuple[Store, Any]]:
    """A store and a seeded shop in the same database."""
    store, shop = _opened(where)
    shop.seed_demo()
    try:
        yield store, shop
    finally:
        store.close()
        shop.close()


class Committers(Hooks):
    """Where each step's commit landed from (not the run's creation): the thread, and
    whether the step ran on the loop through the store's async pool."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.threads: set[int] = set()
        self.through_async_pool: set[bool] = set()

    def after_commit(self, commit: CommitInfo) -> None:
        if not commit.initial:
            self.threads.add(threading.get_ident())
            db = getattr(self.store, "db", None)
            self.through_async_pool.add(
                bridged() and isinstance(db, PostgresDatabase) and db._async_pool() is not None)


def _ledger(shop: Any) -> list[tuple[Any, ...]]:
    return [(p["order_id"], p["item_id"], p["amount_paise"]) for p in shop.ledger()]


def test_a_small_refund_ends_as_the_synchronous_engine_ends_it(
        tmp_path: Path, desk: tuple[Store, Any], on_loop: bool) -> None:
    (tmp_path / "sync").mkdir()
    sync_store, sync_shop, _ = _desk(tmp_path / "sync")
    expected = Engine(build(sync_shop), sync_store, clerk).start(SMALL, user="asha",
                                                                  run_id="r")
    store, shop = desk
    committers = Committers(store)

    async def main() -> tuple[Any, int]:
        async with AsyncEngine(build(shop), store, async_clerk, hooks=[committers],
                               store_on_loop=on_loop) as engine:
            return await engine.start(SMALL, user="asha", run_id="r"), threading.get_ident()

    run, loop_thread = asyncio.run(main())
    assert (run.status, run.state, run.step) == (expected.status, expected.state,
                                                 expected.step) == ("done", "done", 7)
    if on_loop:
        # Every step was committed from the loop's own thread, through the async pool.
        assert committers.threads == {loop_thread}
        assert committers.through_async_pool == {True}
    else:
        assert loop_thread not in committers.threads  # in the engine's threads
        assert committers.through_async_pool == {False}
    assert state_path(store, "r") == state_path(sync_store, "r")
    assert _ledger(shop) == _ledger(sync_shop) == [("A-1001", "kettle-1", 35_000)]
    assert [m.get("tool") for m in store.messages("r")] == [
        m.get("tool") for m in sync_store.messages("r")]
    assert audit(store, "r").ok
    assert store.lease("r") is None


def test_an_approval_decided_with_await_pays_the_large_refund_once(
        desk: tuple[Store, Any], on_loop: bool) -> None:
    store, shop = desk

    async def main() -> tuple[Any, Any]:
        async with AsyncEngine(build(shop), store, async_clerk, store_on_loop=on_loop) as engine:
            paused = await engine.start(LARGE, user="ravi", run_id="big")
            assert _ledger(shop) == []
            return paused, await engine.decide("big", True, "priya", "receipt checked")

    paused, run = asyncio.run(main())
    assert (paused.status, paused.state) == ("awaiting_approval", "awaiting_approval")
    assert (run.status, run.state) == ("done", "done")
    assert _ledger(shop) == [("A-1002", "headphones-1", 180_000)]
    (approval,) = store.approvals("big", pending_only=False)
    assert (approval.decision, approval.reviewer) == ("approved", "priya")
    assert audit(store, "big").ok


def test_runs_that_wait_on_their_model_hold_no_thread(desk: tuple[Store, Any],
                                                      on_loop: bool) -> None:
    """Twenty runs all wait on the model at once through an engine of two threads."""
    store, shop = desk
    for i in range(20):
        shop.add_order(f"B-{i:04d}", f"u{i}", f"it-{i}", "item", 30_000, 2)
    policy = Gathering(expected=20)

    async def main() -> list[Any]:
        async with AsyncEngine(build(shop), store, policy, threads=2,
                               store_on_loop=on_loop) as engine:
            return await asyncio.gather(*[
                engine.start(f"Order B-{i:04d}: broken", user=f"u{i}", run_id=f"r{i}")
                for i in range(20)])

    runs = asyncio.run(main())
    assert {r.status for r in runs} == {"done"}
    assert policy.most == 20  # every run waited on its model at the same moment
    assert len(policy.threads) == 1  # the loop's own thread
    assert sorted(p[0] for p in _ledger(shop)) == [f"B-{i:04d}" for i in range(20)]
    assert all(audit(store, f"r{i}").ok for i in range(20))


def test_a_customer_s_reply_goes_on_from_await(desk: tuple[Store, Any], on_loop: bool) -> None:
    ledger, store = Ledger(), desk[0]
    args = {"order_id": "A-1001", "reason": "no longer needed"}
    policy = ScriptedPolicy([
        {"final": "Which order would you like to cancel?"},
        {"tool": "get_order", "args": {"order_id": "A-1001"}},
        {"tool": "advance", "text": "Cancel it? (yes/no)",
         "args": {"event": "propose", "tool": "cancel_order", "args": args}},
        {"tool": "cancel_order", "args": args},
        {"tool": "advance", "args": {"event": "nothing_to_do"}}])

    async def main() -> list[Any]:
        async with AsyncEngine(build_chat(ledger), store, policy, store_on_loop=on_loop) as engine:
            talk = await engine.start_conversation("I want to cancel an order", user="asha")
            asked = talk.run
            proposed = await engine.reply(asked.run_id, "A-1001", token=talk.token)
            done = await engine.reply(asked.run_id, "yes", token=talk.token)
            return [asked, proposed, done]

    asked, proposed, done = asyncio.run(main())
    assert (asked.status, proposed.status, done.status) == (
        "awaiting_customer", "awaiting_customer", "done")
    assert [(e["order_id"], e["reason"]) for e in ledger.entries()] == [
        ("A-1001", "no longer needed")]
    assert [e.event for e in store.events(done.run_id) if e.kind == "reply"] == [
        None, "confirmed"]
    assert audit(store, done.run_id).ok


def test_leaving_the_steps_early_gives_the_lease_back_and_the_run_goes_on_later(
        desk: tuple[Store, Any], on_loop: bool) -> None:
    store, shop = desk

    async def main() -> tuple[list[int], Any, Any]:
        async with AsyncEngine(build(shop), store, async_clerk, store_on_loop=on_loop) as engine:
            await engine.start(SMALL, user="asha", run_id="r", drive=False)
            seen = []
            async with contextlib.aclosing(engine.steps("r")) as steps:
                async for outcome in steps:
                    seen.append(outcome.run.step)
                    if outcome.run.step == 3:
                        break
            held = store.lease("r")
            one = await engine.step("r")
            return seen, held, (one, await engine.resume("r"))

    seen, held, (one, run) = asyncio.run(main())
    assert seen == [1, 2, 3] and held is None
    assert one is not None and one.run.step == 4
    assert run.status == "done" and _ledger(shop) == [("A-1001", "kettle-1", 35_000)]


def test_a_run_cancelled_while_its_model_thinks_is_let_go_and_resumed(
        desk: tuple[Store, Any], on_loop: bool) -> None:
    store, shop = desk
    asked = asyncio.Event

    async def main() -> Any:
        thinking = asked()

        async def slow(view: View) -> Any:
            if view.step == 6:  # refund_item: cancelled before the model answers
                thinking.set()
                await asyncio.sleep(3600)
            return clerk(view)

        async with AsyncEngine(build(shop), store, slow, store_on_loop=on_loop) as engine:
            task = asyncio.create_task(engine.start(SMALL, user="asha", run_id="r"))
            await thinking.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert store.lease("r") is None  # let go, not left until it expires
            assert store.load_run("r").step == 5
        async with AsyncEngine(build(shop), store, async_clerk, store_on_loop=on_loop) as engine:
            return await engine.resume("r")

    run = asyncio.run(main())
    assert run.status == "done" and _ledger(shop) == [("A-1001", "kettle-1", 35_000)]
    assert audit(store, "r").ok


def test_closing_the_engine_mid_step_finishes_the_step_and_lets_the_run_go(
        desk: tuple[Store, Any], on_loop: bool) -> None:
    """``aclose()`` while a run's model thinks: the model's answer is still carried out
    (the refund is paid, and its commit lands), then the run is let go at that commit and
    the engine closes; nothing it has not begun begins, and a later engine finishes the
    run, paying nothing twice."""
    store, shop = desk

    async def main() -> tuple[Any, Any, str]:
        thinking, answer = asyncio.Event(), asyncio.Event()

        async def slow(view: View) -> Any:
            if view.step == 6:  # the model is about to ask for refund_item
                thinking.set()
                await answer.wait()
            return clerk(view)

        engine = AsyncEngine(build(shop), store, slow, store_on_loop=on_loop)
        task = asyncio.create_task(engine.start(SMALL, user="asha", run_id="r"))
        await thinking.wait()
        closing = asyncio.create_task(engine.aclose())
        await asyncio.sleep(0.1)
        assert not closing.done(), "aclose() did not wait for the step in flight"
        with pytest.raises(EngineClosed, match="closed"):
            await engine.start(SMALL, user="asha", run_id="late")
        answer.set()
        stopped = await asyncio.wait_for(task, 60)
        await asyncio.wait_for(closing, 60)
        with pytest.raises(EngineClosed, match="make a new one"):
            await engine.resume("r")
        async with AsyncEngine(build(shop), store, async_clerk,
                               store_on_loop=on_loop) as again:
            return stopped, await again.resume("r"), str(store.lease("r"))

    stopped, finished, lease = asyncio.run(main())
    assert stopped.status == "running" and stopped.step == 6, (stopped.status, stopped.step)
    assert finished.status == "done" and lease == "None"
    assert _ledger(shop) == [("A-1001", "kettle-1", 35_000)]
    errors = [e for e in store.events("r") if e.kind == "tool" and e.detail.get("error")]
    assert errors == [], errors
    with pytest.raises(RunNotFound):
        store.load_run("late")
    assert audit(store, "r").ok


def test_closing_the_engine_while_its_caller_holds_the_steps_ends_them_at_the_next_turn(
        desk: tuple[Store, Any], on_loop: bool) -> None:
    """A caller between two of ``engine.steps()``'s outcomes holds no work under way:
    ``aclose()`` does not wait for it, and the caller's next turn ends the steps, gives
    the lease back and lets the engine's threads go."""
    store, shop = desk

    async def main() -> tuple[int, list[Any], str]:
        engine = AsyncEngine(build(shop), store, async_clerk, store_on_loop=on_loop)
        await engine.start(SMALL, user="asha", run_id="r", drive=False)
        steps = engine.steps("r")
        first = await anext(steps)
        await asyncio.wait_for(engine.aclose(), 30)
        held = str(store.lease("r"))
        rest = [o async for o in steps]
        assert store.lease("r") is None and engine._pool._shutdown  # type: ignore[attr-defined]
        return first.run.step, rest, held

    step, rest, held = asyncio.run(main())
    assert step == 1 and rest == [] and held != "None"
    assert store.load_run("r").step == 1 and _ledger(shop) == []


def test_a_second_aclose_and_one_after_a_cancelled_first_wait_for_the_same_closing(
        tmp_path: Path) -> None:
    store, shop, _ = _desk(tmp_path)

    async def main() -> tuple[bool, bool, str]:
        thinking, answer = asyncio.Event(), asyncio.Event()

        async def slow(view: View) -> Any:
            if view.step == 6:
                thinking.set()
                await answer.wait()
            return clerk(view)

        engine = AsyncEngine(build(shop), store, slow)
        drive = asyncio.create_task(engine.start(SMALL, user="asha", run_id="r"))
        await thinking.wait()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(engine.aclose(), 0.2)  # the first gives up waiting
        second = asyncio.create_task(engine.aclose())
        third = asyncio.create_task(engine.aclose())
        await asyncio.sleep(0.1)
        waited = not second.done() and not third.done()
        answer.set()
        await asyncio.wait_for(asyncio.gather(second, third), 60)
        stopped = await drive
        return waited, engine._shut, stopped.status  # type: ignore[attr-defined]

    try:
        waited, shut, status = asyncio.run(main())
    finally:
        store.close()
    assert waited, "a later aclose returned before the closing it joined had ended"
    assert shut and status == "running"
    assert _ledger(shop) == [("A-1001", "kettle-1", 35_000)]


class HeldCreation(Hooks):
    """Holds the commit that creates a run until the test lets it land."""

    def __init__(self) -> None:
        self.inside, self.go = threading.Event(), threading.Event()

    def after_commit(self, commit: CommitInfo) -> None:
        if commit.initial:
            self.inside.set()
            assert self.go.wait(30)


def test_aclose_waits_for_a_start_under_way_which_gives_back_its_run_undriven(
        tmp_path: Path) -> None:
    """A run created while ``aclose()`` begins is given back as created, not driven, and
    ``aclose`` waits for it; a read is still answered while it waits."""
    store, shop, _ = _desk(tmp_path)
    held = HeldCreation()

    async def main() -> tuple[Any, bool, Any]:
        engine = AsyncEngine(build(shop), store, async_clerk, hooks=[held])
        starting = asyncio.create_task(engine.start(SMALL, user="asha", run_id="r"))
        await asyncio.to_thread(held.inside.wait, 30)
        closing = asyncio.create_task(engine.aclose())
        await asyncio.sleep(0.1)
        waited = not closing.done()
        read = await engine.load("r")  # a read is answered while aclose waits
        held.go.set()
        run = await asyncio.wait_for(starting, 60)
        await asyncio.wait_for(closing, 60)
        return run, waited, read

    try:
        run, waited, read = asyncio.run(main())
        assert [r.run_id for r in store.list_runs()] == ["r"]
    finally:
        store.close()
    assert waited, "aclose did not wait for the start under way"
    assert (run.status, run.step) == ("running", 0) and read.step == 0
    assert _ledger(shop) == []


class GatedShop(PostgresShop):
    """A shop whose lookup of order A-1001 waits until :attr:`go` is set; it records each
    order looked up."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.inside, self.go = threading.Event(), threading.Event()
        self.looked_up: list[str] = []
        self.gave_up = False

    def order(self, order_id: str) -> Any:
        self.looked_up.append(order_id)
        if order_id == "A-1001":
            self.inside.set()
            self.gave_up = self.gave_up or not self.go.wait(60)
        return super().order(order_id)


def test_a_run_cancelled_while_it_waits_for_a_connection_never_begins_its_step(
        pg_url: str) -> None:
    """On the loop, no more steps are under way than the store has connections (one
    here): a run waiting for its turn is cancelled, and its step never begins."""
    store, shop = PostgresStore(pg_url, pool_size=1), GatedShop(pg_url).seed_demo()

    async def main() -> Any:
        async with AsyncEngine(build(shop), store, async_clerk, store_on_loop=True) as engine:
            first = asyncio.create_task(engine.start(SMALL, user="asha", run_id="a"))
            await asyncio.to_thread(shop.inside.wait, 60)  # "a" holds the one place
            second = asyncio.create_task(engine.start(LARGE, user="ravi", run_id="b"))
            admit = store.admission()
            assert admit is not None and admit.locked()
            while not getattr(admit, "_waiters", None):  # "b" waits for the place
                await asyncio.sleep(0.01)
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
            shop.go.set()
            return await first

    try:
        run = asyncio.run(main())
        assert run.status == "done"
        # The cancel came back without waiting for "a" to give its place up.
        assert not shop.gave_up
        waited = store.load_run("b")
        assert (waited.step, waited.status) == (0, "running")  # its step never began
        assert store.lease("b") is None  # and its lease was given back
        assert "A-1002" not in shop.looked_up and _ledger(shop) == [
            ("A-1001", "kettle-1", 35_000)]
    finally:
        shop.go.set()
        store.close()
        shop.close()


def test_fork_sweep_and_replay_answer_from_await(tmp_path: Path) -> None:
    store, shop, _ = _desk(tmp_path)

    async def main() -> tuple[Any, Any, list[str], Any]:
        async with AsyncEngine(build(shop), store, async_clerk) as engine:
            run = await engine.start(SMALL, user="asha", run_id="r")
            fork = await engine.fork("r", at=3, new_run_id="f")
            swept = await engine.sweep()
            report = await replay_async(build(shop), store, "r", async_clerk,
                                        policy_name="async clerk")
            return run, fork, swept, report

    run, fork, swept, report = asyncio.run(main())
    assert run.status == "done" and (fork.run_id, fork.step, fork.status) == (
        "f", 3, "running")
    assert swept == []
    assert report.split is None and len(report.steps) == 7
    assert [w.tool for w in report.writes] == ["refund_item", "send_reply"]


def test_an_async_policy_given_to_the_synchronous_engine_is_refused_in_one_line() -> None:
    store = MemoryStore()
    engine = Engine(build(Shop(":memory:").seed_demo()), store, async_clerk)
    with pytest.raises(AsyncPolicyCalledSync, match="is async: drive its runs with "
                                                    "fsm.AsyncEngine"):
        engine.start(SMALL, user="asha", run_id="r")
    assert store.lease("r") is None  # the lease was given back
    assert store.load_run("r").step == 0  # the step did not land


def test_threads_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="threads must be at least 1, not 0"):
        AsyncEngine(build(Shop(":memory:")), MemoryStore(), async_clerk, threads=0)


# -- a process killed in the middle of a step ----------------------------------------------

def _drive_async(db: str, resume: bool, on_loop: bool) -> int:  # pragma: no cover - runs in a child
    from fsm.observability import hooks
    from fsm.testing import faults

    injector = faults.from_environ(os.environ)  # None for the run that resumes

    async def main() -> str:
        store, shop = _opened(db)
        async with AsyncEngine(build(shop), store, async_clerk, store_on_loop=on_loop) as engine:
            run = await (engine.resume("r") if resume else
                         engine.start(SMALL, user="asha", run_id="r"))
        store.close()
        shop.close()
        return run.status

    with hooks.scope(*[injector] if injector else []):  # the engine is made in the task
        print(asyncio.run(main()))
    return 0


@pytest.mark.parametrize("point", ["after_claim@6", "after_tool_before_commit@6",
                                   "after_commit@6", "before_policy@7"])
def test_a_process_killed_mid_step_is_resumed_by_a_new_one_and_pays_once(
        desk: tuple[Store, Any], where: str, on_loop: bool, point: str) -> None:
    db = where
    first = Child(_drive_async, db, False, on_loop, env={"FSM_FAULT": point}).wait(120)
    assert first.killed, first
    store, shop = desk
    assert store.load_run("r").status == "running"
    second = Child(_drive_async, db, True, on_loop).wait(120)
    assert (second.code, second.stdout.strip()) == (0, "done"), second
    assert _ledger(shop) == [("A-1001", "kettle-1", 35_000)]
    refunds = [c["idempotency_key"] for c in shop.calls() if c["api"] == "refund"]
    assert set(refunds) == {"r:6"}  # a call repeated with its key is the gateway's duplicate
    report = audit(store, "r")
    assert report.ok, report.problems
