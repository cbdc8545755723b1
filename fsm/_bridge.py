"""Synchronous code that awaits: a greenlet on the event loop.

A step's rules are written once, as ordinary functions that call the store. To drive them
from an event loop with an async database driver, :func:`run_bridged` runs such a function
in a greenlet on the loop's own thread: where it reaches the database, the store's
:func:`await_` hands the awaitable up to the loop, which awaits it (other runs go on
meanwhile) and resumes the function with its result, or throws its exception into it.
SQLAlchemy's asyncio support works the same way.

Outside a bridged greenlet nothing changes: :func:`bridged` is false, and the store uses
its synchronous driver. Work that would hold the loop (a tool's call) goes to an executor
through :func:`blocking`; :func:`called` also awaits what an ``async def`` tool returns,
on the loop that drives the run (:func:`driven_from`) when there is one.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

try:
    import greenlet
except ImportError:  # pragma: no cover - installed with fsm[postgres]
    greenlet = None  # type: ignore[assignment]

__all__ = ["await_", "blocking", "bridged", "called", "driven_from", "entered", "is_async",
           "run_bridged"]

T = TypeVar("T")

#: The event loop that drives this code's run from its threads (see :func:`driven_from`).
_DRIVING_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = \
    contextvars.ContextVar("fsm_driving_loop", default=None)

if greenlet is not None:
    class _Bridged(greenlet.greenlet):  # type: ignore[misc]
        """A greenlet whose synchronous function may await (see :func:`await_`)."""

        def __init__(self, fn: Callable[..., Any], driver: Any, executor: Executor | None,
                     context: contextvars.Context | None) -> None:
            super().__init__(fn, driver)
            self.executor = executor
            # The context variables it is given, else those of the task that drives it
            # (a new greenlet would otherwise start with none).
            self.gr_context = context if context is not None else driver.gr_context


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


async def run_bridged(executor: Executor | None, fn: Callable[..., T], *args: Any,
                      context: contextvars.Context | None = None) -> T:
    """``fn(*args)`` run in a bridged greenlet on this loop's thread: each awaitable it
    hands up is awaited here. ``executor`` runs what it calls through :func:`blocking`.
    The greenlet runs in ``context`` (not a copy: what it sets stays there), else in the
    calling task's."""
    if greenlet is None:  # pragma: no cover - installed with fsm[postgres]
        raise RuntimeError("running synchronous code on the event loop needs greenlet "
                           "(pip install 'fsm[postgres]')")
    child = _Bridged(fn, greenlet.getcurrent(), executor, context)
    asked = child.switch(*args)
    while not child.dead:
        try:
            answer = await asked
        except BaseException as exc:  # noqa: BLE001 - thrown into the greenlet, where it was awaited
            asked = child.throw(exc)
        else:
            asked = child.switch(answer)
    return asked  # type: ignore[no-any-return]


def driven_from(loop: asyncio.AbstractEventLoop) -> None:
    """Say, in this context, that ``loop`` drives the run: an async tool called from one of
    its threads is awaited there (see :func:`called`)."""
    _DRIVING_LOOP.set(loop)


def called(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` as a step calls a tool, and what it returns awaited when it is
    awaitable (an ``async def`` tool):

    - in a bridged greenlet, awaited by its loop (an async tool is called there too; a
      synchronous one in the executor, see :func:`blocking`);
    - in a thread of a run that an event loop drives (:func:`driven_from`), awaited on
      that loop, this thread waiting for it (a call the loop cancels, as it stops, raises
      ``concurrent.futures.CancelledError`` here: its outcome is unknown);
    - anywhere else (the synchronous engine), in an event loop of its own, in a thread of
      its own when this thread runs a loop already.
    """
    if bridged():
        value = fn(*args) if is_async(fn) else blocking(fn, *args)
        return await_(value) if inspect.isawaitable(value) else value
    value = fn(*args)
    return _settled(value) if inspect.isawaitable(value) else value


def _settled(value: Awaitable[T]) -> T:
    """What ``value`` gives, awaited from a thread that is not a bridged greenlet (see
    :func:`called`)."""
    loop = _DRIVING_LOOP.get()
    if loop is not None and loop.is_running() and not _runs_here(loop):
        return asyncio.run_coroutine_threadsafe(_awaited(value), loop).result()
    if _runs_here(None):
        with ThreadPoolExecutor(1, thread_name_prefix="fsm-async-tool") as alone:
            return alone.submit(contextvars.copy_context().run, asyncio.run,
                                _awaited(value)).result()
    return asyncio.run(_awaited(value))


async def _awaited(value: Awaitable[T]) -> T:
    return await value


def is_async(fn: Any) -> bool:
    """Whether calling ``fn`` returns an awaitable (an ``async def`` function, or an
    object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - a callable object's method


def _runs_here(loop: asyncio.AbstractEventLoop | None) -> bool:
    """Whether this thread runs ``loop`` (any loop, for ``None``) right now."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return loop is None or running is loop
