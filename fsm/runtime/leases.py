"""Leases: an owner, an expiry, a heartbeat.

While a run is driven its lease is renewed every third of the holder's
``lease_seconds``, by the holder's :class:`Heartbeats` (an engine's own, or one a
worker shares among its engines: nothing of it is global to the process). A process
that stops beating (killed, paused, cut off) loses the run once the lease expires; its
next commit or effect claim is refused by the store (``LeaseLost``), because both carry
the holder's ``owner`` and are checked in the same transaction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from fsm.errors import FSMError, RunLocked, Unavailable
from fsm.store.roles import Leases


class Holder(Protocol):
    """What holds leases: an engine (its store, owner, clock, limits and heartbeats)."""

    @property
    def store(self) -> Leases: ...

    clock: Callable[[], float]
    lease_seconds: float
    step_timeout: float | None
    heartbeats: Heartbeats

    @property
    def owner(self) -> str: ...


class Heartbeats:
    """The leases of an engine (or of a worker's engines): one thread renews them all,
    each every third of its lifetime (a thread per lease would cost every run a thread
    start). The thread runs while any lease is held, and ends when none is.

    A lease whose engine has a ``step_timeout`` is renewed only while its run makes
    progress: once a step has lasted longer, the lease is given back (released), so that
    another process can take the run; the stuck step is then refused any commit or write.

    It also keeps which runs are being driven, by owner: the store lets an owner acquire
    again what it holds (a renewal), so two threads driving one run as one owner would
    both get in; the second is refused here (:class:`~fsm.errors.RunLocked`).
    """

    def __init__(self) -> None:
        #: (owner, run id) of each run being driven through these heartbeats.
        self._driving: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: token → (engine, run id, lease seconds, next beat on the monotonic clock)
        self._held: dict[int, tuple[Holder, str, float, float]] = {}
        #: token → when its run last made progress (a step landed), on the monotonic clock
        self._progress: dict[int, float] = {}
        #: (engine id, run id) → token, for :meth:`progress`
        self._tokens_of: dict[tuple[int, str], int] = {}
        self._thread: threading.Thread | None = None
        self._tokens = 0

    def drive(self, owner: str, run_id: str) -> None:
        """Mark ``run_id`` driven by ``owner``; refused when it already is."""
        with self._lock:
            if (owner, run_id) in self._driving:
                raise RunLocked(run_id, owner, this_process=True)
            self._driving.add((owner, run_id))

    def driven(self, owner: str, run_id: str) -> None:
        """``run_id`` is no longer driven by ``owner``."""
        with self._lock:
            self._driving.discard((owner, run_id))

    def hold(self, engine: Holder, run_id: str, ttl: float) -> int:
        with self._lock:
            self._tokens += 1
            token = self._tokens
            now = time.monotonic()
            self._held[token] = (engine, run_id, ttl, now + ttl / 3)
            self._progress[token] = now
            self._tokens_of[id(engine), run_id] = token
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="fsm-heartbeat")
                self._thread.start()
        self._wake.set()
        return token

    def drop(self, token: int) -> None:
        with self._lock:
            held = self._held.pop(token, None)
            self._progress.pop(token, None)
            if held is not None and self._tokens_of.get((id(held[0]), held[1])) == token:
                del self._tokens_of[id(held[0]), held[1]]
        self._wake.set()  # the thread ends once nothing is held

    def progress(self, engine: Holder, run_id: str) -> None:
        """A step of ``run_id`` landed: its lease is renewed for another step."""
        if engine.step_timeout is None:
            return
        with self._lock:
            token = self._tokens_of.get((id(engine), run_id))
            if token is not None:
                self._progress[token] = time.monotonic()

    def _run(self) -> None:
        while True:
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                if not self._held:
                    self._thread = None  # nothing held: a later hold starts another
                    return
                due = [(t, h) for t, h in self._held.items() if h[3] <= now]
                for t, (e, run_id, ttl, _) in due:
                    self._held[t] = (e, run_id, ttl, now + ttl / 3)
                nxt = min((h[3] for h in self._held.values()), default=now + 60.0)
            for t, (e, run_id, ttl, _) in due:
                self._beat(t, e, run_id, ttl)
            self._wake.wait(max(nxt - time.monotonic(), 0.01))

    def _beat(self, token: int, engine: Holder, run_id: str, ttl: float) -> None:
        limit = engine.step_timeout
        with self._lock:
            since = self._progress.get(token)
        try:
            if limit is not None and since is not None and time.monotonic() - since > limit:
                # No progress: give the run back rather than keep it from everyone.
                self.drop(token)
                engine.store.release(run_id, engine.owner)
            elif not engine.store.renew(run_id, engine.owner, engine.clock(), ttl):
                self.drop(token)  # lost: the fence refuses this process's next write
        except FSMError:
            pass  # the database is unreachable: try again on the next beat (or it expires)


class Lease:
    """``with Lease(engine, run_id)``: the run's lease, renewed until the block ends, then
    released (or kept until the next try is due, after an :class:`Unavailable`);
    ``forget(run_id)`` is called at the end (the engine drops what it read of the run)."""

    def __init__(self, engine: Holder, run_id: str, force: bool = False, *,
                 forget: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self._forget = forget
        self.run_id = run_id
        self.force = force
        self._token: int | None = None
        self._held: tuple[str, str] | None = None

    def __enter__(self) -> str | None:
        e, ttl = self.engine, self.engine.lease_seconds
        e.heartbeats.drive(e.owner, self.run_id)
        self._held = (e.owner, self.run_id)
        try:
            previous = e.store.acquire(self.run_id, e.owner, e.clock(), force=self.force,
                                       ttl=ttl)
        except BaseException:
            self._let_go()
            raise
        try:
            self._token = e.heartbeats.hold(e, self.run_id, ttl)
        except BaseException:  # no heartbeat (no thread to be had): give the run back
            self.__exit__()
            raise
        return previous

    def _let_go(self) -> None:
        if self._held is not None:
            self.engine.heartbeats.driven(*self._held)
            self._held = None

    def __exit__(self, kind: object = None, exc: object = None, tb: object = None) -> None:
        e = self.engine
        if self._token is not None:
            e.heartbeats.drop(self._token)
        try:
            if isinstance(exc, Unavailable) and exc.retry_in is not None:
                # Backing off: the run stays leased until the next try is due, so that
                # no process tries it sooner; then anyone may.
                e.store.renew(self.run_id, e.owner, e.clock(), exc.retry_in)
            else:
                e.store.release(self.run_id, e.owner)
        except FSMError:
            pass  # the database is unreachable: the lease expires on its own
        finally:
            if self._forget is not None:
                self._forget(self.run_id)
            self._let_go()
