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
(:class:`~fsm.errors.LeaseLost`); it drops the run and says so. A run whose step the
infrastructure failed (:class:`~fsm.errors.Unavailable`) stays leased until its next try
is due, then any worker tries it again; a step that makes no progress for
``step_timeout`` seconds gives its lease back, and the worker leaves that run to the
others while the step is still in flight (it never drives one run on two threads).

A worker claims only runs whose definitions its code keeps (the current version of a
workflow and its ``earlier`` ones): during a rolling deploy, workers of the old release
leave runs of the new version to the new workers, and the new workers still finish the
runs of the old version. It learns which definitions runnable runs need from the run
rows, and tries each new one once by importing the workflow the run was started with.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fsm.definition.registry import load_workflow
from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import Resources
from fsm.errors import (
    FSMError,
    LeaseLost,
    RowDamaged,
    Unavailable,
    WorkflowNotFound,
)
from fsm.observability.hooks import CommitInfo, Hooks, adopt, in_scope, scope
from fsm.observability.metrics import RunMetrics, registry_for, serve
from fsm.records import (
    FINAL_STATUSES,
    Event,
    RunState,
    canonical,
    policy_record,
    started_as,
)
from fsm.runtime.compaction import Compactor
from fsm.runtime.config import EngineConfig
from fsm.runtime.engine import Engine
from fsm.runtime.leases import Heartbeats
from fsm.runtime.retry import Retry
from fsm.settings import Settings
from fsm.store.base import Claimed, Lease, Store
from fsm.store.lease import lease_expired, new_owner
from fsm.store.roles import Fleet, RunReads

Clock = Callable[[], float]


class _WorkerHooks(Hooks):
    """What a worker does at each commit of the runs it drives: count the step."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def after_commit(self, commit: CommitInfo) -> None:
        if not commit.initial:
            self.worker._stepped()


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
    #: Seconds between sweeps of expired approvals and waits for customers.
    sweep_seconds: float = 5.0
    #: Seconds a step may last before the worker gives the run's lease back (``None``:
    #: never): a run stuck on something that never answers goes to another worker.
    step_timeout: float | None = 300.0
    #: How runs whose steps the infrastructure failed are tried again.
    retry: Retry = field(default_factory=Retry)
    #: What builds a model's policy (its key, prices, tool choice; default: the defaults).
    settings: Settings | None = None
    #: ``--async`` only: threads for the store's work and the tools (default: as many as
    #: the store has connections).
    threads: int | None = None
    #: ``--async`` only: drive the runs' steps on the event loop through the store's async
    #: driver where it has one (PostgreSQL: psycopg's async pool), not in the threads.
    #: It holds no thread per statement, but costs more CPU per step (bench/fleet.py).
    store_on_loop: bool = False


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
    #: Steps the infrastructure failed (each retried later, or handed over at the bound).
    unavailable: int = 0
    #: Rows found damaged (each counted once): skipped, so that the rest of the fleet goes on.
    damaged: int = 0
    recent_steps: collections.deque[float] = field(default_factory=collections.deque)


class Worker:
    """Claims and drives runnable runs until :meth:`stop`."""

    #: A model's policy is the async one (its calls awaited on an event loop).
    AWAITS_MODELS = False

    def __init__(self, store: Store, config: WorkerConfig | None = None, *,
                 clock: Clock = time.time, log: Callable[[str], None] = print,
                 hooks: Iterable[Hooks] | None = None) -> None:
        self.store = store
        #: The hooks every engine of this worker gets (default: those in scope where the
        #: worker is made, see :func:`fsm.observability.hooks.scope`), whatever thread makes it.
        self.hooks = tuple(in_scope() if hooks is None else hooks)
        self.config = config or WorkerConfig()
        self.clock = clock
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.counts = Counts()
        #: The leases of every run this worker drives, renewed by one thread.
        self.heartbeats = Heartbeats()
        self._log = log
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[None]] = {}
        #: The owner of each lease this worker took and may still hold: the runs in
        #: flight, and failed runs it keeps until their lease expires (see _hold; the
        #: leases-held count forgets those once they expired or were taken).
        self._owners: dict[str, str] = {}
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._specs: dict[tuple[str, str], tuple[WorkflowSpec, Any]] = {}
        self._resources: dict[str, Resources] = {}
        #: The damaged rows (table, run, key) and the runs that could not be swept (run,
        #: why) met so far: each is said once, and each damaged row counted once.
        self._said: set[tuple[str | None, ...]] = set()
        #: Hashes of the definitions this worker's code keeps: the only runs it claims.
        self.definitions: set[str] = set()
        #: Definitions already looked at (kept or not); the code cannot change meanwhile.
        self._looked: set[str] = set()
        #: ``module:attr`` or registered name → the workflow it imports (None: it fails).
        self._families: dict[str, WorkflowSpec | None] = {}
        self._last_look = -1e18
        #: The steps, tokens and cost of the runs this worker drives (a hook of each).
        self.run_metrics = RunMetrics()
        #: What ``GET /metrics`` serves: the run metrics and :meth:`stats`.
        self.metrics_registry = registry_for(self.stats, self.run_metrics)

    # -- the loop -------------------------------------------------------------------

    def run(self) -> None:
        """Claim and drive runs until :meth:`stop`; then wait for the runs in flight. The
        worker's hooks are the ones in scope here (its sweeps, the fault points of the
        stores), whichever thread runs it."""
        with scope(*self.hooks, alone=True):
            self._run()

    def _run(self) -> None:
        listening = threading.Event()
        pushed = self.store.subscribe(self._wake, listening)
        self.say(f"started (concurrency {self.config.concurrency}, "
                 f"{'LISTEN/NOTIFY' if pushed else 'polling'} every "
                 f"{self.config.poll_seconds:g}s, lease {self.config.lease_seconds:g}s)")
        last_sweep = 0.0
        with ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="fsm-run",
                                initializer=adopt, initargs=(self.hooks,)) as pool:
            while not self._stopping.is_set():
                self._wake.clear()
                self._fill(pool)
                if time.monotonic() - last_sweep >= self.config.sweep_seconds:
                    last_sweep = time.monotonic()
                    self._sweep()
                self._wake.wait(self.config.poll_seconds)
            for run_id, future in list(self._inflight.items()):
                self._finished(run_id, future)
        listening.set()
        self.close_resources()
        self.say("stopped")

    def _finished(self, run_id: str, future: Any) -> None:
        """Wait for a run in flight at shutdown; what it raised is said in one line."""
        try:
            future.result()
        except Exception as exc:  # noqa: BLE001 - said, not raised: the worker is stopping
            self.say(f"run {run_id}: stopped with {_line(exc)}")

    def stop(self) -> None:
        """Claim nothing more; each run stops after its current step and is released."""
        self._stopping.set()
        self._wake.set()

    def _fill(self, pool: ThreadPoolExecutor) -> None:
        while len(self._inflight) < self.config.concurrency and not self._stopping.is_set():
            owner = new_owner()
            try:
                claimed = self._claim_some(owner, 1)
            except FSMError as exc:
                self.say(f"cannot claim runs: {exc}")
                return
            if not claimed:
                return
            c = claimed[0]
            with self._lock:
                self._owners[c.run_id] = owner
                self._inflight[c.run_id] = pool.submit(self._drive, c, owner)

    def _claim_some(self, owner: str, limit: int) -> list[Claimed]:
        """Claim up to ``limit`` runnable runs for ``owner``; when there are none, look for
        definitions this worker keeps that it has not looked at, and try once more."""
        claimed = self._claim(owner, limit)
        if not claimed and self._look():
            claimed = self._claim(owner, limit)
        return claimed

    def _claim(self, owner: str, limit: int) -> list[Claimed]:
        with self._lock:  # a run it gave back from a step still in flight is not retaken
            inflight = set(self._inflight)
        return self.store.claim_runnable(
            owner, self.clock(), self.config.lease_seconds, workflows=self.config.workflows,
            limit=limit, definitions=sorted(self.definitions), exclude=inflight)

    # -- which definitions this worker keeps --------------------------------------------

    def _look(self) -> bool:
        """Learn the definitions runnable runs need that this worker has not looked at
        (at most once per poll interval); True when it now keeps more of them."""
        if time.monotonic() - self._last_look < self.config.poll_seconds:
            return False
        self._last_look = time.monotonic()
        before = len(self.definitions)
        for count in self.store.definition_counts(status="running"):
            if count.definition_hash in self._looked:
                continue
            if self.config.workflows and count.workflow not in self.config.workflows:
                continue
            # Looked at once considered: a read that fails here (the database went away
            # for a moment) leaves the definition to the next look, not unknown for good.
            self._consider(count.workflow, count.definition_hash, count.sample)
            self._looked.add(count.definition_hash)
        return len(self.definitions) > before

    def _consider(self, workflow: str, definition_hash: str, sample: str) -> None:
        """Keep ``definition_hash`` if the workflow its run ``sample`` was started with
        defines it here; else say once that its runs are left to other workers."""
        ref = started_as(self.store.events(sample), workflow)
        family = self._family(ref)
        if family is not None and family.version_for(definition_hash) is not None:
            self.definitions.update(v.definition_hash for v in family.versions)
            return
        record = self.store.definition(definition_hash)
        needs = f"version {record.version} ({definition_hash})" if record and record.version \
            else definition_hash
        keeps = ", ".join(v.label for v in family.versions) if family else "nothing: " \
            f"{ref!r} does not import here"
        self.say(f"leaves runs of {workflow} {needs} to workers that define it "
                 f"(this worker keeps {keeps})")

    def _family(self, ref: str) -> WorkflowSpec | None:
        """The workflow ``ref`` imports here (with its kept versions), or ``None``."""
        with self._lock:
            if ref not in self._families:
                try:
                    self._families[ref] = load_workflow(ref)
                except FSMError:
                    self._families[ref] = None
            return self._families[ref]

    # -- one run --------------------------------------------------------------------

    def _drive(self, claimed: Claimed, owner: str) -> None:
        run_id = claimed.run_id
        keeps_lease = False  # a failed step's lease stays until it expires
        try:
            self._taken(claimed)
            engine = self._engine(run_id, owner)
            run: RunState | None = None
            for outcome in engine.steps(run_id):
                run = outcome.run
                if self._stopping.is_set() and run.status == "running":
                    break  # the step's commit has landed: the lease is given back
            else:
                self._report(run or self.store.load_run(run_id))
                return
            self._released(run_id)
        except Exception as exc:  # noqa: BLE001 - a worker survives any one run's failure
            keeps_lease = self._failed(run_id, owner, exc)
        finally:
            self._let_go(run_id, owner, keeps_lease)

    # The parts of driving one run that do not depend on how it is driven (on a thread,
    # or from an event loop: fsm.worker_async).

    def _taken(self, claimed: Claimed) -> None:
        self._count("taken")
        self.say(f"taken {claimed.run_id} ({claimed.workflow})"
                 + (f" from {claimed.previous}" if claimed.previous else ""))

    def _released(self, run_id: str) -> None:
        self._count("released")
        self.say(f"released {run_id} (stopping)")

    def _failed(self, run_id: str, owner: str, exc: Exception) -> bool:
        """Say and count why driving ``run_id`` stopped; whether its lease is kept until
        it expires (or the next try is due)."""
        if isinstance(exc, LeaseLost):
            self._count("dropped")
            self.say(f"dropped {run_id}: lease lost to {exc.holder or 'nobody'}; "
                     "its commit/write was refused")
            return False
        if isinstance(exc, Unavailable):
            self._count("unavailable")
            when = f"in {exc.retry_in:.1f}s" if exc.retry_in is not None else \
                f"once its lease expires ({self.config.lease_seconds:g}s)"
            self.say(f"unavailable {run_id}: {exc}; tried again {when}")
            return True
        self._count("dropped")
        if isinstance(exc, RowDamaged):
            self.damaged([exc])
            self.say(f"dropped {run_id}: a row of it is damaged; retried once its lease "
                     f"expires ({self.config.lease_seconds:g}s)")
        else:
            self.say(f"dropped {run_id}: {type(exc).__name__}: {exc}; retried once its "
                     f"lease expires ({self.config.lease_seconds:g}s)")
        self._hold(run_id, owner)
        return True

    def _let_go(self, run_id: str, owner: str, keeps_lease: bool) -> None:
        with self._lock:
            self._inflight.pop(run_id, None)
            if not keeps_lease and self._owners.get(run_id) == owner:
                del self._owners[run_id]  # released, or lost: no lease of ours is left
        self._wake.set()

    def _report(self, run: RunState) -> None:
        if run.status in ("awaiting_approval", "awaiting_customer"):
            self._count("paused")
            self.say(f"paused {run.run_id} ({run.status.replace('_', ' ')})")
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
        return Engine(spec, self.store, policy, clock=self.clock,
                      config=EngineConfig(retry=self.config.retry, owner=owner,
                                          lease_seconds=self.config.lease_seconds,
                                          step_timeout=self.config.step_timeout),
                      compactor=Compactor(), resources=self._resources_of(spec),
                      hooks=[*self.hooks, _WorkerHooks(self), self.run_metrics],
                      heartbeats=self.heartbeats)

    def _resources_of(self, spec: WorkflowSpec) -> Resources:
        """One set of a workflow's resources for every run this worker drives."""
        with self._lock:
            found = self._resources.get(spec.name)
            if found is None:
                found = self._resources[spec.name] = Resources(spec.resources,
                                                               self.store.location)
            return found

    def close_resources(self) -> None:
        """Close the workflow resources the worker opened; one that cannot be closed here
        (a SQLite connection opened on another thread refuses) is said in one line."""
        with self._lock:
            opened, self._resources = self._resources, {}
        for workflow, resources in opened.items():
            for name, exc in resources.close(errors=True):
                self.say(f"could not close resource {name!r} of workflow {workflow!r}: "
                         f"{_line(exc)}")

    def _parts(self, run: RunState, events: list[Event]) -> tuple[WorkflowSpec, Any]:
        """The workflow the run started under and the policy it recorded (or the override)."""
        start = policy_record(events)
        ref = started_as(events, run.workflow)
        policy = self.config.policy or str(start.get("policy") or "default")
        if policy.startswith("model:"):  # one per endpoint and settings
            policy = canonical([policy, start.get("base_url"), start.get("timeout"),
                                start.get("settings")])
        spec = self._family(ref) or load_workflow(ref)  # load again: its error, in full
        with self._lock:
            if (ref, policy) not in self._specs:
                self._specs[ref, policy] = (spec, _policy(ref, spec, self.config.policy,
                                                          start, self.config.settings,
                                                          self.AWAITS_MODELS))
            found = self._specs[ref, policy]
            remember = getattr(found[1], "remember", None)
            if remember is not None:  # what the run's log learnt about its model server
                remember(events)
            return found

    # -- expired approvals ----------------------------------------------------------

    def _sweep(self) -> None:
        """Apply expired approvals. Each run is swept on its own: a damaged row, or a run
        that cannot be written, is said and skipped, and the rest are swept."""
        try:
            with self.store.sweep_lock() as mine:
                if mine:
                    for run in self._due_by_workflow():
                        self._expire(run)
        except Exception as exc:  # noqa: BLE001 - the loop outlives any one sweep
            self.say(f"cannot sweep: {_line(exc)}")

    def _due_by_workflow(self) -> list[RunState]:
        """One run of each workflow that has an expired approval or a run waiting for its
        customer: one sweep per workflow applies all that is due in it."""
        damaged: list[RowDamaged] = []
        by_workflow: dict[str, RunState] = {}
        pending = self.store.approvals(pending_only=True, skip_damaged=True)
        damaged += pending.damaged
        for a in pending:
            if a.expires_at <= self.clock():
                try:
                    run = self.store.load_run(a.run_id)
                except FSMError as exc:
                    self._cannot_sweep(a.run_id, exc)
                    continue
                by_workflow.setdefault(run.workflow, run)
        # Waits for customers: expired, or holding a reply a process left unread.
        waiting = self.store.list_runs("awaiting_customer", skip_damaged=True)
        damaged += waiting.damaged
        for run in waiting:
            by_workflow.setdefault(run.workflow, run)
        self.damaged(damaged)
        return list(by_workflow.values())

    def _expire(self, run: RunState) -> None:
        """Sweep the expired approvals and the waits for customers of ``run``'s workflow."""
        try:
            spec, _ = self._parts(run, self.store.events(run.run_id))
            engine = Engine(spec, self.store, clock=self.clock,
                            config=EngineConfig(lease_seconds=self.config.lease_seconds),
                            resources=self._resources_of(spec), heartbeats=self.heartbeats,
                            hooks=self.hooks)
            waits = set(self._waiting_customers(run.workflow))
            swept = engine.sweep(raising=False)  # its damaged rows: said already
        except Exception as exc:  # noqa: BLE001 - one workflow never stops the others
            self.say(f"cannot sweep the runs of workflow {run.workflow!r}: {_line(exc)}")
            return
        for run_id in swept:
            self._count("expired")
            try:
                after = self.store.load_run(run_id)
                what = (f"swept {run_id}'s conversation (expired, or a reply left unread)"
                        if run_id in waits else f"expired {run_id}'s approval")
                self.say(f"{what} → {after.state} ({after.status})")
            except FSMError:
                self.say(f"swept {run_id}")
        for run_id, why in swept.failed:
            self._once(("sweep", run_id, why), f"cannot sweep {run_id}: {why}")

    def _waiting_customers(self, workflow: str) -> list[str]:
        """The runs of ``workflow`` waiting for their customer (for the sweep's words)."""
        return [r.run_id for r in self.store.list_runs("awaiting_customer", workflow=workflow,
                                                       skip_damaged=True)]

    def _cannot_sweep(self, run_id: str, exc: FSMError) -> None:
        if isinstance(exc, RowDamaged):
            self.damaged([exc])
        else:
            self._once(("sweep", run_id, str(exc)), f"cannot sweep {run_id}: {exc}")

    def damaged(self, rows: list[RowDamaged]) -> None:
        """Say and count each damaged row the first time this worker meets it."""
        for row in rows:
            if self._once(("damaged", row.table, row.run_id, row.key),
                          f"skipped a damaged row: {row}"):
                self._count("damaged")

    def _once(self, what: tuple[str | None, ...], line: str) -> bool:
        """Say ``line`` unless ``what`` was said before; whether it was said now. (Past
        :data:`_SAID_KEPT` distinct things, nothing more is remembered or said.)"""
        with self._lock:
            new = what not in self._said and len(self._said) < _SAID_KEPT
            if new:
                self._said.add(what)
        if new:
            self.say(line)
        return new

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
                "in_flight": len(self._inflight),
                "concurrency": self.config.concurrency,
                "steps_per_second": recent / 10, "steps": c.steps, "taken": c.taken,
                "finished": c.finished, "paused": c.paused, "dropped": c.dropped,
                "released": c.released, "expired": c.expired, "unavailable": c.unavailable,
                "damaged_rows": c.damaged,
            }
        out["leases_held"] = self._leases_held()
        try:
            out["approvals_waiting"] = self.store.count_waiting()
        except FSMError:
            out["approvals_waiting"] = None
        return out

    def _leases_held(self) -> int | None:
        """The run leases this worker holds now, as the store has them: a run it gave back
        from a step still in flight does not count, a failed run it keeps does."""
        with self._lock:
            owners = dict(self._owners)
        now, held = self.clock(), 0
        try:
            for run_id, owner in owners.items():
                lease = self.store.lease(run_id)
                if lease is not None and lease.owner == owner and \
                        not lease_expired(lease.until, now):
                    held += 1
                else:
                    with self._lock:
                        if run_id not in self._inflight and self._owners.get(run_id) == owner:
                            del self._owners[run_id]  # expired, or taken: no longer ours
        except FSMError:
            return None
        return held

    @contextmanager
    def serving_metrics(self, port: int, host: str = "127.0.0.1") -> Iterator[int]:
        """Serve :attr:`metrics_registry` (the run metrics and :meth:`stats`) on
        ``http://host:port/metrics``."""
        with serve(self.metrics_registry, host, port) as bound:
            yield bound


def _policy(ref: str, spec: WorkflowSpec, name: str | None, start: dict[str, Any],
            settings: Settings | None, awaited: bool) -> Any:
    from fsm.adapters.recorded import recorded_policy  # imports the model adapter

    found = recorded_policy(ref, spec, start, name, config=settings, awaited=awaited)
    if found is None:
        raise WorkflowNotFound(f"workflow {ref!r} ships no default policy; start the worker "
                               "with --policy module:attr")
    return found


def fleet_stats(store: Fleet, now: float,
                damaged: list[RowDamaged] | None = None) -> dict[str, Any]:
    """What the database says about the fleet: runs by status, leased, runnable, waiting.

    A row that cannot be read is left out of the counts, added to ``damaged`` and
    counted in ``damaged_rows`` (without ``damaged``, the first one is raised)."""
    found: list[RowDamaged] = []
    by_status: dict[str, int] = collections.Counter()
    leases = collections.Counter[str]()
    waits_on: dict[str, str | None] = {}
    steps = 0
    runs = store.list_runs(skip_damaged=True)
    found += runs.damaged
    for run in runs:
        by_status[run.status] += 1
        if run.status == "running":
            leases[_lease_kind(store.lease(run.run_id), now)] += 1
        if run.status == "awaiting_approval" and run.pending is not None:
            waits_on[run.run_id] = run.pending.approval_id
        if run.updated_at >= now - 60:
            steps += _recent_steps(store, run.run_id, now, found)
    # An approval waits when its run waits on it: a pending row of a run that moved on
    # (or was written outside a step) is no request anyone is asked to decide.
    pending = store.approvals(pending_only=True, skip_damaged=True)
    found += pending.damaged
    waiting = sum(1 for a in pending if waits_on.get(a.run_id) == a.approval_id)
    if damaged is None and found:
        raise found[0]
    if damaged is not None:
        damaged.extend(found)
    return {"runs": dict(sorted(by_status.items())), "in_flight": leases["held"],
            "runnable": leases["free"] + leases["expired"], "expired_leases": leases["expired"],
            "approvals_waiting": waiting, "damaged_rows": len(found),
            "steps_per_second": round(steps / 60, 3)}


def _lease_kind(lease: Lease | None, now: float) -> str:
    if lease is not None and (lease.until is None or lease.until > now):
        return "held"
    return "free" if lease is None else "expired"


def _recent_steps(store: RunReads, run_id: str, now: float, damaged: list[RowDamaged]) -> int:
    """Policy calls of the run in the last minute (0, and the row in ``damaged``, when its
    log cannot be read)."""
    try:
        return sum(1 for e in store.events(run_id) if e.kind == "policy" and e.time >= now - 60)
    except RowDamaged as exc:
        damaged.append(exc)
        return 0


#: Damaged rows and unsweepable runs a worker remembers having said.
_SAID_KEPT = 10_000


def _line(exc: BaseException) -> str:
    """An error on one line, with its type when it is not one of fsm's."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, FSMError) else f"{type(exc).__name__}: {text}"
