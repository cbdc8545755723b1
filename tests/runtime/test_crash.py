"""Crash tests: ``fsm`` processes really killed with SIGKILL, resumed by new processes.

For every fault point at every step a refund run reaches (the small refund, and the
large one through its approval), the run is started with ``FSM_FAULT`` set, dies,
and is resumed by fresh processes until it stops. Then: one payment per refunded
item, no committed step done twice, an intact log, and the same ending as a run
that never crashed. A bounded loop kills at random moments too; the seed scenario
follows one run killed at step 3 through the console script.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crashkit import Exit, fork_fsm, policy_log, run_fsm, start_fsm

from fsm import RunNotFound, SQLiteStore
from fsm.auditor.audit import audit
from fsm.cli import exits
from fsm.runtime.view import view_at
from fsm.testing import state_path
from workflows.refund import Shop, build

RUN = "crash"
POLICY = "crashkit:logged_clerk"
#: Steps of a refund run whose tool is a write (refund_item, send_reply).
WRITE_STEPS = {6, 7}


@dataclass(frozen=True)
class Scenario:
    name: str
    goal: str
    user: str
    approve: bool


SMALL = Scenario("small", "Order A-1001: the kettle arrived broken, please refund it", "asha",
                 approve=False)
LARGE = Scenario("large", "Order A-1002: my headphones stopped working, I want my money back",
                 "ravi", approve=True)
SCENARIOS = {s.name: s for s in (SMALL, LARGE)}

#: (scenario, process) → fault point → the steps at which that process reaches it.
#: ``approve`` is the ``fsm approve`` process: it commits the decision at step 5, then
#: drives steps 6 and 7.
REACHED: dict[tuple[str, str], dict[str, tuple[int, ...]]] = {
    ("small", "run"): {"before_policy": (1, 2, 3, 4, 5, 6, 7),
                       "after_claim": (6, 7),
                       "after_tool_before_commit": (1, 3, 6, 7),
                       "after_commit": (1, 2, 3, 4, 5, 6, 7)},
    ("large", "run"): {"before_policy": (1, 2, 3, 4, 5), "after_tool_before_commit": (1, 3),
                       "after_commit": (1, 2, 3, 4, 5)},
    ("large", "approve"): {"before_policy": (6, 7), "after_claim": (6, 7),
                           "after_tool_before_commit": (6, 7),
                           "after_commit": (5, 6, 7)},
}
MATRIX = [
    pytest.param(sc, phase, point, step, id=f"{sc}-{phase}-{point}@{step}")
    for (sc, phase), points in REACHED.items()
    for point, steps in points.items()
    for step in steps
]


# -- driving a run through separate processes ---------------------------------------------

@dataclass
class Drive:
    """What happened to one run: every process, in order, and which one was killed."""

    processes: list[tuple[str, Exit]]

    @property
    def killed(self) -> list[str]:
        return [name for name, e in self.processes if e.killed]


def status(db: str) -> str:
    """The run's status, or ``new`` before its row exists."""
    store = SQLiteStore(db)
    try:
        return store.load_run(RUN).status
    except RunNotFound:
        return "new"
    finally:
        store.close()


def drive(db: str, sc: Scenario, *, fault: str | None = None, phase: str = "run",
          log: str | None = None) -> Drive:
    """Start the run, approve it if it pauses, resuming after every crash; the fault goes
    to the first process of ``phase``."""
    env = {"CRASHKIT_LOG": log} if log else {}
    faulty = {**env, "FSM_FAULT": fault} if fault else env
    d = Drive([])

    def step(name: str, *argv: str) -> None:
        e = fork_fsm(*argv, "--db", db, env=faulty if name == phase and not d.killed else env)
        d.processes.append((name, e))
        assert e.killed or e.code == 0, (name, e)
        for _ in range(3):
            if status(db) != "running":
                return
            e = fork_fsm("resume", RUN, "--db", db, env=env)
            d.processes.append(("resume", e))
            assert e.code == 0, e
        raise AssertionError(f"the run is still running after resumes: {d.processes}")

    step("run", "run", "refund", sc.goal, "--user", sc.user, "--run-id", RUN,
         "--policy", POLICY)
    if sc.approve:
        assert status(db) == "awaiting_approval"
        step("approve", "approve", RUN, "--reviewer", "priya", "--note", "receipt checked")
    return d


@dataclass
class Outcome:
    """Everything the database says about the run and the shop after it."""

    status: str
    state: str
    path: list[str]
    ledger: list[tuple[Any, ...]]
    outbox: list[tuple[Any, ...]]
    gateway_calls: Counter[str]
    policy_steps: list[int]
    tool_keys: Counter[str]
    transcript: list[dict[str, Any]]
    audit_problems: list[str]


def outcome(db: str) -> Outcome:
    store, shop = SQLiteStore(db), Shop(db)
    try:
        run = store.load_run(RUN)
        events = store.events(RUN)
        return Outcome(
            status=run.status, state=run.state, path=state_path(store, RUN),
            ledger=[(p["order_id"], p["item_id"], p["amount_paise"], p["idempotency_key"])
                    for p in shop.ledger()],
            outbox=[(m["idempotency_key"], m["customer"], m["text"]) for m in shop.outbox()],
            gateway_calls=Counter(c["idempotency_key"] for c in shop.calls()),
            policy_steps=[e.step for e in events if e.kind == "policy"],
            tool_keys=Counter(e.detail["key"] for e in events
                              if e.kind == "tool" and e.detail.get("key")),
            transcript=store.messages(RUN),
            audit_problems=audit(store, RUN).problems,
        )
    finally:
        store.close()
        shop._db.close()


def _without_replay_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript without the gateway's ``duplicate`` flag on a repeated keyed call."""
    out = []
    for m in messages:
        result = m.get("result")
        if isinstance(result, dict) and "duplicate" in result:
            m = {**m, "result": {k: v for k, v in result.items() if k != "duplicate"}}
        out.append(m)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Each scenario driven without a crash."""
    out = {}
    for sc in SCENARIOS.values():
        db = str(tmp_path_factory.mktemp(f"ref-{sc.name}") / "runs.db")
        d = drive(db, sc)
        assert d.killed == [] and len(d.processes) == (2 if sc.approve else 1)
        out[sc.name] = outcome(db)
    assert out["small"].status == "done" and len(out["small"].ledger) == 1
    assert out["large"].status == "done" and out["large"].ledger[0][2] == 180_000
    return out


def assert_same_ending(got: Outcome, ref: Outcome) -> None:
    assert (got.status, got.state, got.path) == (ref.status, ref.state, ref.path)
    assert got.ledger == ref.ledger  # exactly one payment per refunded item
    assert got.outbox == ref.outbox
    assert got.audit_problems == []
    # No committed step was done twice: one policy event per step, one tool event per key.
    assert got.policy_steps == ref.policy_steps
    assert got.tool_keys == ref.tool_keys and set(got.tool_keys.values()) == {1}
    assert _without_replay_marks(got.transcript) == _without_replay_marks(ref.transcript)


# -- the matrix -----------------------------------------------------------------------------

@pytest.mark.parametrize(("scenario", "phase", "point", "step"), MATRIX)
def test_a_kill_at_any_fault_point_resumes_to_the_same_ending(
    tmp_path: Path, reference: dict[str, Outcome], scenario: str, phase: str, point: str,
    step: int,
) -> None:
    db, log = str(tmp_path / "runs.db"), str(tmp_path / "policy.log")
    d = drive(db, SCENARIOS[scenario], fault=f"{point}@{step}", phase=phase, log=log)
    assert d.killed == [phase], d.processes  # died by SIGKILL, where and only where asked
    got, ref = outcome(db), reference[scenario]
    assert_same_ending(got, ref)
    # The killed step's write may be called again with its key (send_reply is
    # retry-safe); refund_item declares a lookup, so the gateway is asked for the payment
    # under the key rather than asked to pay again. Every other call is made once.
    paid = {p[3] for p in ref.ledger}
    again = f"{RUN}:{step}" if point == "after_tool_before_commit" \
        and f"{RUN}:{step}" not in paid else None
    assert got.gateway_calls == Counter(
        {k: 2 if k == again else 1 for k in ref.gateway_calls}
    ), got.gateway_calls
    # The resumed process starts at the step that was lost, not at the beginning: the
    # policy is asked again only for a step that died between its call and its commit.
    asked = Counter(s for _, s in policy_log(log))
    lost_after_asking = point == "after_tool_before_commit" and step not in WRITE_STEPS
    assert asked == Counter({s: 2 if lost_after_asking and s == step else 1
                             for s in ref.policy_steps})


# -- random moments -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_kills_at_random_moments_never_pay_twice(
    tmp_path: Path, reference: dict[str, Outcome], seed: int,
) -> None:
    rnd = random.Random(seed)
    sc = SMALL if seed % 2 == 0 else LARGE
    db = str(tmp_path / "runs.db")
    kills = 0
    for attempt in range(12):  # kill up to 4 processes at random moments, then let one finish
        run = status(db)
        if run in ("done", "handed_over"):
            break
        if run == "new":
            argv = ["run", "refund", sc.goal, "--user", sc.user, "--run-id", RUN]
        elif run == "awaiting_approval":
            argv = ["approve", RUN, "--reviewer", "priya", "--note", "receipt checked"]
        else:
            argv = ["resume", RUN]
        child = start_fsm(*argv, "--db", db)
        if attempt < 4:
            # A forked ``fsm`` process takes 60-100 ms; its steps run in the later part.
            time.sleep(rnd.uniform(0.03, 0.1))
            child.kill()
        e = child.wait()
        kills += e.killed
        assert e.killed or e.code == 0, e
    else:
        raise AssertionError("the run did not finish")
    got, ref = outcome(db), reference[sc.name]
    assert_same_ending(got, ref)
    assert all(n <= 1 + kills for n in got.gateway_calls.values()), (got.gateway_calls, kills)


# -- the seed scenario, through the console script --------------------------------------------

def test_seed_scenario_killed_at_step_3_resumes_at_step_3(
    tmp_path: Path, reference: dict[str, Outcome],
) -> None:
    db, log = str(tmp_path / "runs.db"), str(tmp_path / "policy.log")
    env = {"CRASHKIT_LOG": log}
    first = run_fsm("run", "refund", SMALL.goal, "--user", "asha", "--run-id", RUN,
                    "--policy", POLICY, "--db", db,
                    env={**env, "FSM_FAULT": "after_tool_before_commit@3"})
    assert first.killed, first
    second = run_fsm("resume", RUN, "--db", db, env=env)
    assert second.code == 0, second
    assert "status   done" in second.stdout
    calls = policy_log(log)
    pids = list(dict.fromkeys(pid for pid, _ in calls))
    assert len(pids) == 2
    by_pid = {pid: [s for p, s in calls if p == pid] for pid in pids}
    assert by_pid[pids[0]] == [1, 2, 3]
    assert by_pid[pids[1]] == [3, 4, 5, 6, 7]  # its first policy call is step 3, not 0
    ledger = run_fsm_module_ledger(db)
    assert [(p["order_id"], p["amount_paise"], p["idempotency_key"]) for p in ledger] == [
        ("A-1001", 35_000, f"{RUN}:6")]
    assert_same_ending(outcome(db), reference["small"])
    _every_step_can_be_shown(db, 7)


def run_fsm_module_ledger(db: str) -> list[dict[str, Any]]:
    """``python -m workflows.refund ledger --db PATH --json`` in a new process."""
    import subprocess
    import sys

    from crashkit import ROOT, process_env

    out = subprocess.run([sys.executable, "-m", "workflows.refund", "ledger", "--db", db,
                          "--json"], capture_output=True, text=True, env=process_env(),
                         cwd=str(ROOT), check=True)
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def _every_step_can_be_shown(db: str, steps: int) -> None:
    store = SQLiteStore(db)
    spec = build(Shop(":memory:"))
    states = []
    for n in range(1, steps + 1):
        view = view_at(spec, store, RUN, n)
        assert view is not None and view.step == n
        states.append(view.state)
        shown = json.loads(fork_fsm("show", RUN, "--step", str(n), "--db", db, "--json").stdout)
        assert shown == view.model_dump(mode="json")
    assert states == ["collecting", "collecting", "verifying", "verifying", "deciding",
                      "refunding", "replying"]
    text = fork_fsm("show", RUN, "--step", "3", "--db", db)
    assert text.code == 0 and "step 3  state verifying" in text.stdout
    assert "get_policy" in text.stdout
    store.close()


def test_seed_scenario_large_refund_is_approved_by_a_separate_process(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    paused = run_fsm("run", "refund", LARGE.goal, "--user", "ravi", "--run-id", "big",
                     "--db", db)
    assert paused.code == 0 and "status   awaiting_approval" in paused.stdout, paused
    assert run_fsm_module_ledger(db) == []
    approved = run_fsm("approve", "big", "--reviewer", "priya", "--note", "receipt checked",
                       "--db", db)
    assert approved.code == 0 and "status   done" in approved.stdout, approved
    ledger = run_fsm_module_ledger(db)
    assert [(p["order_id"], p["amount_paise"], p["idempotency_key"]) for p in ledger] == [
        ("A-1002", 180_000, "big:6")]


# -- a write that is not retry-safe ---------------------------------------------------------------

def test_a_write_that_is_not_retry_safe_is_handed_over_in_doubt(tmp_path: Path) -> None:
    db, tickets = str(tmp_path / "runs.db"), tmp_path / "tickets.txt"
    env = {"CRASHKIT_TICKETS": str(tickets)}
    first = fork_fsm("run", "crashkit:TICKETS", "the printer is on fire", "--run-id", RUN,
                     "--policy", "crashkit:ticket_clerk", "--db", db,
                     env={**env, "FSM_FAULT": "after_tool_before_commit@1"})
    assert first.killed, first
    assert tickets.read_text() == f"{RUN}:1 printer on fire\n"
    resumed = fork_fsm("resume", RUN, "--db", db, "--json", env=env)
    assert resumed.code == exits.HANDED_OVER, resumed
    report = json.loads(resumed.stdout)
    assert (report["status"], report["reason"]) == ("handed_over", f"in doubt: file_ticket {RUN}:1")
    assert tickets.read_text() == f"{RUN}:1 printer on fire\n"  # not called again
    store = SQLiteStore(db)
    eff = store.effect(f"{RUN}:1")
    assert eff is not None and eff.status == "STARTED"  # still unknown: a person must look
    assert audit(store, RUN).ok
    store.close()


# -- a call approved by a person, killed around its execution ------------------------------------

@pytest.mark.parametrize("point, safe, status", [
    pytest.param("after_commit", False, "done", id="after-decision-commit"),
    pytest.param("after_tool_before_commit", False, "handed_over", id="in-doubt"),
    pytest.param("after_tool_before_commit", True, "done", id="retry-safe"),
])
def test_an_approved_call_killed_mid_way_is_finished_never_redecided(
        tmp_path: Path, point: str, safe: bool, status: str) -> None:
    db, tickets = str(tmp_path / "runs.db"), tmp_path / "tickets.txt"
    env = {"CRASHKIT_TICKETS": str(tickets)}
    workflow = "crashkit:APPROVED_SAFE_TICKETS" if safe else "crashkit:APPROVED_TICKETS"
    started = fork_fsm("run", workflow, "file it", "--user", "sam", "--run-id", RUN,
                       "--policy", "crashkit:ticket_clerk", "--db", db, "--json", env=env)
    assert json.loads(started.stdout)["status"] == "awaiting_approval", started
    assert not tickets.exists()
    approving = fork_fsm("approve", RUN, "--reviewer", "boss", "--db", db,
                         env={**env, "FSM_FAULT": f"{point}@1"})
    assert approving.killed, approving
    denied = fork_fsm("deny", RUN, "--reviewer", "boss", "--note", "changed my mind", "--db", db,
                      env=env)
    assert denied.code == 1 and "not waiting for a decision" in denied.stderr, denied
    resumed = fork_fsm("resume", RUN, "--db", db, "--json", env=env)
    assert resumed.code == exits.for_status(status), resumed
    report = json.loads(resumed.stdout)
    assert report["status"] == status
    if status == "handed_over":
        assert report["reason"] == f"in doubt: file_ticket {RUN}:1"
    assert tickets.read_text() == f"{RUN}:1 printer on fire\n"  # filed exactly once
    store = SQLiteStore(db)
    (approval,) = store.approvals(RUN, pending_only=False)
    assert (approval.decision, approval.reviewer) == ("approved", "boss")
    decisions = [e.detail["decision"] for e in store.events(RUN) if e.kind == "decision"]
    assert decisions == ["approved"]
    assert audit(store, RUN).ok
    store.close()
