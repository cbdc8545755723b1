"""``async def`` tools: the engine awaits what they return. Under :class:`AsyncEngine` a
tool is awaited on the loop that drives the run (its steps in the threads or on the
loop); under the synchronous engine, in a loop of its own. A write pays once, under its
key, and an async tool's exception is the tool's error the model reads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fsm import (
    ADVANCE,
    Action,
    AsyncEngine,
    Engine,
    SQLiteStore,
    ToolContext,
    ToolSpec,
    define_workflow,
)
from fsm.observability.hooks import Hooks, in_scope, scope
from fsm.records import RunState
from fsm.store.base import Store
from fsm.store.postgres import PostgresStore


class Pay(BaseModel):
    amount: int


class Till:
    """Where the async tools record what they did, and where they ran."""

    def __init__(self) -> None:
        self.paid: list[tuple[str | None, int]] = []
        self.threads: set[int] = set()
        self.loops: set[int] = set()

    async def pay(self, args: Pay, ctx: ToolContext) -> dict[str, Any]:
        await asyncio.sleep(0.001)
        self.threads.add(threading.get_ident())
        self.loops.add(id(asyncio.get_running_loop()))
        if args.amount <= 0:
            raise ValueError(f"cannot pay {args.amount}")
        self.paid.append((ctx.key, args.amount))
        return {"paid": args.amount}


def _spec(till: Till) -> Any:
    return define_workflow(
        "paying", transitions={"paying": {"paid": "done"}}, tools_by_state={"paying": ["pay"]},
        initial="paying", terminal={"done"},
        tools=[ToolSpec("pay", till.pay, "Pay the amount.", args=Pay, write=True)])


def cashier(view: Any) -> Action:
    """Pays 0 first (refused by the tool), then 500, then ends."""
    results = [m for m in view.messages if m.get("tool") == "pay"]
    if any("result" in m for m in results):
        return Action(tool=ADVANCE, args={"event": "paid"})
    return Action(tool="pay", args={"amount": 500 if results else 0})


def _errors(store: Store, run_id: str) -> list[str]:
    return [str(e.detail["error"]) for e in store.events(run_id)
            if e.kind == "tool" and e.detail.get("error")]


def test_the_synchronous_engine_awaits_an_async_tool_and_a_write_pays_once(
        tmp_path: Path) -> None:
    till = Till()
    with SQLiteStore(str(tmp_path / "runs.db")) as store:
        run = Engine(_spec(till), store, cashier).start("pay it", run_id="p")
        assert run.status == "done"
        errors = _errors(store, "p")
    assert till.paid == [("p:2", 500)]
    assert len(errors) == 1 and "cannot pay 0" in errors[0]


def test_the_synchronous_engine_inside_a_running_loop_awaits_it_in_a_thread_of_its_own(
        tmp_path: Path) -> None:
    till = Till()

    async def main() -> tuple[str, int]:
        with SQLiteStore(str(tmp_path / "runs.db")) as store:
            run = Engine(_spec(till), store, cashier).start("pay it", run_id="p")
        return run.status, id(asyncio.get_running_loop())

    status, outer = asyncio.run(main())
    assert status == "done" and till.paid == [("p:2", 500)]
    assert outer not in till.loops and threading.get_ident() not in till.threads


@pytest.fixture(params=["sqlite", "postgres-on-loop"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, bool]]:
    if request.param == "sqlite":
        with SQLiteStore(str(tmp_path / "runs.db")) as s:
            yield s, False
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"))
        try:
            yield s, True
        finally:
            s.close()


def test_the_async_engine_awaits_an_async_tool_on_the_loop_that_drives_the_run(
        store: tuple[Store, bool]) -> None:
    runs_store, on_loop = store
    till = Till()

    async def main() -> tuple[list[str], int, int]:
        async with AsyncEngine(_spec(till), runs_store, cashier, threads=2,
                               store_on_loop=on_loop) as engine:
            runs = await asyncio.gather(*[engine.start("pay it", run_id=f"p{i}")
                                          for i in range(3)])
        return [r.status for r in runs], id(asyncio.get_running_loop()), threading.get_ident()

    statuses, loop, loop_thread = asyncio.run(main())
    assert statuses == ["done"] * 3
    assert sorted(till.paid) == [(f"p{i}:2", 500) for i in range(3)]
    assert till.loops == {loop} and till.threads == {loop_thread}
    assert all(len(_errors(runs_store, f"p{i}")) == 1 for i in range(3))


class Bank:
    """An async write tool whose request has gone out before it waits for the answer."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []
        self.waiting = asyncio.Event()

    async def pay(self, args: Pay, ctx: ToolContext) -> dict[str, Any]:
        self.sent.append(ctx.key)
        self.waiting.set()
        await asyncio.sleep(3600)  # the answer never comes: the loop stops first
        return {"paid": args.amount}


def test_an_async_write_cut_short_by_its_loop_stopping_is_in_doubt_not_refused(
        tmp_path: Path) -> None:
    """The service stops (every task cancelled) while an async write waits for its answer,
    its step in one of the engine's threads: the step says the infrastructure failed, not
    that the tool refused, so the model is never told the payment failed; a later drive
    finds the write in doubt and hands the run to a person, paying nothing again."""
    bank = Bank()
    spec = define_workflow(
        "paying", transitions={"paying": {"paid": "done"}}, tools_by_state={"paying": ["pay"]},
        initial="paying", terminal={"done"},
        tools=[ToolSpec("pay", bank.pay, "Pay the amount.", args=Pay, write=True)])

    def once(view: Any) -> Action:
        if any(m.get("tool") == "pay" and "result" in m for m in view.messages):
            return Action(tool=ADVANCE, args={"event": "paid"})
        return Action(tool="pay", args={"amount": 500})

    with SQLiteStore(str(tmp_path / "runs.db")) as store:
        async def stopping() -> BaseException | RunState:
            engine = AsyncEngine(spec, store, once, threads=2)
            drive = asyncio.create_task(engine.start("pay it", run_id="r"))
            await asyncio.wait_for(bank.waiting.wait(), 30)
            for task in asyncio.all_tasks():  # the service stops
                if task is not asyncio.current_task():
                    task.cancel()
            [ended] = await asyncio.gather(drive, return_exceptions=True)
            await engine.aclose()
            return ended

        ended = asyncio.run(stopping())
        assert isinstance(ended, asyncio.CancelledError)
        log = store.events("r")
        assert [e.detail.get("error") for e in log if e.kind == "tool"] == []
        [unavailable] = [e for e in log if e.kind == "unavailable"]
        assert "cancelled before it answered" in (unavailable.reason or "")

        async def later() -> RunState:
            async with AsyncEngine(spec, store, once, threads=2) as engine:
                return await engine.resume("r", take_over=True)

        run = asyncio.run(later())
    assert bank.sent == ["r:1"]
    assert run.status == "handed_over" and "in doubt" in (run.reason or ""), run.reason


class Marker(Hooks):
    """A hook that does nothing: whether it is in scope is what is looked at."""


def test_hooks_in_scope_where_the_engine_was_made_are_in_scope_in_its_runs_steps(
        store: tuple[Store, bool]) -> None:
    """As in the engine's threads: a tool (and a fault point) in a step sees the hooks
    that were in scope where the engine was made, wherever the step runs."""
    runs_store, on_loop = store
    seen: list[tuple[Hooks, ...]] = []

    def look(args: Any, ctx: ToolContext) -> dict[str, Any]:
        seen.append(in_scope())
        return {}

    spec = define_workflow(
        "looking", transitions={"looking": {"looked": "done"}},
        tools_by_state={"looking": ["look"]}, initial="looking", terminal={"done"},
        tools=[ToolSpec("look", look, "Look.")])

    def looker(view: Any) -> Action:
        if any(m.get("tool") == "look" and "result" in m for m in view.messages):
            return Action(tool=ADVANCE, args={"event": "looked"})
        return Action(tool="look", args={})

    marker = Marker()

    async def main() -> str:
        with scope(marker):
            engine = AsyncEngine(spec, runs_store, looker, store_on_loop=on_loop)
        async with engine:
            return (await engine.start("look", run_id="l")).status

    assert asyncio.run(main()) == "done"
    assert seen and all(any(h is marker for h in s) for s in seen), seen


def test_a_loop_with_a_task_factory_of_its_own_drives_the_runs(
        store: tuple[Store, bool]) -> None:
    """A loop whose task factory takes only (loop, coroutine), as older libraries install."""
    runs_store, on_loop = store
    till = Till()
    made: list[int] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
        made.append(1)
        return asyncio.Task(coro, loop=loop)

    async def main() -> str:
        asyncio.get_running_loop().set_task_factory(factory)  # type: ignore[arg-type]
        async with AsyncEngine(_spec(till), runs_store, cashier,
                               store_on_loop=on_loop) as engine:
            return (await engine.start("pay it", run_id="p")).status

    assert asyncio.run(main()) == "done"
    assert till.paid == [("p:2", 500)] and made
