"""The engine for asyncio services: ``await engine.start(...)``, ``async for`` its steps.

:class:`AsyncEngine` holds an :class:`~fsm.runtime.engine.Engine` and drives the same
driving generators (:mod:`fsm.runtime.driving`) from the event loop: what a step writes,
the gate, claims, effects, rulings, the customer's replies and the commit are the
engine's own code, run in a small thread pool (the store, the tools); the model is
awaited. A run that waits on its model holds no thread, so one process can hold many
conversations in flight.

The policy may be ``async def`` (awaited on the loop) or synchronous (called in the
pool). The store is the same store, used from the pool's threads; or, with
``store_on_loop=True`` on PostgreSQL, a run's steps are driven on the loop itself, in a
greenlet (:mod:`fsm._bridge`), their statements awaited through psycopg's async pool, and
only the tools' calls go to the pool's threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fsm.definition.spec import WorkflowSpec
from fsm.errors import EngineClosed
from fsm.observability.hooks import adopt, in_scope
from fsm.records import Budgets, Event, RunState
from fsm.runtime.conversation.engine import Conversation
from fsm.runtime.driving import Done, Driving, answered_async
from fsm.runtime.engine import Engine
from fsm.runtime.observe import Outcome
from fsm.runtime.swept import Swept
from fsm.store.base import Store

T = TypeVar("T")

#: Threads an async engine runs the store's work and the tools in, unless told otherwise.
DEFAULT_THREADS = 8


class AsyncEngine:
    """Drives runs of one workflow from an event loop; see the module's docstring.

    ``AsyncEngine(spec, store, policy, threads=8, **options)`` takes what
    :class:`~fsm.runtime.engine.Engine` takes (``config=``, ``clock=``, ``hooks=``,
    ``resources=``, ...). Many runs may be driven at once (each from its own task); one
    run is driven by one caller at a time, as with the engine (its lease sees to it).
    """

    def __init__(self, spec: WorkflowSpec, store: Store, policy: Callable[[Any], Any] | None
                 = None, *, threads: int = DEFAULT_THREADS, store_on_loop: bool = False,
                 **options: Any) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads!r}")
        #: The engine whose rules drive the runs (its ``policy`` is this one's).
        self.engine = Engine(spec, store, policy, **options)
        #: Drive runs on the loop through the store's async driver, where it has one
        #: (PostgreSQL: psycopg's async pool), not in the engine's threads.
        self.store_on_loop = store_on_loop
        #: loop → the opening of the store's async driver for it (by this engine)
        self._loops: dict[asyncio.AbstractEventLoop, asyncio.Task[bool]] = {}
        #: :meth:`aclose` has begun: no drive begins, and each in flight stops at its
        #: next commit.
        self._closing = False
        #: Drives whose driver is open, and those of them with work under way (a
        #: resumption, a model call, the driver's own closing), not waiting at a yield.
        self._open = 0
        self._busy = 0
        self._idle: asyncio.Event | None = None
        #: The last of the drivers still open when :meth:`aclose` ended shuts the threads.
        self._shut_by_last = False
        #: The threads are shut: nothing more can be read or written through this engine.
        self._shut = False
        #: The closing :meth:`aclose` began (later calls wait for the same one).
        self._closed_by: asyncio.Future[None] | None = None
        #: The hooks in scope here, in scope for the runs' steps (as in the threads).
        self._scoped = in_scope()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="fsm-async",
                                        initializer=adopt, initargs=(self._scoped,))

    @property
    def spec(self) -> WorkflowSpec:
        return self.engine.spec

    @property
    def store(self) -> Store:
        return self.engine.store

    @property
    def policy(self) -> Callable[[Any], Any] | None:
        return self.engine.policy

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn`` run in the engine's threads (what touches the store)."""
        if self._shut:
            raise _closed()
        return await asyncio.wrap_future(self._pool.submit(functools.partial(fn, *args,
                                                                             **kwargs)))

    @contextlib.contextmanager
    def _work(self, *, writes: bool = True) -> Iterator[None]:
        """One call of the API, counted while it is under way (:meth:`aclose` waits for
        it). Once :meth:`aclose` has begun, a call that would write or drive is refused;
        one that reads, until the threads are shut."""
        if self._shut or (writes and self._closing):
            raise _closed()
        self._busy += 1
        try:
            yield
        finally:
            self._rests()

    async def _on_loop(self) -> bool:
        """Whether runs are driven on the loop: the store's async driver is open for it
        (opened by this engine once per loop, and closed by :meth:`aclose`)."""
        if not self.store_on_loop:
            return False
        loop = asyncio.get_running_loop()
        opening = self._loops.get(loop)
        if opening is None:  # one opening per loop, however many runs start at once
            opening = self._loops[loop] = loop.create_task(self.engine.store.open_async())
        try:
            return await asyncio.shield(opening)
        except Exception:
            if self._loops.get(loop) is opening:
                del self._loops[loop]  # not open: the next run tries again
            raise

    async def _finish(self, driving: Driving[RunState]) -> RunState:
        """Drive ``driving`` to its end; once :meth:`aclose` begins, to its next commit
        (the run as that commit left it, its lease given back)."""
        last: RunState | None = None
        steps = self._driven(driving, self._goes_on)
        try:
            async for item in steps:
                if isinstance(item, Done):
                    return item.value  # type: ignore[no-any-return]
                last = item
        finally:
            await steps.aclose()
        assert last is not None, "a driving generator ended without its value"
        return last

    def _goes_on(self, run: RunState) -> bool:
        """Whether a run's next step follows in the same resumption (not once closing)."""
        return not self._closing

    async def _driven(self, driving: Driving[Any],
                      keep_going: Callable[[RunState], bool] | None = None
                      ) -> AsyncGenerator[RunState | Done, None]:
        """The runs ``driving`` yields, then its :class:`Done`, as
        :func:`~fsm.runtime.driving.answered_async` drives it; counted, so that
        :meth:`aclose` waits for the work under way, and the engine's threads stay until
        the last driver has closed its generator. After :meth:`aclose` begins it ends at
        the next run (a commit)."""
        if self._closing:
            driving.close()
            raise _closed()
        self._open += 1
        self._busy += 1
        try:
            steps = answered_async(driving, self.engine.policy, executor=self._pool,
                                   keep_going=keep_going, on_loop=await self._on_loop(),
                                   admit=self.engine.store.admission(), hooks=self._scoped)
            try:
                async for item in steps:
                    self._rests()
                    try:
                        yield item
                    finally:
                        self._busy += 1
                    if isinstance(item, Done) or self._closing:
                        return
            finally:
                await steps.aclose()
        finally:
            self._open -= 1
            self._rests()
            if self._shut_by_last and not self._open:
                self._shut_down()  # aclose left the threads to the last one

    def _rests(self) -> None:
        """A drive's work under way has ended (it waits at a yield, or is done)."""
        self._busy -= 1
        if not self._busy and self._idle is not None:
            self._idle.set()

    # -- runs -------------------------------------------------------------------------

    async def start(self, goal: str, *, user: str = "", run_id: str | None = None,
                    budgets: Budgets | None = None, drive: bool = True,
                    meta: dict[str, Any] | None = None) -> RunState:
        """Create a run with ``goal`` as its first message, and drive it (see
        :meth:`Engine.start <fsm.runtime.engine.Engine.start>`). Created while
        :meth:`aclose` begins, the run is given back as created, not driven."""
        with self._work():
            run = await self._call(self.engine.start, goal, user=user, run_id=run_id,
                                   budgets=budgets, drive=False, meta=meta)
            if not drive or run.status != "running" or self._closing:
                return run
            return await self._finish(self.engine._steps(run.run_id, False, None))

    async def start_conversation(self, goal: str, *, user: str = "",
                                 run_id: str | None = None, budgets: Budgets | None = None,
                                 drive: bool = True, meta: dict[str, Any] | None = None
                                 ) -> Conversation:
        """Start a run that talks with its customer, and give out its reply token."""
        with self._work():
            talk = await self._call(self.engine.start_conversation, goal, user=user,
                                    run_id=run_id, budgets=budgets, drive=False, meta=meta)
            if not drive or talk.run.status != "running" or self._closing:
                return talk
            return dataclasses.replace(talk, run=await self._finish(
                self.engine._steps(talk.run.run_id, False, None)))

    async def resume(self, run_id: str, *, take_over: bool = False,
                     policy_record: dict[str, Any] | None = None) -> RunState:
        """Continue a run from its last checkpoint until it stops or waits."""
        with self._work():
            return await self._finish(self.engine._steps(run_id, take_over, policy_record))

    async def steps(self, run_id: str, *, take_over: bool = False,
                    policy_record: dict[str, Any] | None = None) -> AsyncIterator[Outcome]:
        """Drive a run as :meth:`resume` does, yielding an :class:`Outcome` after each
        step's commit: ``async for outcome in engine.steps(run_id): ...``. Leaving the
        loop early leaves the run where its last commit put it, its lease given back."""
        driving = self._driven(self.engine._steps(run_id, take_over, policy_record))
        try:
            async for item in driving:
                if not isinstance(item, Done):
                    yield Outcome.of(item)
        finally:
            await driving.aclose()

    async def step(self, run_id: str, *, take_over: bool = False) -> Outcome | None:
        """Drive one step of a run and let go of it (``None``: nothing to drive)."""
        steps = self.steps(run_id, take_over=take_over)
        try:
            async for outcome in steps:
                return outcome
            return None
        finally:
            await steps.aclose()  # type: ignore[attr-defined]

    async def decide(self, run_id: str, approved: bool, reviewer: str, note: str = "", *,
                     event: str | None = None, drive: bool = True,
                     amend: dict[str, Any] | None = None) -> RunState:
        """Approve or deny what a paused run waits for, then continue the run."""
        with self._work():
            return await self._finish(self.engine._deciding(
                run_id, approved, reviewer, note, event=event, drive=drive, amend=amend))

    async def reply(self, run_id: str, text: str, *, token: str | None = None,
                    asked: str | None = None, drive: bool = True) -> RunState:
        """Keep the customer's reply, then let the run read it and go on. Kept while
        :meth:`aclose` begins, the reply is left for a later delivery: the run is given
        back as it is."""
        with self._work():
            await self._call(self.engine.accept_reply, run_id, text, token=token,
                             asked=asked)
            if self._closing:
                return await self._call(self.engine.store.load_run, run_id)
            return await self._finish(self.engine._delivering(run_id, drive=drive))

    async def deliver(self, run_id: str, *, drive: bool = True) -> RunState:
        """Let a run that waits for its customer read its kept replies, and drive on."""
        with self._work():
            return await self._finish(self.engine._delivering(run_id, drive=drive))

    async def close_handover(self, run_id: str, person: str, outcome: str, note: str, *,
                             event: str | None = None, drive: bool = True) -> RunState:
        """Close a handed-over run's handover (``resumed`` continues the run)."""
        with self._work():
            return await self._finish(self.engine._closing(run_id, person, outcome, note,
                                                           event=event, drive=drive))

    async def take_handover(self, run_id: str, person: str, *, note: str | None = None
                            ) -> RunState:
        """Take a handed-over run (see :meth:`Engine.take_handover`)."""
        with self._work():
            return await self._call(self.engine.take_handover, run_id, person, note=note)

    async def raise_budgets(self, run_id: str, limits: dict[str, Any], by: str) -> RunState:
        """Raise a run's budgets (see :meth:`Engine.raise_budgets`)."""
        with self._work():
            return await self._call(self.engine.raise_budgets, run_id, limits, by)

    async def fork(self, run_id: str, *, at: int, new_run_id: str | None = None) -> RunState:
        """A new run from what ``run_id`` had committed at step ``at`` (not driven)."""
        with self._work():
            return await self._call(self.engine.fork, run_id, at=at, new_run_id=new_run_id)

    async def sweep(self, *, raising: bool = True) -> Swept:
        """Apply every expired approval and wait for a customer: the runs it expired, and
        what it could not do (see :meth:`Engine.sweep`)."""
        with self._work():
            return await self._call(self.engine.sweep, raising=raising)

    async def load(self, run_id: str) -> RunState:
        """The run as its last commit left it."""
        with self._work(writes=False):
            return await self._call(self.engine.store.load_run, run_id)

    async def events(self, run_id: str) -> list[Event]:
        """The run's event log, in order."""
        with self._work(writes=False):
            return await self._call(self.engine.store.events, run_id)

    # -- the engine's life ----------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop driving, then close the engine's resources, the store's async driver for
        this loop, and the engine's threads.

        No drive begins once it is called (:class:`~fsm.errors.EngineClosed`). Each drive
        in flight ends at its next commit, as a worker's runs do when it stops: a step
        under way (its model's answer, its tools, its commit) is finished, never cut, and
        the run's lease is given back; the caller gets the run as that commit left it,
        and a later drive goes on from there. A call that only reads (:meth:`load`,
        :meth:`events`) is answered until the threads are shut. ``aclose`` waits for that,
        from the loop that drives the runs; a second call, or one after a cancelled
        first, waits for the same closing."""
        if self._closed_by is None:
            self._closing = True
            self._closed_by = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closed_by)

    async def _close(self) -> None:
        while self._busy:
            self._idle = asyncio.Event()
            await self._idle.wait()
        await asyncio.wrap_future(self._pool.submit(self.engine.close))
        opening = self._loops.pop(asyncio.get_running_loop(), None)
        opened = False
        if opening is not None:
            with contextlib.suppress(Exception):  # it failed where it was awaited
                opened = await opening
        if opened:
            await self.engine.store.close_async()
        if self._open:  # a driver held open at a yield by its caller closes them
            self._shut_by_last = True
        else:
            self._shut_down()

    def _shut_down(self) -> None:
        self._shut = True
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> AsyncEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _closed() -> EngineClosed:
    return EngineClosed("this AsyncEngine is closed (aclose): make a new one to drive runs")
