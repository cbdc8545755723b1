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
