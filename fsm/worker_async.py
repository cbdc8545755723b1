"""``fsm worker --async``: one event loop holds many runs in flight.

The threaded :class:`~fsm.worker.Worker` gives each run in flight a thread for the whole
run, model waits included. :class:`AsyncWorker` drives each run as a task: the engine's
driving generator (:mod:`fsm.runtime.driving`) is advanced in a small thread pool (the
store's work, the tools, the commits), and the policy is awaited on the loop (an
``async def`` policy; a synchronous one runs in the pool). A run waiting on its model
holds no thread, so ``concurrency`` can be in the thousands.

Everything else is the threaded worker's: the claims, the definitions it keeps, the
leases and their heartbeats (the fence on every commit), the step timeout, the sweeps,
shutdown (each run stops after the step it is in and is released), the counts and the
metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fsm.errors import FSMError
from fsm.observability.hooks import adopt, scope
from fsm.records import RunState
from fsm.runtime.driving import Done, answered_async
from fsm.store.base import Claimed
from fsm.store.lease import new_owner
from fsm.worker import Worker

T = TypeVar("T")

#: Threads of an async worker, unless told otherwise (or fewer, with fewer connections).
DEFAULT_THREADS = 4

#: Runs claimed in one round trip to the store, at most.
CLAIM_BATCH = 64


class AsyncWorker(Worker):
    """Claims and drives runnable runs from one event loop until :meth:`stop`."""

    AWAITS_MODELS = True
    #: The runs' steps are driven on the loop (the store's async driver is open for it).
    _on_loop = False

    def _goes_on(self, run: RunState) -> bool:
        """Whether a run's next step follows in the same thread hop (not when stopping)."""
        return not (self._stopping.is_set() and run.status == "running")

    def run(self) -> None:
        """Claim and drive runs until :meth:`stop`; then wait for the runs in flight (the
        worker's hooks in scope, as :meth:`Worker.run <fsm.worker.Worker.run>` has them)."""
        with scope(*self.hooks, alone=True):
            asyncio.run(self._main())

    def _threads(self) -> int:
        if self.config.threads is not None:
            return self.config.threads
        # The threads take turns at one interpreter: more than a few contend for it
        # (bench/fleet.py --async), and more than the store has connections would only
        # wait for one.
        return min(DEFAULT_THREADS, int(getattr(self.store, "pool_size", DEFAULT_THREADS)))

    async def _main(self) -> None:
        listening = threading.Event()  # set: the store's listener stops
        pushed = self.store.subscribe(self._wake, listening)
        threads = self._threads()
        self._on_loop = await self._open_on_loop()
        self.say(f"started (async, concurrency {self.config.concurrency}, {threads} threads, "
                 f"steps {'on the loop' if self._on_loop else 'in the threads'}, "
                 f"{'LISTEN/NOTIFY' if pushed else 'polling'} every "
                 f"{self.config.poll_seconds:g}s, lease {self.config.lease_seconds:g}s)")
        pool = ThreadPoolExecutor(threads, thread_name_prefix="fsm-async", initializer=adopt,
                                  initargs=(self.hooks,))
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()
        last_sweep = -1e18
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                await self._fill_async(pool, tasks)
                if loop.time() - last_sweep >= self.config.sweep_seconds:
                    last_sweep = loop.time()
                    await self._in(pool, self._sweep)
                # The wake is a thread's event (LISTEN/NOTIFY, stop()): waited in the
                # loop's own executor, so that the pool stays the runs'.
                await asyncio.to_thread(self._wake.wait, self.config.poll_seconds)
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            listening.set()
            # Left early (cancelled, or failed): each run in flight is let go after the
            # step it is in, its lease given back, as at a stop.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._in(pool, self.close_resources)
            if self._on_loop:
                await self.store.close_async()
            # Waited for in a thread: a run's thread may be waiting on this loop (an async
            # tool's call), which must go on meanwhile.
            await asyncio.to_thread(pool.shutdown, True)
        self.say("stopped")

    async def _open_on_loop(self) -> bool:
        """Whether the steps run on the loop: asked for, and the store's async driver
        opened (one that cannot be opened leaves them in the threads, said in a line)."""
        if not self.config.store_on_loop:
            return False
        try:
            opened = await self.store.open_async()
        except FSMError as exc:
            self.say(f"cannot open the store's async driver, the steps run in the "
                     f"threads: {exc}")
            return False
        if not opened:
            self.say("the store has no async driver: the steps run in the threads")
        return opened

    async def _in(self, pool: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
        return await asyncio.wrap_future(pool.submit(fn, *args))

    async def _fill_async(self, pool: ThreadPoolExecutor, tasks: set[asyncio.Task[None]]) -> None:
        while not self._stopping.is_set():
            free = self.config.concurrency - len(self._inflight)
            if free <= 0:
                return
            owner = new_owner()
            try:
                claimed = await self._in(pool, self._claim_some, owner,
                                         min(free, CLAIM_BATCH))
            except FSMError as exc:
                self.say(f"cannot claim runs: {exc}")
                return
            if not claimed:
                return
            for c in claimed:
                task = asyncio.create_task(self._drive_async(c, owner, pool))
                with self._lock:
                    self._owners[c.run_id] = owner
                    self._inflight[c.run_id] = task  # type: ignore[assignment]
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    async def _drive_async(self, claimed: Claimed, owner: str, pool: ThreadPoolExecutor
                           ) -> None:
        """One run, as :meth:`Worker._drive <fsm.worker.Worker._drive>` drives it on a
        thread: the same counts, words and leases."""
        run_id = claimed.run_id
        keeps_lease = False
        try:
            self._taken(claimed)
            engine = await self._in(pool, self._engine, run_id, owner)
            driving = answered_async(engine._steps(run_id, False, None), engine.policy,
                                     executor=pool, keep_going=self._goes_on,
                                     on_loop=self._on_loop, admit=self.store.admission(),
                                     hooks=self.hooks)
            run: RunState | None = None
            stopped = False
            async with contextlib.aclosing(driving):
                async for item in driving:
                    if isinstance(item, Done):
                        run = item.value
                        break
                    run = item
                    if self._stopping.is_set() and run.status == "running":
                        stopped = True
                        break  # the step's commit has landed: the lease is given back
            if stopped:
                self._released(run_id)
            else:
                self._report(run or await self._in(pool, self.store.load_run, run_id))
        except Exception as exc:  # noqa: BLE001 - a worker survives any one run's failure
            keeps_lease = await self._in(pool, self._failed, run_id, owner, exc)
        finally:
            self._let_go(run_id, owner, keeps_lease)
