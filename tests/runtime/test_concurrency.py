"""Two processes on one run at once: exactly one drives it, the other stops with a clear
message, and no tool runs twice. The process that takes the run holds it in its first
policy call until the other has given up, so the overlap is certain, not timed."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from crashkit import fork_fsm, policy_log, popen_fsm

from fsm import Engine, RunLocked, SQLiteStore
from fsm.auditor.audit import audit
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


def _race(tmp_path: Path, *argv: str) -> tuple[list[tuple[int, int, str, str]], str]:
    """Start two ``fsm ARGV`` processes at once. Whichever takes the run first holds it in
    its first policy call until the other has exited; then it may finish. Returns
    (pid, exit code, stdout, stderr) of the one that exited first, then the other, and
    the policy log."""
    log, hold = tmp_path / "policy.log", tmp_path / "release"
    env = {"CRASHKIT_LOG": str(log), "CRASHKIT_HOLD": str(hold)}
    procs = [popen_fsm(*argv, "--db", str(tmp_path / "runs.db"), env=env) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in procs):
            assert time.monotonic() < deadline, "neither process stopped"
            time.sleep(0.01)
        first = next(p for p in procs if p.poll() is not None)
        second = next(p for p in procs if p is not first)
        out = [(first.pid, first.returncode, *first.communicate())]
        assert second.poll() is None, "both processes stopped before either was released"
    finally:
        hold.touch()
    out.append((second.pid, second.wait(60), *second.communicate()))
    return out, str(log)


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
    db = str(tmp_path / "runs.db")
    _created(db, SMALL, "asha", fault="before_policy@1")  # the run exists, nothing done
    (loser, winner), log = _race(tmp_path, "resume", "r")
    pid, code, out, err = loser
    assert (code, out) == (1, ""), loser
    assert err.startswith("error: run 'r' ") and LOCKED in err, err
    assert f":{winner[0]}:" in err  # it names the process that holds the run
    assert "Traceback" not in err
    assert winner[1] == 0 and "status   done" in winner[2], winner
    # Every policy call came from the winner, once per step.
    assert policy_log(log) == [(winner[0], s) for s in range(1, 8)]
    _paid_once(db, 35_000)


def test_two_supervisors_approving_at_once_pay_once(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    _created(db, LARGE, "ravi", fault=None)
    (loser, winner), log = _race(tmp_path, "approve", "r", "--reviewer", "priya", "--note",
                                 "checked")
    assert loser[1] == 1 and LOCKED in loser[3], loser
    assert winner[1] == 0 and "status   done" in winner[2], winner
    assert policy_log(log)[-2:] == [(winner[0], 6), (winner[0], 7)]
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


def test_a_lease_from_another_host_is_taken_over_only_on_request(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    store = SQLiteStore(db)
    Engine(build(Shop(db).seed_demo()), store, clerk).start(
        "Order A-1001: kettle broken", user="asha", run_id="r", drive=False)
    store.acquire("r", "other-host:4242:abcd1234", time.time())  # a machine we cannot see
    refused = fork_fsm("resume", "r", "--db", db)
    assert refused.code == 1
    assert "being driven by another process (other-host:4242:abcd1234)" in refused.stderr
    assert "--take-over" in refused.stderr
    assert Shop(db).ledger() == []
    taken = fork_fsm("resume", "r", "--take-over", "--db", db)
    assert taken.code == 0, taken
    assert [p["amount_paise"] for p in Shop(db).ledger()] == [35_000]
    events = store.events("r")
    takeovers = [{k: v for k, v in e.detail.items() if k != "rows"}  # rows: row hashes
                 for e in events if e.kind == "takeover"]
    assert takeovers == [{"from": "other-host:4242:abcd1234"}]
    assert store.load_run("r").status == "done" and audit(store, "r").ok


def test_taking_over_a_paused_run_keeps_its_approval_valid(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    store = SQLiteStore(db)
    run = Engine(build(Shop(db).seed_demo()), store, clerk).start(
        "Order A-1002: headphones dead", user="ravi", run_id="big")
    assert run.status == "awaiting_approval"
    store.acquire("big", "other-host:4242:abcd1234", time.time())
    assert fork_fsm("approve", "big", "--reviewer", "priya", "--db", db).code == 1
    assert fork_fsm("resume", "big", "--take-over", "--db", db).code == 0
    approved = fork_fsm("approve", "big", "--reviewer", "priya", "--db", db)
    assert approved.code == 0, approved
    assert [p["amount_paise"] for p in Shop(db).ledger()] == [180_000]
    assert store.load_run("big").status == "done" and audit(store, "big").ok
