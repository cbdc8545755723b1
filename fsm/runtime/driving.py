"""How a run is driven: the step's rules ask, a driver answers.

The engine writes each of its driving methods once, as a generator. Where a step needs
the model it yields :class:`Ask` with the view, and the driver sends back what the
policy returned (or throws into the generator what the policy raised), so the rules
that handle the answer (usage, refusals, overflow, hooks) run at the ``yield`` as they
would around a call. After each step's commit the generator yields the run.

Two drivers run these generators, and neither holds a rule:

- :func:`answered` calls the policy in the caller's thread (:class:`~fsm.Engine`);
- :func:`answered_async` advances the generator in an executor's thread (the store's work,
  tools, commits), or on the loop itself in a greenlet when the store's async driver is
  open, and awaits the policy on the event loop, so that a run that waits on its model
  holds no thread (:class:`~fsm.AsyncEngine`, ``fsm worker --async``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from fsm._bridge import driven_from, is_async, run_bridged
from fsm.observability.hooks import Hooks, adopt
from fsm.records import RunState

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Ask:
    """A step's request: the driver asks the policy with ``view``."""

    view: Any


#: A driving method: yields asks and runs, takes the policy's answers, returns ``R``.
Driving = Generator[Union[Ask, RunState], Any, R]  # noqa: UP007 - a runtime alias


class AsyncPolicyCalledSync(TypeError):
    """An async policy was given to the synchronous engine."""


def answered(driving: Driving[R], policy: Callable[[Any], Any] | None
             ) -> Generator[RunState, None, R]:
    """Drive ``driving`` in this thread: each ask is answered by calling ``policy``; each
    run is yielded on; the generator's value is returned. Closing this closes it."""
    sent: Any = None
    raised: BaseException | None = None
    try:
        while True:
            try:
                item = driving.throw(raised) if raised is not None else driving.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            sent, raised = None, None
            if isinstance(item, Ask):
                try:
                    sent = _called(policy, item.view)
                except Exception as exc:  # noqa: BLE001 - the step's rules judge it
                    raised = exc
            else:
                yield item
    finally:
        driving.close()


def finished(driving: Driving[R], policy: Callable[[Any], Any] | None) -> R:
    """Drive ``driving`` to its end in this thread and return its value."""
    it = answered(driving, policy)
    while True:
        try:
            next(it)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _called(policy: Callable[[Any], Any] | None, view: Any) -> Any:
    assert policy is not None, "this engine has no policy to drive runs with"
    raw = policy(view)
    if inspect.isawaitable(raw):
        if inspect.iscoroutine(raw):
            raw.close()  # never awaited: say so in one line, not in a warning at exit
        raise AsyncPolicyCalledSync(
            f"the policy {policy!r} is async: drive its runs with fsm.AsyncEngine (or "
            "`fsm worker --async`), or give the engine a synchronous policy")
    return raw


class Done:
    """What the worker thread hands back when the generator has returned."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _advance(driving: Driving[Any], sent: Any, raised: BaseException | None,
             keep_going: Callable[[RunState], bool] | None) -> tuple[list[RunState], Any]:
    """Resume ``driving`` with an answer; the runs it yields, then what it stopped at: an
    :class:`Ask`, a :class:`Done`, or ``None`` after a run ``keep_going`` did not pass.
    Going on past a run here spares the loop a thread hop per step."""
    runs: list[RunState] = []
    try:
        item = driving.throw(raised) if raised is not None else driving.send(sent)
        while not isinstance(item, Ask):
            runs.append(item)
            if keep_going is None or not keep_going(item):
                return runs, None
            item = driving.send(None)
        return runs, item
    except StopIteration as done:  # it cannot cross a future: the value comes back wrapped
        return runs, Done(done.value)


async def answered_async(driving: Driving[R], policy: Callable[[Any], Any] | None, *,
                         executor: Executor,
                         keep_going: Callable[[RunState], bool] | None = None,
                         on_loop: bool = False, admit: asyncio.Semaphore | None = None,
                         hooks: Iterable[Hooks] | None = None
                         ) -> AsyncGenerator[RunState | Done, None]:
    """Drive ``driving`` from the event loop: its own work runs in ``executor``, one
    resumption at a time, and each ask awaits the policy (an async policy on the loop, a
    synchronous one in the executor). Yields each run, then a :class:`Done` with the
    generator's value.

    ``on_loop`` (a store whose async driver is open for this loop: see
    :meth:`Store.open_async <fsm.store.base.Store.open_async>`): each resumption runs in
    a bridged greenlet on the loop's thread instead (:func:`fsm._bridge.run_bridged`), its
    database work awaited there, once ``admit`` lets it begin (``admit`` is ignored
    otherwise); only its tools' calls go to the executor.

    Every resumption, and each ask of the policy, runs in one context of its own (a copy
    of the caller's, with ``hooks`` in scope as the engine's threads have them): what one
    sets, the next sees.

    After a run, the generator goes on in the same resumption while ``keep_going(run)``
    holds; without it, it waits for the caller to take the run (who may stop there).
    Cancelled or closed early, it lets the resumption in flight end and closes the
    generator, so that its lease is given back."""
    sent: Any = None
    raised: BaseException | None = None
    working: asyncio.Future[Any] | Future[Any] | None = None
    done = False
    # One context for all of the generator's resumptions, as a task has one for all of
    # its steps: what a resumption sets (the current span of a model call that the next
    # resumption ends) is there in the next, whichever thread or greenlet runs it.
    context = contextvars.copy_context()
    context.run(driven_from, asyncio.get_running_loop())  # an async tool is awaited here
    if hooks is not None:
        context.run(adopt, hooks)
    try:
        while True:
            if on_loop and admit is not None:
                # Waited for here, where a cancel stops it: a step not begun is not begun.
                await admit.acquire()
            working = _resumption(executor, on_loop, admit, context, driving, sent, raised,
                                  keep_going)
            runs, item = await (asyncio.shield(working) if isinstance(working, asyncio.Future)
                                else asyncio.wrap_future(working))
            sent, raised = None, None
            for run in runs:
                yield run
            if isinstance(item, Done):
                done = True
                yield item
                return
            if isinstance(item, Ask):
                try:
                    sent = await _awaited(executor, policy, item.view, context)
                except Exception as exc:  # noqa: BLE001 - the step's rules judge it
                    raised = exc
    finally:
        if not done:
            await _let_go(driving, working, executor, on_loop, admit, context)


def _resumption(executor: Executor, on_loop: bool, admit: asyncio.Semaphore | None,
                context: contextvars.Context, *args: Any) -> asyncio.Future[Any] | Future[Any]:
    """:func:`_advance` under way in ``context``: on the loop (a task, which gives back
    the place ``admit`` gave it when it ends), or in the executor (a thread's future)."""
    if not on_loop:
        return executor.submit(context.run, _advance, *args)
    working = asyncio.ensure_future(run_bridged(executor, _advance, *args, context=context))
    if admit is not None:
        working.add_done_callback(lambda _: admit.release())
    return working


async def _let_go(driving: Driving[Any], working: asyncio.Future[Any] | Future[Any] | None,
                  executor: Executor, on_loop: bool, admit: asyncio.Semaphore | None,
                  context: contextvars.Context) -> None:
    """Close ``driving`` after the resumption in flight (``working``) ends: a resumption
    is not cancelled halfway (a thread cannot be), however often the caller is cancelled
    meanwhile; a cancel is raised again once the generator is closed."""
    cancelled: asyncio.CancelledError | None = None
    while working is not None and not working.done():
        try:
            with contextlib.suppress(Exception):  # its failure was raised where awaited
                await asyncio.shield(working if isinstance(working, asyncio.Future)
                                     else asyncio.wrap_future(working))
        except asyncio.CancelledError as exc:
            cancelled = exc
    if inspect.getgeneratorstate(driving) == inspect.GEN_CREATED:
        driving.close()  # never begun: nothing of it runs, nothing to wait for
        if cancelled is not None:
            raise cancelled
        return
    closing = asyncio.ensure_future(_admitted(
        admit, lambda: run_bridged(executor, driving.close, context=context))) if on_loop \
        else asyncio.wrap_future(executor.submit(context.run, driving.close))
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError as exc:
            cancelled = exc  # the close goes on, shielded, however often it is cancelled
    closing.result()
    if cancelled is not None:
        raise cancelled


async def _admitted(admit: asyncio.Semaphore | None, work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` awaited once ``admit`` lets it in (at once without one)."""
    if admit is None:
        return await work()
    async with admit:
        return await work()


async def _awaited(executor: Executor, policy: Callable[[Any], Any] | None, view: Any,
                   context: contextvars.Context) -> Any:
    """The policy's answer to ``view``, asked in ``context`` (where the step's model call
    span is the current one): an async policy on the loop, a synchronous one in the
    executor."""
    assert policy is not None, "this engine has no policy to drive runs with"
    raw = policy(view) if is_async(policy) else \
        await asyncio.wrap_future(executor.submit(context.run, policy, view))
    if not inspect.isawaitable(raw):
        return raw
    return await context.run(asyncio.ensure_future, raw)
