"""Two processes on one run at once: exactly one drives it, the other stops with a clear
message, and no tool runs twice. A slow policy makes the overlap certain."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from crashkit import fork_fsm, policy_log, popen_fsm

from fsm import Engine, RunLocked, SQLiteStore
from fsm.audit import audit
from workflows.refund import Shop, build, clerk

SMALL = "Order A-1001: the kettle arrived broken, please refund it"
LARGE = "Order A-1002: my headphones stopped working, I want my money back"
LOCKED = "is being driven by another process"


def _created(db: str, goal: str, user: str, *, fault: str | None) -> None:
    """Create run ``r`` with the slow-capable policy; stop it at ``fault`` (SIGKILL)."""
    env = {"FSM_FAULT": fault} if fault else {}
    e = fork_fsm("run", "refund", goal, "--user", user, "--run-id", "r", "--policy",
                 "crashkit:logged_clerk", "--db", db, env=env)
    assert e.killed if fault else e.code == 0, e


def _race(db: str, log: str, *argv: str) -> list[tuple[int, int, str, str]]:
    """Start two ``fsm ARGV`` processes at once; (pid, exit code, stdout, stderr) of each."""
    env = {"CRASHKIT_LOG": log, "CRASHKIT_DELAY": "0.15"}
    procs = [popen_fsm(*argv, "--db", db, env=env) for _ in range(2)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        out.append((p.pid, p.returncode, stdout, stderr))
    return out


def _paid_once(db: str, amount: int) -> None:
    shop, store = Shop(db), SQLiteStore(db)
    assert [(p["amount_paise"], p["idempotency_key"]) for p in shop.ledger()] == [(amount, "r:6")]
    calls = Counter(c["idempotency_key"] for c in shop.calls())
    assert calls == Counter({"r:6": 1, "r:7": 1}), calls  # no tool ran twice
    events = store.events("r")
    steps = [e.step for e in events if e.kind == "policy"]
    assert steps == sorted(set(steps)) == [1, 2, 3, 4, 5, 6, 7]
    assert Counter(e.detail.get("key") for e in events if e.kind == "tool")["r:6"] == 1
    assert audit(store, "r").ok
    store.close()


def test_two_resumes_at_once_one_drives_the_other_is_told(tmp_path: Path) -> None:
    db, log = str(tmp_path / "runs.db"), str(tmp_path / "policy.log")
    _created(db, SMALL, "asha", fault="before_policy@1")  # the run exists, nothing done
    (pid_a, code_a, out_a, err_a), (pid_b, code_b, out_b, err_b) = _race(db, log, "resume", "r")
    assert sorted([code_a, code_b]) == [0, 1], (out_a, err_a, out_b, err_b)
    winner, (loser_out, loser_err) = (pid_a, (out_b, err_b)) if code_a == 0 else (
        pid_b, (out_a, err_a))
    assert loser_out == ""
    assert loser_err.startswith("error: run 'r' ") and LOCKED in loser_err, loser_err
    assert f":{winner}:" in loser_err  # it names the process that holds the run
    assert "Traceback" not in loser_err
    # Every policy call came from the winner, once per step.
    assert policy_log(log) == [(winner, s) for s in range(1, 8)]
    _paid_once(db, 35_000)


def test_two_supervisors_approving_at_once_pay_once(tmp_path: Path) -> None:
    db, log = str(tmp_path / "runs.db"), str(tmp_path / "policy.log")
    _created(db, LARGE, "ravi", fault=None)
    results = _race(db, log, "approve", "r", "--reviewer", "priya", "--note", "checked")
    codes = sorted(code for _, code, _, _ in results)
    assert codes == [0, 1], results
    loser_err = next(err for _, code, _, err in results if code == 1)
    # The loser either found the run locked, or (if it came after) nothing to decide.
    assert LOCKED in loser_err or "not waiting for a decision" in loser_err, loser_err
    store = SQLiteStore(db)
    decisions = [e for e in store.events("r") if e.kind == "decision"]
    assert [(d.reviewer, d.detail["decision"]) for d in decisions] == [("priya", "approved")]
    assert store.load_run("r").status == "done"
    store.close()
    _paid_once(db, 180_000)


def test_two_engines_in_one_process_do_not_share_a_run(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    shop = Shop(db).seed_demo()
    entered, release = threading.Event(), threading.Event()

    def slow(view: object) -> object:
        entered.set()
        release.wait(10)
        return clerk(view)  # type: ignore[arg-type]

    first = Engine(build(shop), SQLiteStore(db), slow)
    first.start(SMALL, user="asha", run_id="r", drive=False)
    worker = threading.Thread(target=first.resume, args=("r",))
    worker.start()
    try:
        assert entered.wait(10)
        second = Engine(build(shop), SQLiteStore(db), clerk)
        with pytest.raises(RunLocked, match=LOCKED) as info:
            second.resume("r")
        assert info.value.owner == first.owner
    finally:
        release.set()
        worker.join(10)
    store = SQLiteStore(db)
    assert store.load_run("r").status == "done"
    assert len(shop.ledger()) == 1
    # Once the first engine let go, another may take the run (here: nothing left to do).
    assert Engine(build(shop), store, clerk).resume("r").status == "done"
