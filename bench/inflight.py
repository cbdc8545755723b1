"""Many runs in flight in one worker process: the threaded worker beside ``--async``.

For each worker kind, ``in_flight`` refund runs (seven policy calls each, none above the
approval limit) are submitted to PostgreSQL and held under a lease of nobody's; one
``fsm worker`` process is started with ``--concurrency in_flight`` and left idle; then
every hold is let go, and the clock runs until the last run is done. The policy is the
clerk after a fixed model latency (``slow_clerk`` on threads, ``slow_clerk_async``
awaited with ``--async``).

Figures of each row:

- ``fraction_of_limit``: the latency limit over the time taken. At the limit every run
  is in flight at once and takes only its model's time (policy calls x latency), so
  the fleet ends one run's model time after the first release;
- ``rss_per_run_kb``: the worker's peak RSS less its RSS when idle before the release,
  over the most runs it held at once;
- ``p99_pickup_ms``: from the release of a run's hold (runnable) to its first policy
  call (its first step), the 99th percentile;
- where the CPU went: the worker's CPU per step and the share of it spent in the kernel
  (``stime``: scheduling, sockets, the GIL's futexes), the context switches of all the
  worker's threads per step, PostgreSQL's CPU per step (its server processes), and the
  machine's busy fraction over the window.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from fsm import Engine, open_store
from fsm.records import FINAL_STATUSES
from workflows.refund import build
from workflows.refund.fleet import POLICY, POLICY_ASYNC
from workflows.refund.shop import PostgresShop

HOLD = "bench-hold.example:1:hold"
#: Policy calls of one small refund (the clerk's path to ``done``).
CALLS_PER_RUN = 7
TICKS = os.sysconf("SC_CLK_TCK")
#: The worker kinds measured, and the letter of their runs' ids: the threaded worker;
#: ``--async`` (the store's work in its threads); ``--async --store-on-loop`` (the steps
#: driven on the loop, their statements through psycopg's async pool).
KINDS = {"threads": "t", "async": "a", "async-store-on-loop": "l"}


def submit(url: str, prefix: str, letter: str, n: int) -> list[str]:
    """``n`` small refunds (orders ``LETTER-0000`` on), held so that no worker can start
    them yet."""
    shop, store = PostgresShop(url).seed_demo(), open_store(url)
    try:
        engine = Engine(build(shop), store)
        ids = []
        for i in range(n):
            oid = f"{letter}-{i:04d}"
            shop.add_order(oid, f"{prefix}{i}", f"it-{i}", "item", 30_000, 2)
            run = engine.start(f"Order {oid}: broken", user=f"{prefix}{i}",
                               run_id=f"{prefix}-{i}", drive=False,
                               meta={"workflow_ref": "refund", "policy": POLICY})
            store.acquire(run.run_id, HOLD, time.time(), ttl=7200)
            ids.append(run.run_id)
        return ids
    finally:
        store.close()
        shop.close()


def _cpu_split(pid: int) -> tuple[float, float]:
    """CPU seconds of the process: (in user space, in the kernel)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS  # utime, stime


def _cpu_seconds(pid: int) -> float:
    return sum(_cpu_split(pid))


def _kernel_seconds(pid: int) -> float:
    return _cpu_split(pid)[1]


def _switches(pid: int) -> dict[str, int]:
    """Context switches (voluntary and not) of each of the process's threads alive now."""
    counts = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            lines = (task / "status").read_text().splitlines()
        except OSError:
            continue  # the thread ended
        counts[task.name] = sum(int(line.split()[1]) for line in lines if line.startswith(
            ("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")))
    return counts


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _postgres_cpu() -> float:
    """CPU seconds of the PostgreSQL server processes alive now."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(f"/proc/{entry}/comm").read_text().strip() in ("postgres", "postmaster"):
                total += _cpu_seconds(int(entry))
        except OSError:
            continue
    return total


def _machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def measure(url: str, kind: str, in_flight: int, latency: float, logs: Path, letter: str,
            threads: int | None = None) -> dict[str, Any]:
    """One worker process of ``kind`` (see :data:`KINDS`) with ``in_flight`` runs."""
    prefix = f"{KINDS[kind]}{int(latency * 1000)}x{in_flight}"
    ids = submit(url, prefix, letter, in_flight)
    first = logs / f"{prefix}-first.txt"
    env = {**os.environ, "FSM_DB": url, "FSM_CLERK_SLEEP": str(latency),
           "FSM_CLERK_FIRST": str(first)}
    args = [sys.executable, "-m", "fsm", "worker", "--db", url, "--concurrency",
            str(in_flight), "--poll-seconds", "0.2", "--lease-seconds", "60",
            "--step-timeout", "0"]
    evented = kind != "threads"
    args += ["--async", "--policy", POLICY_ASYNC] if evented else ["--policy", POLICY]
    if kind == "async-store-on-loop":
        args.append("--store-on-loop")
    if threads is not None and evented:
        args += ["--threads", str(threads)]
    log = logs / f"{prefix}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "started" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench: the {kind} worker did not start:\n{log.read_text()}")
            time.sleep(0.05)
        time.sleep(0.5)
        idle_rss, cpu0, pg0, busy0 = (_rss_kb(proc.pid), _cpu_seconds(proc.pid),
                                      _postgres_cpu(), _machine_busy())
        # Per thread, the last count seen: a thread that ends in the window (the
        # heartbeat's, when nothing is held) keeps what it had.
        kernel0, switches0 = _kernel_seconds(proc.pid), _switches(proc.pid)
        switches_seen = dict(switches0)
        released: dict[str, float] = {}
        with psycopg.connect(url, autocommit=True) as db:
            t0 = time.time()
            for r in ids:
                db.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL "
                           "WHERE run_id = %s AND lease_owner = %s", (r, HOLD))
                released[r] = time.time()
            peak_rss, most, done = idle_rss, 0, 0
            finals = tuple(FINAL_STATUSES)
            while done < in_flight:
                time.sleep(0.25)
                peak_rss = max(peak_rss, _rss_kb(proc.pid))
                switches_seen.update(_switches(proc.pid))
                row = db.execute(
                    "SELECT count(*) FILTER (WHERE status = ANY(%s)), count(*) FILTER "
                    "(WHERE status = 'running' AND lease_owner LIKE %s) FROM runs "
                    "WHERE run_id LIKE %s", (list(finals), f"%:{proc.pid}:%",
                                             f"{prefix}-%")).fetchone()
                assert row is not None
                done, holding = int(row[0]), int(row[1])
                most = max(most, holding)
                if time.time() - t0 > 1800:
                    raise SystemExit(f"bench: {kind} still has {in_flight - done} runs "
                                     "after 30 minutes")
            took = time.time() - t0
            ok = db.execute("SELECT count(*) FROM runs WHERE run_id LIKE %s AND "
                            "status = 'done'", (f"{prefix}-%",)).fetchone()
            steps = db.execute("SELECT count(*) FROM events WHERE run_id LIKE %s AND "
                               "kind = 'policy'", (f"{prefix}-%",)).fetchone()
        cpu, pg, busy1 = _cpu_seconds(proc.pid) - cpu0, _postgres_cpu() - pg0, _machine_busy()
        kernel = _kernel_seconds(proc.pid) - kernel0
        switches_seen.update(_switches(proc.pid))
        switches = sum(switches_seen.values()) - sum(switches0.values())
    finally:
        proc.terminate()
        proc.wait(120)
    pickups = sorted(
        (float(at) - released[run_id]) * 1000
        for run_id, at in (line.split() for line in first.read_text().splitlines())
        if run_id in released)
    n_steps = int(steps[0]) if steps else 0
    limit_seconds = CALLS_PER_RUN * latency
    return {
        "kind": kind, "in_flight": in_flight, "model_latency_s": latency,
        "runs_done": int(ok[0]) if ok else 0, "seconds": round(took, 2),
        "limit_seconds": limit_seconds,
        "fraction_of_limit": round(limit_seconds / took, 3),
        "most_in_flight": most,
        "rss_idle_kb": idle_rss, "rss_peak_kb": peak_rss,
        "rss_per_run_kb": round((peak_rss - idle_rss) / max(most, 1), 1),
        "p50_pickup_ms": round(statistics.median(pickups), 1) if pickups else None,
        "p99_pickup_ms": round(pickups[min(len(pickups) - 1, int(len(pickups) * 0.99))], 1)
        if pickups else None,
        "steps": n_steps,
        "worker_cpu_s": round(cpu, 2),
        "worker_cpu_ms_per_step": round(cpu * 1000 / max(n_steps, 1), 2),
        "worker_kernel_share": round(kernel / cpu, 3) if cpu else None,
        "context_switches_per_step": round(switches / max(n_steps, 1), 1),
        "postgres_cpu_s": round(pg, 2),
        "postgres_cpu_ms_per_step": round(pg * 1000 / max(n_steps, 1), 2),
        "machine_busy": round((busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1), 3),
    }


def run_inflight(url: str, in_flight: int, latency: float, short_latency: float | None,
                 threads: int | None = None) -> dict[str, Any]:
    logs = Path(tempfile.mkdtemp(prefix="fsm-bench-inflight-"))
    rows = []
    plan = [("threads", latency), ("async", latency), ("async-store-on-loop", latency)]
    if short_latency:
        plan.append(("async", short_latency))
    for (kind, lat), letter in zip(plan, "PQRS", strict=False):
        row = measure(url, kind, in_flight, lat, logs, letter, threads)
        rows.append(row)
        print(f"{kind:19} {in_flight} in flight, model {lat:g}s: "
              f"{row['fraction_of_limit']:.0%} of the latency limit ({row['seconds']} s "
              f"against {row['limit_seconds']:g} s), at most {row['most_in_flight']} in "
              f"flight, {row['rss_per_run_kb']} KB RSS per run, p99 pick-up "
              f"{row['p99_pickup_ms']} ms, worker CPU {row['worker_cpu_ms_per_step']} ms "
              f"({row['worker_kernel_share'] or 0:.0%} of it in the kernel, "
              f"{row['context_switches_per_step']:g} context switches) "
              f"and PostgreSQL {row['postgres_cpu_ms_per_step']} ms per step, machine "
              f"{row['machine_busy']:.0%} busy", flush=True)
    return {"in_flight": in_flight, "model_latency_s": latency, "rows": rows,
            "logs": str(logs)}
