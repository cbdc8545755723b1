"""Synchronous code that awaits: a greenlet on the event loop.

A step's rules are written once, as ordinary functions that call the store. To drive them
from an event loop with an async database driver, :func:`run_bridged` runs such a function
in a greenlet on the loop's own thread: where it reaches the database, the store's
:func:`await_` hands the awaitable up to the loop, which awaits it (other runs go on
meanwhile) and resumes the function with its result, or throws its exception into it.
SQLAlchemy's asyncio support works the same way.

Outside a bridged greenlet nothing changes: :func:`bridged` is false, and the store uses
its synchronous driver. Work that would hold the loop (a tool's call) goes to an executor
through :func:`blocking`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any, TypeVar

try:
    import greenlet
except ImportError:  # pragma: no cover - installed with fsm[postgres]
    greenlet = None  # type: ignore[assignment]

__all__ = ["await_", "blocking", "bridged", "entered", "run_bridged"]

T = TypeVar("T")

if greenlet is not None:
    class _Bridged(greenlet.greenlet):  # type: ignore[misc]
        """A greenlet whose synchronous function may await (see :func:`await_`)."""

        def __init__(self, fn: Callable[..., Any], driver: Any,
                     executor: Executor | None) -> None:
            super().__init__(fn, driver)
            self.executor = executor
            # The same context variables as the task that drives it (a new greenlet
            # would otherwise start with none).
            self.gr_context = driver.gr_context


def bridged() -> bool:
    """Whether this code runs in a bridged greenlet, where it may :func:`await_`."""
    return greenlet is not None and isinstance(greenlet.getcurrent(), _Bridged)


def await_(awaitable: Awaitable[T]) -> T:
    """The value of ``awaitable``, awaited by the event loop that drives this greenlet
    (only in a bridged greenlet: see :func:`bridged`)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("await_ outside a bridged greenlet (see fsm._bridge.run_bridged)")
    return current.parent.switch(awaitable)  # type: ignore[no-any-return]


@contextmanager
def entered(manager: Any) -> Iterator[Any]:
    """An async context manager entered and left from a bridged greenlet."""
    value = await_(manager.__aenter__())
    try:
        yield value
    except BaseException as exc:
        if not await_(manager.__aexit__(type(exc), exc, exc.__traceback__)):
            raise
    else:
        await_(manager.__aexit__(None, None, None))


def blocking(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: in a bridged greenlet, called in its executor's thread with this
    code's context variables, so that the loop goes on meanwhile; anywhere else, called
    here."""
    current = greenlet.getcurrent() if greenlet is not None else None
    if not isinstance(current, _Bridged) or current.executor is None:
        return fn(*args)
    # With the caller's context variables (a trace's span), as asyncio.to_thread does.
    context = contextvars.copy_context()
    return await_(asyncio.wrap_future(current.executor.submit(context.run, fn, *args)))


async def run_bridged(executor: Executor | None, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` run in a bridged greenlet on this loop's thread: each awaitable it
    hands up is awaited here. ``executor`` runs what it calls through :func:`blocking`."""
    if greenlet is None:  # pragma: no cover - installed with fsm[postgres]
        raise RuntimeError("running synchronous code on the event loop needs greenlet "
                           "(pip install 'fsm[postgres]')")
    child = _Bridged(fn, greenlet.getcurrent(), executor)
    asked = child.switch(*args)
    while not child.dead:
        try:
            answer = await asked
        except BaseException as exc:  # noqa: BLE001 - thrown into the greenlet, where it was awaited
            asked = child.throw(exc)
        else:
            asked = child.switch(answer)
    return asked  # type: ignore[no-any-return]

