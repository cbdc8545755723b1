"""``make demo`` runs end to end and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fsm.auditor.audit import audit
from fsm.store import SQLiteStore
from workflows.refund.shop import Shop


def test_demo_runs_every_case_on_a_fresh_database(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSM_")}
    proc = subprocess.run([sys.executable, "-m", "workflows.refund", "demo", "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "(the process was killed: exit status -9)" in out
    assert "audit ok: r-large" in out
    assert "waiting  for a person (approved / declined / expired)" in out
    store = SQLiteStore(str(db))
    runs = {r.run_id: (r.status, r.state) for r in store.list_runs()}
    assert runs == {
        "r-small": ("done", "done"), "r-large": ("done", "done"), "r-late": ("done", "done"),
        "r-other": ("handed_over", "handed_over"), "r-crash": ("done", "done"),
    }
    ledger = [(r["order_id"], r["amount_paise"], r["idempotency_key"])
              for r in Shop(str(db)).ledger()]
    assert sorted(ledger) == [("A-1001", 35_000, "r-small:6"), ("A-1002", 180_000, "r-large:6"),
                              ("A-1005", 42_000, "r-crash:6")]
    assert all(audit(store, run_id).ok for run_id in runs)
