"""Conversations across real processes, on SQLite and on PostgreSQL: a process killed
with SIGKILL in the middle of a step, a reply sent meanwhile, the run resumed by another
process; a reply sent while another process holds the run; two replies sent at once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crashkit import fork_fsm, start_fsm

from fsm.auditor.audit import audit
from fsm.records import verify_chain
from fsm.store import open_store
from fsm.store.base import Store

START = ["run", "chat_desk:WORKFLOW", "I want to cancel an order", "--user", "asha",
         "--policy", "chat_desk:held_clerk", "--run-id", "c1"]


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "chat.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


def env(ledger: Path, **more: str) -> dict[str, str]:
    return {"CHAT_LEDGER": str(ledger), **more}


def cancelled(ledger: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()] \
        if ledger.exists() else []


@pytest.fixture
def store(db: str) -> Iterator[Store]:
    s = open_store(db)
    yield s
    s.close()


def fsm(db: str, ledger: Path, *argv: str, **more: str) -> Any:
    return fork_fsm(*argv, "--db", db, env=env(ledger, **more))


@pytest.mark.parametrize("fault, cut_short", [("before_policy@4", False),
                                              ("after_tool_before_commit@4", True)])
def test_killed_mid_step_then_a_reply_then_resumed(db: str, ledger: Path, store: Store,
                                                   fault: str, cut_short: bool) -> None:
    assert fsm(db, ledger, *START).code == 0
    assert fsm(db, ledger, "reply", "c1", "A-1001").code == 0
    # The yes is read, then the process dies in the step that cancels (step 4).
    died = fsm(db, ledger, "reply", "c1", "yes", FSM_FAULT=fault)
    assert died.killed, died
    crashed = store.load_run("c1")
    assert crashed.status == "running" and crashed.state == "cancelling"
    # The customer writes again while nobody drives the run: the reply is kept.
    later = fsm(db, ledger, "reply", "c1", "thank you!", "--no-drive", "--json")
    assert later.code == 0, later
    assert json.loads(later.stdout)["read"] is False
    assert [r.text for r in store.replies("c1", unread_only=True)] == ["thank you!"]
    resumed = fsm(db, ledger, "resume", "c1")
    assert resumed.code == 0, resumed
    run = store.load_run("c1")
    assert run.status == "done"
    assert [e["order_id"] for e in cancelled(ledger)] == ["A-1001"]  # cancelled once
    events = store.events("c1")
    assert verify_chain(events) is None and audit(store, "c1").ok
    write = next(e for e in events if e.kind == "tool" and e.tool == "cancel_order")
    thanks = next(e for e in events if e.kind == "reply" and e.detail["seq"] == 3)
    # A step the crash cut short (its write claimed) is finished first; else the model is
    # asked only once it has read what the customer said meanwhile.
    assert (write.seq < thanks.seq) is cut_short
    said = [m["content"] for m in store.messages("c1") if m.get("from") == "customer"]
    assert said == ["A-1001", "yes", "thank you!"]
    assert all(r.read_step is not None for r in store.replies("c1"))


def test_a_reply_while_another_process_holds_the_run_is_read_before_its_next_step(
        db: str, ledger: Path, store: Store, tmp_path: Path) -> None:
    hold = str(tmp_path / "hold")
    assert fsm(db, ledger, *START).code == 0
    first = start_fsm("reply", "c1", "A-1001", "--db", db,
                      env=env(ledger, CHAT_HOLD=hold, CHAT_HOLD_STEP="2"))
    deadline = time.monotonic() + 30
    while not os.path.exists(hold + ".waiting") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.path.exists(hold + ".waiting"), "the first process never reached step 2"
    second = fsm(db, ledger, "reply", "c1", "it is the kettle", "--json")
    assert second.code == 0, second
    report = json.loads(second.stdout)
    assert (report["status"], report["read"]) == ("running", False)
    Path(hold).touch()
    assert first.wait().code == 0
    run = store.load_run("c1")
    assert (run.status, run.state) == ("awaiting_customer", "confirming")
    replies = [e for e in store.events("c1") if e.kind == "reply"]
    assert [(r.detail["seq"], r.detail["bound"]) for r in replies] == [(1, True), (2, False)]
    # Read after the step it arrived in, before the model was asked again.
    policy_steps = [e.step for e in store.events("c1") if e.kind == "policy"]
    assert replies[1].step == 2 and 3 in policy_steps
    assert store.view_record("c1", 3) is not None
    view = store.messages("c1", 0, store.view_record("c1", 3).message_count)  # type: ignore
    assert view[-1]["content"] == "it is the kettle"
    assert audit(store, "c1").ok


def test_two_replies_sent_at_once_both_arrive_in_the_order_committed(
        db: str, ledger: Path, store: Store) -> None:
    assert fsm(db, ledger, *START).code == 0
    senders = [start_fsm("reply", "c1", text, "--no-drive", "--db", db, env=env(ledger))
               for text in ("A-1001", "the kettle, please")]
    exits = [s.wait() for s in senders]
    assert [e.code for e in exits] == [0, 0], exits
    replies = store.replies("c1")
    assert sorted(r.text for r in replies) == ["A-1001", "the kettle, please"]
    assert [r.seq for r in replies] == [1, 2]
    # The first read ends the wait; the second is read before the run's next step.
    assert fsm(db, ledger, "resume", "c1").code == 0
    replies = store.replies("c1")
    assert all(r.read_step is not None for r in replies)
    read = [m["content"] for m in store.messages("c1") if m.get("from") == "customer"]
    assert read == [r.text for r in replies]  # in the order their commits landed
    events = [e for e in store.events("c1") if e.kind == "reply"]
    assert [e.detail["seq"] for e in events] == [1, 2]
    assert audit(store, "c1").ok
