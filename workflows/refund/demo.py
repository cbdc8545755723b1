"""The refund demo: every command is a real ``fsm`` process on one fresh SQLite file."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile

from fsm.cli import exits

CASES = [
    ("small refund, paid without approval", "asha", "r-small",
     "Order A-1001: the kettle arrived broken, please refund it"),
    ("large refund, waits for a supervisor", "ravi", "r-large",
     "Order A-1002: my headphones stopped working, I want my money back"),
    ("outside the refund window: no refund, a polite reply", "meera", "r-late",
     "Order A-1003: the shoes do not fit"),
    ("somebody else's order: cannot verify, handed over", "kiran", "r-other",
     "Order A-1004: refund the lamp please"),
]


def _fsm(db: str, *args: str, env: dict[str, str] | None = None, check: bool = True) -> int:
    shown = " ".join(shlex.quote(a) for a in args)
    prefix = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    print(f"\n$ {prefix + ' ' if prefix else ''}fsm {shown}", flush=True)
    full_env = {**os.environ, **(env or {}), "FSM_DB": db}
    proc = subprocess.run([sys.executable, "-m", "fsm", *args, "--db", db], env=full_env)
    # A run that stops handed over or failed exits with its status code; that is no error.
    if check and proc.returncode in (exits.ERROR, exits.USAGE):
        raise SystemExit(f"demo: 'fsm {shown}' failed with exit status {proc.returncode}")
    return proc.returncode


def _ledger(db: str) -> None:
    print(f"\n$ python -m workflows.refund ledger --db {db}", flush=True)
    subprocess.run([sys.executable, "-m", "workflows.refund", "ledger", "--db", db], check=True)


def _title(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}", flush=True)


def run_demo(db: str | None = None) -> int:
    if db is None:
        db = os.path.join(tempfile.mkdtemp(prefix="fsm-demo-"), "demo.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    print(f"fsm refund demo on a fresh SQLite file: {db}")
    for title, user, run_id, goal in CASES:
        _title(title)
        _fsm(db, "run", "refund", goal, "--user", user, "--run-id", run_id)
        _ledger(db)
    _title("the large refund: a supervisor approves it from a separate process")
    _fsm(db, "approvals")
    _fsm(db, "approve", "r-large", "--reviewer", "priya", "--note", "receipt checked")
    _ledger(db)
    _title("a crash right after the payment call, before the step was committed")
    code = _fsm(db, "run", "refund", "Order A-1005: the toaster is faulty", "--user", "dev",
                "--run-id", "r-crash", env={"FSM_FAULT": "after_tool_before_commit@6"},
                check=False)
    print(f"(the process was killed: exit status {code})")
    _fsm(db, "resume", "r-crash")
    _ledger(db)
    from workflows.refund.shop import Shop

    with Shop(db) as shop:
        calls = [c for c in shop.calls("refund") if c["idempotency_key"] == "r-crash:6"]
    print(f"\nThe gateway was called {len(calls)} times with key r-crash:6 (once before the "
          "crash, once by the resumed step) and paid once: it ignores a key it has seen.")
    _title("the audit trail of the large refund")
    _fsm(db, "history", "r-large")
    _fsm(db, "audit", "r-large")
    _fsm(db, "runs")
    return 0
