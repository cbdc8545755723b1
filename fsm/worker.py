"""The fleet worker: a stateless process that drives whatever runs are runnable.

Any number of workers, on any number of machines, share one database. A worker
claims runs that are ``running`` and free (unleased, expired, or left by a dead
process of this host) with :meth:`Store.claim_runnable` — ``FOR UPDATE SKIP LOCKED``
on PostgreSQL — and drives up to ``concurrency`` of them at once on threads (a
policy call is slow I/O). It wakes on ``LISTEN/NOTIFY`` when the store can notify,
and polls otherwise; one worker at a time (an advisory lock) applies expired
approvals. On :meth:`Worker.stop` (SIGTERM) it claims nothing more, lets each run
finish the step it is in, releases the leases and returns.

A worker that loses a lease (it was paused, or cut off, past the lease time and
another worker took the run) has its next commit or write refused by the store
(:class:`~fsm.errors.LeaseLost`); it drops the run and says so.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fsm.errors import FSMError, LeaseLost, WorkflowNotFound
from fsm.records import (
    FINAL_STATUSES,
    Approval,
    Effect,
    Event,
    RunState,
    StepCommit,
    ViewRecord,
    start_detail,
    started_as,
)
from fsm.registry import load_workflow
from fsm.runtime.compaction import Compactor
from fsm.runtime.engine import Engine
from fsm.spec import WorkflowSpec
from fsm.store.base import Claimed, Lease, Store
from fsm.store.lease import new_owner
from fsm.tools import Resources

Clock = Callable[[], float]


class Stopping(Exception):
    """Raised after a step's commit when the worker is stopping: the run is released."""


@dataclass
class WorkerConfig:
    """How a worker runs. Defaults suit a policy that calls a remote model."""

    #: Runs driven at once (threads).
    concurrency: int = 4
    #: Only runs of these workflows (``None``: every workflow).
    workflows: list[str] | None = None
    #: Drive every run with this policy (``module:attr``) instead of the one it recorded.
    policy: str | None = None
    #: Seconds a lease lasts without a heartbeat; a dead worker's runs wait this long.
    lease_seconds: float = 30.0
    #: Seconds between polls when no notification arrives.
    poll_seconds: float = 1.0
    #: Seconds between sweeps of expired approvals.
    sweep_seconds: float = 5.0


@dataclass
class Counts:
    """What a worker has done, for ``--stats`` and the metrics endpoint."""

    taken: int = 0
    finished: int = 0
    paused: int = 0
    dropped: int = 0
    released: int = 0
    steps: int = 0
    expired: int = 0
    recent_steps: collections.deque[float] = field(default_factory=collections.deque)


class Worker:
    """Claims and drives runnable runs until :meth:`stop`."""

    def __init__(self, store: Store, config: WorkerConfig | None = None, *,
                 clock: Clock = time.time, log: Callable[[str], None] = print) -> None:
        self.store = store
        self.config = config or WorkerConfig()
        self.clock = clock
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.counts = Counts()
        self._log = log
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[None]] = {}
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._specs: dict[tuple[str, str], tuple[WorkflowSpec, Any]] = {}
        self._resources: dict[str, Resources] = {}

    # -- the loop -------------------------------------------------------------------

    def run(self) -> None:
        """Claim and drive runs until :meth:`stop`; then wait for the runs in flight."""
        listening = threading.Event()
        pushed = self.store.subscribe(self._wake, listening)
        self.say(f"started (concurrency {self.config.concurrency}, "
                 f"{'LISTEN/NOTIFY' if pushed else 'polling'} every "
                 f"{self.config.poll_seconds:g}s, lease {self.config.lease_seconds:g}s)")
        last_sweep = 0.0
        with ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="fsm-run") as pool:
            while not self._stopping.is_set():
                self._wake.clear()
                self._fill(pool)
                if time.monotonic() - last_sweep >= self.config.sweep_seconds:
                    last_sweep = time.monotonic()
                    self._sweep()
                self._wake.wait(self.config.poll_seconds)
            for future in list(self._inflight.values()):
                future.result()
        listening.set()
        self.close_resources()
        self.say("stopped")

    def stop(self) -> None:
        """Claim nothing more; each run stops after its current step and is released."""
        self._stopping.set()
        self._wake.set()

    def _fill(self, pool: ThreadPoolExecutor) -> None:
        while len(self._inflight) < self.config.concurrency and not self._stopping.is_set():
            owner = new_owner()
            try:
                claimed = self.store.claim_runnable(
                    owner, self.clock(), self.config.lease_seconds,
                    workflows=self.config.workflows, limit=1)
            except FSMError as exc:
                self.say(f"cannot claim runs: {exc}")
                return
            if not claimed:
                return
            c = claimed[0]
            with self._lock:
                self._inflight[c.run_id] = pool.submit(self._drive, c, owner)

    # -- one run --------------------------------------------------------------------

    def _drive(self, claimed: Claimed, owner: str) -> None:
        run_id = claimed.run_id
        try:
            self._count("taken")
            self.say(f"taken {run_id} ({claimed.workflow})"
                     + (f" from {claimed.previous}" if claimed.previous else ""))
            engine = self._engine(run_id, owner)
            run = engine.resume(run_id)
            self._report(run)
        except Stopping:
            self._count("released")
            self.say(f"released {run_id} (stopping)")
        except LeaseLost as exc:
            self._count("dropped")
            self.say(f"dropped {run_id}: lease lost to {exc.holder or 'nobody'}; "
                     "its commit/write was refused")
        except Exception as exc:  # noqa: BLE001 - a worker survives any one run's failure
            self._count("dropped")
            self.say(f"dropped {run_id}: {type(exc).__name__}: {exc}; retried once its "
                     f"lease expires ({self.config.lease_seconds:g}s)")
            self._hold(run_id, owner)
        finally:
            with self._lock:
                self._inflight.pop(run_id, None)
            self._wake.set()

    def _report(self, run: RunState) -> None:
        if run.status == "awaiting_approval":
            self._count("paused")
            self.say(f"paused {run.run_id} (awaiting approval)")
        elif run.status in FINAL_STATUSES:
            self._count("finished")
            self.say(f"finished {run.run_id} ({run.status})")
        else:
            self._count("dropped")
            self.say(f"dropped {run.run_id}: stopped as {run.status} ({run.reason})")

    def _hold(self, run_id: str, owner: str) -> None:
        """Keep a failed run's lease until it expires: the retry waits, nobody spins on it."""
        try:
            self.store.acquire(run_id, owner, self.clock(), ttl=self.config.lease_seconds)
        except FSMError:
            pass  # taken by another worker already, or the database is unreachable

    def _engine(self, run_id: str, owner: str) -> Engine:
        spec, policy = self._parts(self.store.load_run(run_id), self.store.events(run_id))
        engine = Engine(spec, _WorkerStore(self.store, self), policy, clock=self.clock,
                        compactor=Compactor(), resources=self._resources_of(spec))
        engine.owner = owner
        engine.lease_seconds = self.config.lease_seconds
        return engine

    def _resources_of(self, spec: WorkflowSpec) -> Resources:
        """One set of a workflow's resources for every run this worker drives."""
        with self._lock:
            found = self._resources.get(spec.name)
            if found is None:
                found = self._resources[spec.name] = Resources(spec.resources,
                                                               self.store.location)
            return found

    def close_resources(self) -> None:
        """Close the workflow resources the worker opened."""
        with self._lock:
            opened, self._resources = self._resources, {}
        for resources in opened.values():
            resources.close()

    def _parts(self, run: RunState, events: list[Event]) -> tuple[WorkflowSpec, Any]:
        """The workflow the run started under and the policy it recorded (or the override)."""
        start = start_detail(events)
        ref = started_as(events, run.workflow)
        policy = self.config.policy or str(start.get("policy") or "default")
        with self._lock:
            if (ref, policy) not in self._specs:
                spec = load_workflow(ref)
                self._specs[ref, policy] = (spec, _policy(ref, spec, policy, start))
            return self._specs[ref, policy]

    # -- expired approvals ----------------------------------------------------------

    def _sweep(self) -> None:
        try:
            with self.store.sweep_lock() as mine:
                if not mine:
                    return
                # One sweep per workflow applies all of its due approvals.
                by_workflow: dict[str, RunState] = {}
                for a in self.store.approvals(pending_only=True):
                    if a.expires_at <= self.clock():
                        run = self.store.load_run(a.run_id)
                        by_workflow.setdefault(run.workflow, run)
                for run in by_workflow.values():
                    self._expire(run)
        except FSMError as exc:
            self.say(f"cannot sweep: {exc}")

    def _expire(self, run: RunState) -> None:
        """Sweep the expired approvals of ``run``'s workflow."""
        spec, _ = self._parts(run, self.store.events(run.run_id))
        engine = Engine(spec, self.store, clock=self.clock, resources=self._resources_of(spec))
        engine.lease_seconds = self.config.lease_seconds
        for run_id in engine.sweep():
            self._count("expired")
            after = self.store.load_run(run_id)
            self.say(f"expired {run_id}'s approval → {after.state} ({after.status})")

    # -- reporting ------------------------------------------------------------------

    def say(self, line: str) -> None:
        with self._lock:
            self._log(f"worker {self.name}: {line}")

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.counts, what, getattr(self.counts, what) + 1)

    def _stepped(self) -> None:
        now = time.monotonic()
        with self._lock:
            self.counts.steps += 1
            q = self.counts.recent_steps
            q.append(now)
            while q and q[0] < now - 10:
                q.popleft()

    def stats(self) -> dict[str, Any]:
        """Counts for operators: runs in flight, steps per second (last 10 s), totals."""
        with self._lock:
            now = time.monotonic()
            recent = sum(1 for t in self.counts.recent_steps if t >= now - 10)
            c = self.counts
            out: dict[str, Any] = {
                "in_flight": len(self._inflight), "concurrency": self.config.concurrency,
                "steps_per_second": recent / 10, "steps": c.steps, "taken": c.taken,
                "finished": c.finished, "paused": c.paused, "dropped": c.dropped,
                "released": c.released, "expired": c.expired,
            }
        try:
            out["approvals_waiting"] = len(self.store.approvals(pending_only=True))
        except FSMError:
            out["approvals_waiting"] = None
        return out

    @contextmanager
    def serving_metrics(self, port: int, host: str = "127.0.0.1") -> Iterator[int]:
        """Serve :meth:`stats` as Prometheus text on ``http://host:port/metrics``."""
        from fsm.metrics import serve

        with serve(self.stats, host, port) as bound:
            yield bound


def _policy(ref: str, spec: WorkflowSpec, name: str, start: dict[str, Any]) -> Any:
    from fsm.adapters.recorded import recorded_policy  # imports the model adapter

    found = recorded_policy(ref, spec, start, name)
    if found is None:
        raise WorkflowNotFound(f"workflow {ref!r} ships no default policy; start the worker "
                               "with --policy module:attr")
    return found


def fleet_stats(store: Store, now: float) -> dict[str, Any]:
    """What the database says about the fleet: runs by status, leased, runnable, waiting."""
    by_status: dict[str, int] = collections.Counter()
    leased = runnable = stale = 0
    steps = 0
    for run in store.list_runs():
        by_status[run.status] += 1
        if run.status == "running":
            lease = store.lease(run.run_id)
            if lease is not None and (lease.until is None or lease.until > now):
                leased += 1
            else:
                runnable += 1
                stale += lease is not None
        if run.updated_at >= now - 60:
            steps += sum(1 for e in store.events(run.run_id)
                         if e.kind == "policy" and e.time >= now - 60)
    return {"runs": dict(sorted(by_status.items())), "in_flight": leased,
            "runnable": runnable, "expired_leases": stale,
            "approvals_waiting": len(store.approvals(pending_only=True)),
            "steps_per_second": round(steps / 60, 3)}


class _WorkerStore(Store):
    """The worker's view of the store: counts steps, and stops a run after its step
    when the worker is stopping (the commit has landed; the lease is then released)."""

    def __init__(self, inner: Store, worker: Worker) -> None:
        self.inner = inner
        self.worker = worker
        self.location = inner.location

    def commit(self, commit: StepCommit) -> RunState:
        run = self.inner.commit(commit)
        self.worker._stepped()
        if self.worker._stopping.is_set() and run.status == "running":
            raise Stopping(run.run_id)
        return run

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        return self.inner.create_run(run, commit)

    def load_run(self, run_id: str) -> RunState:
        return self.inner.load_run(run_id)

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0,
                  newest_first: bool = False) -> list[RunState]:
        return self.inner.list_runs(status, workflow=workflow, limit=limit, offset=offset,
                                    newest_first=newest_first)

    def messages(self, run_id: str, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        return self.inner.messages(run_id, start, end)

    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        return self.inner.view_record(run_id, step)

    def events(self, run_id: str) -> list[Event]:
        return self.inner.events(run_id)

    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None) -> Effect | None:
        return self.inner.claim_effect(effect, owner=owner, version=version)

    def effect(self, key: str) -> Effect | None:
        return self.inner.effect(key)

    def effects(self, run_id: str) -> list[Effect]:
        return self.inner.effects(run_id)

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True) -> list[Approval]:
        return self.inner.approvals(run_id, pending_only=pending_only)

    def artifact(self, sha256: str) -> str | None:
        return self.inner.artifact(sha256)

    def log_head(self, run_id: str) -> tuple[int, str]:
        return self.inner.log_head(run_id)

    def snapshot_text(self, run_id: str) -> str:
        return self.inner.snapshot_text(run_id)

    def run_columns(self, run_id: str) -> tuple[str, str]:
        return self.inner.run_columns(run_id)

    def approval(self, approval_id: str) -> Approval | None:
        return self.inner.approval(approval_id)

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        return self.inner.acquire(run_id, owner, now, force=force, ttl=ttl)

    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        return self.inner.renew(run_id, owner, now, ttl)

    def release(self, run_id: str, owner: str) -> None:
        self.inner.release(run_id, owner)

    def lease(self, run_id: str) -> Lease | None:
        return self.inner.lease(run_id)

    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1) -> list[Claimed]:
        return self.inner.claim_runnable(owner, now, ttl, workflows=workflows, limit=limit)
