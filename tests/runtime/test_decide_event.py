"""A paused run is decided by naming the human event, from the API and the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from desk import SPEC, meta, policy

from fsm import ApprovalRefused, Engine, MemoryStore, SQLiteStore, ToolSpec, define_workflow
from fsm.cli import main
from fsm.testing import ScriptedPolicy


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "desk.db"


def start(db: Path, goal: str, run_id: str) -> None:
    store = SQLiteStore(db)
    try:
        run = Engine(SPEC, store, policy).start(goal, user="kim", run_id=run_id, meta=meta())
        assert run.status == "awaiting_approval"
    finally:
        store.close()


def decide(db: Path, run_id: str, approved: bool, event: str | None = None) -> tuple[str, str]:
    store = SQLiteStore(db)
    try:
        run = Engine(SPEC, store, policy).decide(run_id, approved, "lee", "checked",
                                                 event=event)
        fired = [e.event for e in store.events(run_id) if e.kind == "transition"]
        assert fired[-1] == (event or ("approved" if approved else "declined"))
        return run.status, run.state
    finally:
        store.close()


def refused(db: Path, run_id: str, approved: bool, event: str | None) -> str:
    store = SQLiteStore(db)
    try:
        with pytest.raises(ApprovalRefused) as info:
            Engine(SPEC, store, policy).decide(run_id, approved, "lee", "checked", event=event)
        after = store.load_run(run_id)
        assert after.status == "awaiting_approval"  # nothing was recorded
        assert [e.kind for e in store.events(run_id)][-1] == "pause"
        return str(info.value)
    finally:
        store.close()


def test_approve_and_deny_fire_the_workflow_events_by_default(db: Path) -> None:
    start(db, "cancel account K-1", "r1")
    assert decide(db, "r1", True) == ("done", "cancelled")
    start(db, "cancel account K-2", "r2")
    assert decide(db, "r2", False) == ("done", "kept")


def test_any_human_event_of_the_waiting_state_can_be_named(db: Path) -> None:
    start(db, "cancel account K-3", "r3")
    assert decide(db, "r3", True, event="refer") == ("handed_over", "legal")
    start(db, "a dispute on account K-4", "r4")
    assert decide(db, "r4", True, event="resolved") == ("done", "cancelled")
    start(db, "a dispute on account K-5", "r5")
    assert decide(db, "r5", False, event="dropped") == ("done", "kept")


def test_a_state_without_the_approve_event_must_be_decided_by_name(db: Path) -> None:
    start(db, "a dispute on account K-6", "r6")
    assert refused(db, "r6", True, None) == (
        "run 'r6' waits in state 'disputed' for one of 'resolved', 'dropped', not for "
        "'approved': name the event to fire (--event NAME)")


def test_an_event_the_run_does_not_wait_for_is_refused(db: Path) -> None:
    start(db, "cancel account K-7", "r7")
    assert refused(db, "r7", True, "resolved") == (
        "run 'r7': event 'resolved' is not one the run waits for in state 'confirming' "
        "(allowed: 'approved', 'declined', 'refer')")
    assert refused(db, "r7", True, "declined") == (
        "run 'r7': 'declined' is the workflow's deny event; deny the run instead of trying "
        "to approve it with that event")
    assert refused(db, "r7", False, "approved") == (
        "run 'r7': 'approved' is the workflow's approve event; approve the run instead of "
        "trying to deny it with that event")


def fsm(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["fsm", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_the_cli_names_the_event(db: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    start(db, "a dispute on account K-8", "r8")
    code, _, err = fsm(monkeypatch, capsys, "approve", "r8", "--reviewer", "lee",
                       "--db", str(db))
    assert code == 2  # a usage error: nothing was decided
    assert err == ("error: run 'r8' waits in state 'disputed' for one of 'resolved', "
                   "'dropped', not for 'approved': name the event to fire (--event NAME)\n")
    code, _, err = fsm(monkeypatch, capsys, "deny", "r8", "--reviewer", "lee", "--note",
                       "customer withdrew", "--event", "dropped", "--db", str(db))
    assert code == 0, err
    store = SQLiteStore(db)
    try:
        run = store.load_run("r8")
        assert (run.status, run.state) == ("done", "kept")
        [decision] = [e for e in store.events("r8") if e.kind == "decision"]
        assert decision.reviewer == "lee" and decision.detail["decision"] == "denied"
    finally:
        store.close()


def test_naming_an_event_for_a_paused_call_is_refused() -> None:
    spec = define_workflow(
        "filing", transitions={"open": {"filed": "closed"}}, tools_by_state={"open": ["file"]},
        initial="open", terminal={"closed"},
        tools=[ToolSpec("file", lambda args, ctx: {}, write=True, approval=True,
                        emits=lambda r: "filed", emits_events=("filed",))],
    )
    store = MemoryStore()
    engine = Engine(spec, store, ScriptedPolicy([{"tool": "file", "args": {}}]))
    assert engine.start("file it", user="kim", run_id="c1").status == "awaiting_approval"
    with pytest.raises(ApprovalRefused) as info:
        engine.decide("c1", True, "lee", "", event="filed")
    assert str(info.value) == ("run 'c1' waits for approval of a call to 'file', not for an "
                               "event; decide it without naming event 'filed'")
    assert engine.decide("c1", True, "lee", "").status == "done"
