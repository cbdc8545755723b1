"""Benchmark: the long fault soak — refunds on a fleet whose database keeps failing.

At least 200 refund runs (every third one above the approval limit, approved by a
separate supervisor process) driven by ``fsm worker`` processes whose policy sleeps like
a model, on a PostgreSQL server of this script's own, while it is restarted (fast and
immediate), every fsm session is ended with ``pg_terminate_backend`` (or only the shop
gateway's), and a random worker is SIGKILLed and replaced. Then the checks of
:class:`workflows.refund.fleet.Soak`: every run finished or waiting for a person, none
failed, each order paid at most once at the decided amount, every log audits clean.

Figures (printed, with the JSON): runs, faults (restarts and terminations, by kind;
sessions ended), SIGKILLs, steps the infrastructure failed and that were tried again,
runs failed (must be 0), runs handed over for the infrastructure, payments, audits.
The exit status is 1 when a check fails or fewer than ``--min-faults`` faults were made.

    python bench/faults.py                  # 200 runs, 4 workers, >= 20 faults
    python bench/faults.py --runs 400 --workers 6
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pg_steps import machine  # noqa: E402

from workflows.refund.faults import Faults, restartable_postgres  # noqa: E402
from workflows.refund.fleet import Soak, submit_refunds  # noqa: E402


def soak(runs: int, workers: int, concurrency: int, sleep: float, fault_for: float,
         every: tuple[float, float], kill_every: tuple[float, float], logs: Path,
         say: Any, min_faults: int = 20) -> dict[str, Any]:
    started = time.monotonic()
    with restartable_postgres() as server:
        orders = submit_refunds(server.url, runs)
        s = Soak(server.url, logs, workers=workers, concurrency=concurrency,
                 lease_seconds=3.0, sleep=sleep, say=say)
        # Retries in a row and their backoff as a fleet would set them for an outage of a
        # few seconds; the bound itself is the default. The runs go in waves, one after
        # each fault, so that at least ``min_faults`` faults meet runs in flight.
        s.env.update(FSM_RETRY_SECONDS="0.5", FSM_RETRY_MAX_SECONDS="5",
                     FSM_PG_CONNECT_TIMEOUT="5")
        faults = Faults(server, until=fault_for, every=every)
        report = s.run(orders, kill_for=fault_for, kill_every=kill_every, timeout=1800,
                       faults=faults, waves=min(runs, min_faults + 1))
    r = report
    return {
        "runs": r.runs, "statuses": r.statuses, "faults": r.faults,
        "faults_total": sum(r.faults.values()), "sessions_ended": r.sessions_ended,
        "sigkills": r.kills, "workers_started": r.workers_started,
        "steps_retried": r.unavailable, "failed": r.statuses.get("failed", 0),
        "handed_over_for_infrastructure": r.handed_over_unavailable,
        "payments": r.payments, "gateway_refund_calls": r.gateway_calls,
        "audits_clean": r.audits_clean, "takeovers": r.takeovers,
        "approver_restarts": r.approver_restarts, "problems": r.problems,
        "soak_seconds": round(r.seconds, 1),
        "total_seconds": round(time.monotonic() - started, 1), "lines": r.lines(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="refund runs")
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=4, help="runs per worker at once")
    parser.add_argument("--sleep", type=float, default=0.5,
                        help="seconds the policy sleeps per call (a model's latency)")
    parser.add_argument("--fault-for", type=float, default=60.0,
                        help="seconds during which faults and SIGKILLs are made")
    parser.add_argument("--min-faults", type=int, default=20,
                        help="fewer restarts and terminations than this fail the bench")
    parser.add_argument("--json-out", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    # The pool says each connection it could not make while the server was away; the
    # figures say what became of the runs.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    print(f"machine: {machine()}", flush=True)
    logs = Path(tempfile.mkdtemp(prefix="fsm-faults-"))
    result = soak(args.runs, args.workers, args.concurrency, args.sleep, args.fault_for,
                  (0.8, 2.0), (1.5, 4.0), logs, lambda line: print(line, flush=True),
                  args.min_faults)
    result["machine"] = machine()
    print("\n".join(result.pop("lines")))
    print(f"logs in {logs}")
    enough = result["faults_total"] >= args.min_faults
    if not enough:
        print(f"PROBLEM     only {result['faults_total']} faults were made (at least "
              f"{args.min_faults} wanted: raise --runs or --sleep, so the runs last longer)")
    print(json.dumps(result, indent=2, default=str))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2, default=str))
    return 0 if enough and not result["problems"] else 1


if __name__ == "__main__":
    os.environ.pop("FSM_FAULT", None)
    sys.exit(main())
