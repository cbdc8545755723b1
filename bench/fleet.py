"""Benchmark: fleet throughput with a slow policy, and the long kill soak.

Throughput: refund runs (seven policy calls each) driven by ``fsm worker``
processes whose policy sleeps 200 ms per call (a model's latency), in runs per
second, for 1 worker x concurrency 1, 1 x 16, 1 x 64 and 4 x 16 on PostgreSQL,
and one SQLite worker for comparison. Targets (issue 9): 1 x 64 at least 30x
1 x 1; 4 x 16 at least 3x 1 x 16. Figures are printed, never asserted.

The soak (``--soak``): 4 workers, at least 200 refunds (every third one above the
approval limit, approved by a separate supervisor process), a random worker
SIGKILLed every 0.5-2 s and restarted; then the checks of
:class:`workflows.refund.fleet.Soak`.

    python bench/fleet.py                    # throughput (make bench)
    python bench/fleet.py --soak --runs 200  # the long soak
    python bench/fleet.py --async --in-flight 1000 --model-latency 2 --json-out FILE

``--async`` measures one worker process holding many runs in flight, the threaded
worker beside ``fsm worker --async``, in one run (see ``bench/inflight.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inflight import run_inflight  # noqa: E402
from pg_steps import bench_database, machine  # noqa: E402

from fsm import Engine, Settings, open_store  # noqa: E402
from fsm.records import FINAL_STATUSES  # noqa: E402
from workflows.refund import build  # noqa: E402
from workflows.refund.fleet import POLICY, Soak, submit_refunds  # noqa: E402
from workflows.refund.shop import open_shop  # noqa: E402

CONFIGS = [(1, 1, 4), (1, 16, 48), (1, 64, 128), (4, 16, 128)]  # workers, concurrency, runs


def _workers(url: str, n: int, concurrency: int, logs: Path, env: dict[str, str],
             tag: str) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(n):
        with open(logs / f"{tag}-{i}.log", "wb") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "fsm", "worker", "--db", url, "--policy", POLICY,
                 "--concurrency", str(concurrency), "--poll-seconds", "0.2"],
                env=env, stdout=out, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 60
    while not all("started" in (logs / f"{tag}-{i}.log").read_text() for i in range(n)):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: workers of {tag} did not start")
        time.sleep(0.05)
    return procs


HOLD = "bench-hold.example:1:hold"


def throughput(url: str, workers: int, concurrency: int, runs: int, logs: Path,
               prefix: str, letter: str) -> dict[str, Any]:
    """Runs per second from the release of the submitted runs to the last finished one.

    The runs are submitted first and held under a lease of nobody's, the workers are
    started and idle, then every hold is released: the clock measures the fleet only.
    """
    env = {**os.environ, "FSM_DB": url, "FSM_CLERK_SLEEP": "0.2"}
    shop, store = open_shop(url).seed_demo(), open_store(url)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        engine = Engine(build(shop), store)
        ids = []
        for i in range(runs):
            oid = f"{letter}-{i:04d}"
            shop.add_order(oid, f"{prefix}{i}", f"it-{i}", "item", 30_000, 2)
            run = engine.start(f"Order {oid}: broken", user=f"{prefix}{i}",
                               run_id=f"{prefix}-{i}", drive=False,
                               meta={"workflow_ref": "refund", "policy": POLICY})
            store.acquire(run.run_id, HOLD, time.time(), ttl=3600)
            ids.append(run.run_id)
        procs = _workers(url, workers, concurrency, logs, env, prefix)
        t0 = time.perf_counter()
        for r in ids:
            store.release(r, HOLD)
        pending = set(ids)
        while pending:
            pending = {r for r in pending if store.load_run(r).status not in FINAL_STATUSES}
            time.sleep(0.02)
        seconds = time.perf_counter() - t0
        done = sum(store.load_run(r).status == "done" for r in ids)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(60)
        store.close()
        shop.close()
    return {"workers": workers, "concurrency": concurrency, "runs": runs, "done": done,
            "seconds": round(seconds, 2), "runs_per_second": round(runs / seconds, 2)}


def run_throughput(url: str, sqlite_path: str) -> dict[str, Any]:
    logs = Path(tempfile.mkdtemp(prefix="fsm-bench-fleet-"))
    store = open_store(url)
    try:
        version = store.server_version()  # type: ignore[attr-defined]
    finally:
        store.close()
    rows = []
    for n, (workers, concurrency, runs) in enumerate(CONFIGS):
        row = throughput(url, workers, concurrency, runs, logs, f"p{n}", "EFGH"[n])
        row["store"] = "postgres"
        rows.append(row)
        print(f"postgres {workers} x {concurrency:<3} {row['runs_per_second']:7.2f} runs/s "
              f"({runs} runs in {row['seconds']} s)", flush=True)
    for n, (workers, concurrency, runs) in enumerate([(1, 1, 4), (1, 16, 48)]):
        row = throughput(sqlite_path, workers, concurrency, runs, logs, f"s{n}", "JK"[n])
        row["store"] = "sqlite"
        rows.append(row)
        print(f"sqlite   {workers} x {concurrency:<3} {row['runs_per_second']:7.2f} runs/s "
              f"({runs} runs in {row['seconds']} s)", flush=True)
    rate = {(r["store"], r["workers"], r["concurrency"]): r["runs_per_second"] for r in rows}
    ratios = {"1x64_over_1x1": rate["postgres", 1, 64] / rate["postgres", 1, 1],
              "4x16_over_1x16": rate["postgres", 4, 16] / rate["postgres", 1, 16]}
    print(f"1x64 / 1x1 = {ratios['1x64_over_1x1']:.1f} (target >= 30); "
          f"4x16 / 1x16 = {ratios['4x16_over_1x16']:.1f} (target >= 3)")
    pool = Settings.load().pg_pool  # what each worker process reads
    return {"postgres": version, "pool_size_per_process": pool, "policy_sleep_s": 0.2,
            "rows": rows, "ratios": ratios, "machine": machine()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="server URL to create the database on")
    parser.add_argument("--soak", action="store_true", help="run the long kill soak instead")
    parser.add_argument("--runs", type=int, default=200, help="soak: refund runs")
    parser.add_argument("--workers", type=int, default=4, help="soak: worker processes")
    parser.add_argument("--kill-for", type=float, default=40.0,
                        help="soak: seconds during which workers are SIGKILLed")
    parser.add_argument("--async", dest="evented", action="store_true",
                        help="measure many runs in flight in one worker, threaded beside "
                             "--async (bench/inflight.py) instead of the throughput")
    parser.add_argument("--in-flight", type=int, default=1000,
                        help="--async: runs in flight in the one worker process")
    parser.add_argument("--model-latency", type=float, default=2.0,
                        help="--async: seconds of each policy call")
    parser.add_argument("--short-latency", type=float, default=0.2,
                        help="--async: the async worker again with this latency (0: not)")
    parser.add_argument("--threads", type=int, default=None,
                        help="--async: the async worker's threads (default: its pool's)")
    parser.add_argument("--json-out", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}", flush=True)
    with bench_database(args.db) as url:
        if args.evented:
            result = run_inflight(url, args.in_flight, args.model_latency,
                                  args.short_latency or None, args.threads)
            result["machine"] = machine()
            code = 0 if all(r["runs_done"] == args.in_flight for r in result["rows"]) else 1
        elif args.soak:
            logs = Path(tempfile.mkdtemp(prefix="fsm-soak-"))
            orders = submit_refunds(url, args.runs)
            soak = Soak(url, logs, workers=args.workers, concurrency=8, lease_seconds=3.0,
                        sleep=0.2, say=lambda line: print(line, flush=True))
            report = soak.run(orders, kill_for=args.kill_for, kill_every=(0.5, 2.0),
                              timeout=900)
            print("\n".join(report.lines()))
            print(f"logs in {logs}")
            result: dict[str, Any] = {"soak": report.__dict__, "machine": machine()}
            code = 1 if report.problems else 0
        else:
            sqlite_path = os.path.join(tempfile.mkdtemp(prefix="fsm-bench-"), "fleet.db")
            result = run_throughput(url, sqlite_path)
            code = 0
    print(json.dumps(result, indent=2, default=str))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
