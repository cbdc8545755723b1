"""``fsm worker --async`` and ``async def`` tools: a worker whose loop is told to stop
(its main task cancelled) while a run's async write awaits its answer lets that step end,
gives the run's lease back and stops; the write is paid once, and the run goes on later."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fsm import ADVANCE, Action, Engine, SQLiteStore, ToolContext, ToolSpec, define_workflow
from fsm.worker import WorkerConfig
from fsm.worker_async import AsyncWorker

STARTED = threading.Event()
GO_ON = threading.Event()
PAID: list[str | None] = []


class Pay(BaseModel):
    amount: int


async def pay(args: Pay, ctx: ToolContext) -> dict[str, Any]:
    PAID.append(ctx.key)
    STARTED.set()
    await asyncio.to_thread(GO_ON.wait, 60)  # the bank's answer, when the test lets it come
    return {"paid": args.amount}


SPEC = define_workflow(
    "paying", transitions={"paying": {"paid": "done"}}, tools_by_state={"paying": ["pay"]},
    initial="paying", terminal={"done"},
    tools=[ToolSpec("pay", pay, "Pay the amount.", args=Pay, write=True)])


def cashier(view: Any) -> Action:
    if any(m.get("tool") == "pay" and "result" in m for m in view.messages):
        return Action(tool=ADVANCE, args={"event": "paid"})
    return Action(tool="pay", args={"amount": 500})


def test_a_worker_stopped_mid_async_write_finishes_the_step_and_lets_the_run_go(
        tmp_path: Path) -> None:
    STARTED.clear()
    GO_ON.clear()
    PAID.clear()
    store = SQLiteStore(str(tmp_path / "runs.db"))
    Engine(SPEC, store, cashier).start("pay it", run_id="r", drive=False, meta={
        "workflow_ref": "test_worker_async_tools:SPEC",
        "policy": "test_worker_async_tools:cashier"})
    lines: list[str] = []
    worker = AsyncWorker(store, WorkerConfig(poll_seconds=0.1, concurrency=2), log=lines.append)
    ended: list[BaseException | None] = []

    async def main() -> None:
        working = asyncio.create_task(worker._main())
        await asyncio.to_thread(STARTED.wait, 60)
        working.cancel()  # told to stop while the write awaits its answer
        await asyncio.sleep(0.2)
        GO_ON.set()
        [result] = await asyncio.gather(working, return_exceptions=True)
        ended.append(result)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    thread.join(90)
    try:
        assert not thread.is_alive(), "the worker's loop never ended"
        assert len(ended) == 1 and isinstance(ended[0], asyncio.CancelledError)
        assert store.lease("r") is None, "the run's lease was kept"
        tools = [e for e in store.events("r") if e.kind == "tool"]
        assert [(e.tool, e.detail.get("error")) for e in tools] == [("pay", None)]
        run = Engine(SPEC, store, cashier).resume("r")
    finally:
        store.close()
    assert run.status == "done" and PAID == ["r:1"]
