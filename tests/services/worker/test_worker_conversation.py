"""Workers and conversations, on SQLite and PostgreSQL: a run waiting for its customer is
left alone; once a reply is read the workers drive it on; their sweep lets a wait nobody
answers expire, and reads a reply a process kept but left unread."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chat_desk
import pytest
from fleetkit import run_until

from fsm import Engine
from fsm.store import open_store
from fsm.store.base import Store
from fsm.worker import Worker, WorkerConfig

META = {"workflow_ref": "chat_desk:WORKFLOW", "policy": "chat_desk:clerk"}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("CHAT_LEDGER", str(tmp_path / "ledger.jsonl"))
    url = str(tmp_path / "chat.db") if request.param == "sqlite" else \
        request.getfixturevalue("pg_url")
    s = open_store(url)
    yield s
    s.close()


def cancelled(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "ledger.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def work(store: Store, until: Callable[[], bool], clock: Callable[[], float] = time.time
         ) -> list[str]:
    """Run a worker until ``until()`` holds (or 30 s); its log lines."""
    lines: list[str] = []
    worker = Worker(store, WorkerConfig(poll_seconds=0.05, sweep_seconds=0.05),
                    clock=clock, log=lines.append)
    run_until(worker, until)
    assert until(), lines
    return lines


def started(store: Store, run_id: str) -> str:
    engine = Engine(chat_desk.WORKFLOW, store, chat_desk.clerk)
    run = engine.start_conversation("I want to cancel an order", user="asha", run_id=run_id,
                                    meta=META).run
    assert run.status == "awaiting_customer"
    return run.run_id


def status(store: Store, run_id: str) -> tuple[str, str]:
    run = store.load_run(run_id)
    return run.status, run.state


def test_workers_drive_a_conversation_between_replies(store: Store, tmp_path: Path) -> None:
    run_id = started(store, "w1")
    replier = Engine(chat_desk.WORKFLOW, store, None)
    assert replier.reply(run_id, "It is A-1001", drive=False).status == "running"
    lines = work(store, lambda: status(store, run_id) == ("awaiting_customer", "confirming"))
    assert any(x.endswith("paused w1 (awaiting customer)") for x in lines)
    replier.reply(run_id, "yes", drive=False)
    work(store, lambda: status(store, run_id)[0] == "done")
    assert [e["order_id"] for e in cancelled(tmp_path)] == ["A-1001"]


def test_the_workers_sweep_expires_an_unanswered_conversation(store: Store) -> None:
    run_id = started(store, "w2")
    later = time.time() + 3601
    lines = work(store, lambda: status(store, run_id) == ("handed_over", "closed"),
                 clock=lambda: later)
    assert any("swept w2's conversation" in x and "closed (handed_over)" in x for x in lines)
    assert [e.kind for e in store.events(run_id)][-3:] == ["unanswered", "transition", "stop"]


def test_the_workers_sweep_reads_a_reply_left_unread(store: Store) -> None:
    run_id = started(store, "w3")
    # Kept by a process that died before the run could read it.
    Engine(chat_desk.WORKFLOW, store, None).accept_reply(run_id, "It is A-1001")
    work(store, lambda: status(store, run_id) == ("awaiting_customer", "confirming"))
    assert [r.read_step for r in store.replies(run_id)] == [1]
