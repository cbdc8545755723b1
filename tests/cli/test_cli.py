"""The operator CLI, as real processes on one SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm.store import SQLiteStore
from workflows.refund.shop import Shop


def fsm(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FSM_FAULT", None)
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=full_env, timeout=60)


def fsm_json(db: Path, *args: str, **kw: Any) -> Any:
    proc = fsm(db, *args, "--json", **kw)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in proc.stderr, proc.stderr


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def test_small_refund_run_prints_path_and_pays_once(db: Path) -> None:
    out = fsm_json(db, "run", "refund", "Order A-1001: kettle broken", "--user", "asha",
                   "--run-id", "r1")
    assert out["run_id"] == "r1" and out["status"] == "done"
    assert out["path"] == ["collecting", "verifying", "deciding", "refunding", "replying", "done"]
    ledger = subprocess.run(
        [sys.executable, "-m", "workflows.refund", "ledger", "--db", str(db), "--json"],
        capture_output=True, text=True, check=True,
    )
    rows = json.loads(ledger.stdout)
    assert [(r["order_id"], r["amount_paise"], r["idempotency_key"]) for r in rows] == [
        ("A-1001", 35_000, "r1:6")
    ]
    plain = fsm(db, "runs")
    assert "r1" in plain.stdout and "done" in plain.stdout


def test_large_refund_waits_then_a_separate_process_approves(db: Path) -> None:
    out = fsm_json(db, "run", "refund", "Order A-1002: headphones dead", "--user", "ravi",
                   "--run-id", "big")
    assert out["status"] == "awaiting_approval" and out["state"] == "awaiting_approval"
    assert Shop(str(db)).ledger() == []
    pending = fsm_json(db, "approvals")
    assert [(p["run_id"], p["amount"]) for p in pending] == [("big", "₹1,800")]
    one_line_error(fsm(db, "approve", "big", "--reviewer", "ravi"), "cannot decide on it")
    done = fsm_json(db, "approve", "big", "--reviewer", "priya", "--note", "ok")
    assert done["status"] == "done" and "refunding" in done["path"]
    assert [r["amount_paise"] for r in Shop(str(db)).ledger()] == [180_000]
    one_line_error(fsm(db, "approve", "big", "--reviewer", "priya"), "not waiting")
    assert fsm_json(db, "approvals") == []
    decisions = [e for e in fsm_json(db, "history", "big") if e["kind"] == "decision"]
    assert [(d["reviewer"], d["detail"]["decision"]) for d in decisions] == [("priya", "approved")]


def test_deny_reports_to_the_model_and_pays_nothing(db: Path) -> None:
    fsm_json(db, "run", "refund", "Order A-1002: refund please", "--user", "ravi",
             "--run-id", "d")
    one_line_error(fsm(db, "deny", "d", "--reviewer", "priya", "--note", " "), "--note")
    out = fsm_json(db, "deny", "d", "--reviewer", "priya", "--note", "item was used")
    assert out["status"] == "done"
    assert out["path"][-3:] == ["awaiting_approval", "replying", "done"]
    assert Shop(str(db)).ledger() == []
    view = fsm_json(db, "show", "d")
    assert {"role": "user", "content": "denied by priya: item was used"} in view["messages"]


def test_show_prints_the_view_of_any_step(db: Path) -> None:
    fsm_json(db, "run", "refund", "Order A-1001: broken", "--user", "asha", "--run-id", "s")
    view = fsm_json(db, "show", "s", "--step", "3")
    assert view["step"] == 3 and view["state"] == "verifying"
    assert [t["name"] for t in view["tools"]] == ["get_order", "get_policy", "advance"]
    assert len(view["messages"]) == 5
    text = fsm(db, "show", "s", "--step", "6").stdout
    assert "state refunding" in text and "tools: refund_item, advance" not in text
    assert "tools: refund_item" in text
    one_line_error(fsm(db, "show", "s", "--step", "99"), "no view recorded for step 99")


def test_audit_passes_and_history_lists_every_event(db: Path) -> None:
    fsm_json(db, "run", "refund", "Order A-1003: shoes", "--user", "meera", "--run-id", "a")
    ok = fsm(db, "audit", "a")
    assert ok.returncode == 0 and "audit ok" in ok.stdout
    events = fsm_json(db, "history", "a")
    with SQLiteStore(str(db)) as store:
        assert [e["hash"] for e in events] == [e.hash for e in store.events("a")]
    assert events[-1]["kind"] == "stop" and events[-1]["detail"]["status"] == "done"


def test_sweep_expires_old_approvals(db: Path) -> None:
    fsm_json(db, "run", "refund", "Order A-1002: dead", "--user", "ravi", "--run-id", "old")
    assert fsm_json(db, "sweep") == []
    later = {"FSM_CLOCK_OFFSET": str(73 * 3600)}
    swept = fsm_json(db, "sweep", env=later)
    assert swept == [{"run_id": "old", "status": "handed_over", "state": "handed_over"}]
    one_line_error(fsm(db, "approve", "old", "--reviewer", "priya"), "expired at",
                   "the run moved on (status: handed_over")
    assert Shop(str(db)).ledger() == []


@pytest.mark.parametrize("args, fragments, code", [
    pytest.param(["run", "nope", "x"], ["unknown workflow 'nope'", "refund"], 2,
                 id="unknown-workflow"),
    pytest.param(["resume", "missing"], ["run 'missing' not found"], 1, id="unknown-run"),
    pytest.param(["runs", "--status", "sleeping"], ["sleeping", "awaiting_approval"], 2,
                 id="bad-status"),
    pytest.param(["run", "refund", "x", "--policy", "nomodule"], ["module:attr"], 2,
                 id="bad-policy"),
    pytest.param(["run", "refund", "x", "--max-steps", "0"], ["max-steps"], 2,
                 id="bad-budget"),
    pytest.param(["approve", "missing", "--reviewer", "p"], ["not found"], 1,
                 id="approve-unknown"),
])
def test_bad_arguments_give_one_clear_line(db: Path, args: list[str], fragments: list[str],
                                          code: int) -> None:
    proc = fsm(db, *args)
    assert proc.returncode == code
    one_line_error(proc, *fragments)


def test_resume_of_a_finished_run_says_so_with_its_exit_code(db: Path) -> None:
    fsm_json(db, "run", "refund", "Order A-1001: broken", "--user", "asha", "--run-id", "f")
    proc = fsm(db, "resume", "f")
    assert proc.returncode == 0
    assert proc.stderr == "run 'f' has already finished (done); nothing to resume\n"
    assert "status   done" in proc.stdout
