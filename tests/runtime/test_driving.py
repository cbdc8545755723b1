"""The async driver (``fsm.runtime.driving``) lets a resumption in flight end before it
closes the engine's generator, however often its caller is cancelled meanwhile: a step
is never stopped halfway, and the generator's cleanup (the lease given back) runs once,
after the step."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fsm._bridge import await_
from fsm.runtime.driving import answered_async


class Driven:
    """A driving generator whose first step waits until the test lets it end."""

    def __init__(self, on_loop: bool) -> None:
        self.on_loop = on_loop
        self.began = threading.Event()
        self.go_on = threading.Event()
        self.go_on_loop = asyncio.Event()
        self.log: list[str] = []

    def steps(self) -> Iterator[Any]:
        try:
            self.log.append("step begins")
            self.began.set()
            if self.on_loop:
                await_(self.go_on_loop.wait())
            else:
                assert self.go_on.wait(30)
            self.log.append("step ends")
            yield "run after step 1"
            self.log.append("step 2")  # never: the caller has gone
            yield "run after step 2"
        finally:
            self.log.append("closed")

    def let_go(self) -> None:
        self.go_on.set()
        self.go_on_loop.set()


@pytest.mark.parametrize("on_loop", [False, True], ids=["threads", "on-loop"])
def test_two_cancels_mid_step_close_the_generator_once_the_step_has_ended(
        on_loop: bool) -> None:
    driven = Driven(on_loop)
    generator = driven.steps()
    seen: list[Any] = []

    async def consume(pool: ThreadPoolExecutor) -> None:
        async for item in answered_async(generator, None, executor=pool, on_loop=on_loop):
            seen.append(item)

    async def main() -> tuple[bool, list[str]]:
        with ThreadPoolExecutor(2) as pool:
            task = asyncio.create_task(consume(pool))
            while not driven.began.is_set():
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.sleep(0.05)
            task.cancel()  # a second cancel, while the driver waits for the step
            await asyncio.sleep(0.05)
            during = list(driven.log)
            driven.let_go()
            try:
                await asyncio.wait_for(task, 30)
            except asyncio.CancelledError:
                return True, during
            return False, during

    cancelled, during = asyncio.run(main())
    assert cancelled, "the cancel was not raised once the generator was closed"
    assert during == ["step begins"], "the generator was closed while its step ran"
    assert driven.log == ["step begins", "step ends", "closed"]
    assert inspect.getgeneratorstate(generator) == inspect.GEN_CLOSED
    assert seen == []
