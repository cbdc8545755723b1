"""A damaged row never stops a worker: a real ``fsm worker`` process meets an approval row
whose arguments are ``[1,2]`` at every sweep, says so once (its run and table), counts it
in its metrics, and goes on driving and sweeping every other run. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from pathlib import Path

from cli_inproc import HEADPHONES, KETTLE, Cli
from damage import execute
from fleetkit import Fleet, wait_for

from fsm import open_store

#: Past every approval's expiry (the refund workflow's approvals last 72 hours).
LATER = str(73 * 3600)


def status(db: str, run_id: str) -> str:
    with open_store(db) as store:
        return store.load_run(run_id).status


def test_a_worker_skips_a_damaged_approval_row_and_goes_on(
        any_db: str, cli: Cli, tmp_path: Path) -> None:
    for run_id in ("bad", "old"):
        cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", run_id, "--db", any_db)
    assert execute(any_db, "UPDATE approvals SET args = '[1,2]' WHERE run_id = 'bad'") == 1
    submitted = cli("submit", "refund", KETTLE, "--user", "asha", "--run-id", "small",
                    "--db", any_db)
    assert submitted.code == 0, submitted
    fleet = Fleet(any_db, tmp_path)
    try:
        worker = fleet.start("--sweep-seconds", "0.1", "--poll-seconds", "0.1",
                             "--metrics-port", "0", FSM_CLOCK_OFFSET=LATER)
        fleet.started(worker)
        wait_for("the worker to drive the new run and expire the old approval",
                 lambda: (status(any_db, "small"), status(any_db, "old"))
                 == ("done", "handed_over"), 60)
        time.sleep(1.0)  # ten more sweeps, each meeting the damaged row
        assert worker.poll() is None, fleet.log(worker)
        log = fleet.log(worker)
        said = [line for line in log.splitlines() if "skipped a damaged row" in line]
        assert len(said) == 1, log
        assert "a row of run 'bad' in table 'approvals' is damaged" in said[0]
        assert "Traceback" not in log
        port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", log)
        assert port is not None, log
        with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics") as resp:
            metrics = resp.read().decode()
        assert "\nfsm_worker_damaged_rows_total 1.0\n" in metrics
        assert "\nfsm_worker_expired_total 1.0\n" in metrics
        assert status(any_db, "bad") == "awaiting_approval"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        fleet.close()
    stats = cli("worker", "--stats", "--db", any_db, "--json")
    assert json.loads(stats.out)["damaged_rows"] == 1
