"""Synchronous code on the event loop (``fsm._bridge``): what it awaits is awaited by the
loop, what fails there is raised where it was awaited, other tasks go on meanwhile, and
a blocking call goes to the executor."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from fsm._bridge import await_, blocking, bridged, entered, run_bridged

LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("label", default="none")


async def _twice(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


async def _refused() -> None:
    await asyncio.sleep(0)
    raise LookupError("no such row")


def test_sync_code_awaits_through_the_loop_and_catches_what_failed_there() -> None:
    seen: list[object] = []

    def work(x: int) -> int:
        seen.append(bridged())
        seen.append(LABEL.get())
        try:
            await_(_refused())
        except LookupError as exc:
            seen.append(str(exc))
        return await_(_twice(x)) + await_(_twice(1))

    async def main() -> int:
        LABEL.set("the task's")
        return await run_bridged(None, work, 20)

    assert asyncio.run(main()) == 42
    assert seen == [True, "the task's", "no such row"]
    assert not bridged()


def test_other_tasks_go_on_while_bridged_code_waits() -> None:
    order: list[str] = []

    def slow() -> None:
        order.append("slow starts")
        await_(asyncio.sleep(0.05))
        order.append("slow ends")

    async def quick() -> None:
        order.append("quick")

    async def main() -> None:
        await asyncio.gather(run_bridged(None, slow), quick())

    asyncio.run(main())
    assert order == ["slow starts", "quick", "slow ends"]


def test_an_async_context_manager_is_entered_and_left_from_sync_code() -> None:
    states: list[str] = []

    class Held:
        async def __aenter__(self) -> str:
            states.append("in")
            return "held"

        async def __aexit__(self, *exc: object) -> bool:
            states.append(f"out {exc[0].__name__ if exc[0] else None}")
            return False

    def work() -> None:
        with entered(Held()) as value:
            states.append(value)
        with pytest.raises(KeyError), entered(Held()):
            raise KeyError("x")

    asyncio.run(run_bridged(None, work))
    assert states == ["in", "held", "out None", "in", "out KeyError"]


def test_a_blocking_call_goes_to_the_executor_only_when_bridged() -> None:
    pool = ThreadPoolExecutor(1, thread_name_prefix="bridge-test")

    def where() -> str:
        return threading.current_thread().name

    async def main() -> tuple[str, str]:
        return (await run_bridged(pool, blocking, where), blocking(where))

    try:
        in_pool, here = asyncio.run(main())
    finally:
        pool.shutdown()
    assert in_pool.startswith("bridge-test") and here == "MainThread"


def test_await_outside_a_bridged_greenlet_is_refused_in_one_line() -> None:
    coro = _twice(1)
    with pytest.raises(RuntimeError, match=r"^await_ outside a bridged greenlet"):
        await_(coro)
    coro.close()


def test_what_the_function_raises_comes_out_of_run_bridged() -> None:
    def work() -> None:
        await_(asyncio.sleep(0))
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        asyncio.run(run_bridged(None, work))


def test_a_cancel_reaches_the_waiting_code_and_its_cleanup_still_awaits() -> None:
    states: list[str] = []

    class Held:
        async def __aenter__(self) -> None:
            states.append("in")

        async def __aexit__(self, *exc: object) -> bool:
            await asyncio.sleep(0)  # the cleanup awaits, after the cancel
            states.append(f"out {exc[0].__name__ if exc[0] else None}")
            return False

    def work() -> None:
        with entered(Held()):
            await_(asyncio.sleep(3600))

    async def main() -> None:
        task = asyncio.ensure_future(run_bridged(None, work))
        while not states:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert states == ["in", "out CancelledError"]


def test_a_blocking_call_sees_the_context_variables_of_its_caller() -> None:
    pool = ThreadPoolExecutor(1)

    def work() -> str:
        LABEL.set("the step's")
        return blocking(LABEL.get)

    try:
        assert asyncio.run(run_bridged(pool, work)) == "the step's"
    finally:
        pool.shutdown()
