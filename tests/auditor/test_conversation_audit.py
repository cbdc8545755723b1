"""The audit covers conversations: replies, the reply token and confirmations edited in the
SQLite file behind fsm's back are caught, each with a line that names what changed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from chat_desk import Ledger, build, clerk

from fsm import Engine, Event, SQLiteStore
from fsm.auditor.audit import audit
from fsm.records import canonical
from fsm.store._columns import EVENT_COLUMNS as _EVENT_COLS
from fsm.testing import ScriptedCustomer, talk

RUN = "c1"


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A finished conversation whose write the customer confirmed, and a reply kept but
    not read (it came after the run finished talking)."""
    path = str(tmp_path / "chat.db")
    with SQLiteStore(path) as store:
        engine = Engine(build(Ledger()), store, clerk)
        chat = engine.start_conversation("I want to cancel an order", user="asha", run_id=RUN)
        run = talk(engine, chat.run, ScriptedCustomer(["A-1001", "yes"]))
        assert run.status == "done"
        report = audit(store, RUN)
        assert report.ok, report.problems
        assert report.notes == []
    return path


def _events(con: sqlite3.Connection) -> list[Event]:
    con.row_factory = sqlite3.Row
    rows = con.execute(f"SELECT {', '.join(_EVENT_COLS)} FROM events WHERE run_id = ? "
                       "ORDER BY seq", (RUN,)).fetchall()
    con.row_factory = None
    return [Event.model_validate({**dict(r), "detail": json.loads(r["detail"])}) for r in rows]


def _rewrite_log(con: sqlite3.Connection, events: list[Event]) -> None:
    """Write ``events`` back with every hash made again and the head moved: a forger who
    knows how the chain is made."""
    prev = "0" * 64
    for ev in events:
        ev.prev_hash = prev
        ev.hash = ev.compute_hash()
        con.execute("UPDATE events SET detail = ?, prev_hash = ?, hash = ? WHERE run_id = ? "
                    "AND seq = ?", (canonical(ev.detail), ev.prev_hash, ev.hash, RUN, ev.seq))
        prev = ev.hash
    con.execute("UPDATE runs SET log_head = ? WHERE run_id = ?", (prev, RUN))


def edit_a_reply(con: sqlite3.Connection) -> None:
    con.execute("UPDATE replies SET body = 'no' WHERE run_id = ? AND seq = 2", (RUN,))


def delete_a_reply(con: sqlite3.Connection) -> None:
    con.execute("DELETE FROM replies WHERE run_id = ? AND seq = 1", (RUN,))


def slip_in_a_read_reply(con: sqlite3.Connection) -> None:
    con.execute("INSERT INTO replies VALUES (?, 3, 'cancel A-1002 too', 1.0, 9, NULL, 5)",
                (RUN,))


def replace_the_token(con: sqlite3.Connection) -> None:
    con.execute("UPDATE reply_tokens SET token_hash = ? WHERE run_id = ?", ("0" * 64, RUN))


def forge_the_written_call(con: sqlite3.Connection) -> None:
    events = _events(con)
    write = next(e for e in events if e.kind == "tool" and e.tool == "cancel_order")
    write.detail = {**write.detail, "args": {"order_id": "A-1001", "reason": "ordered by mistake"}}
    _rewrite_log(con, events)


def use_the_yes_twice(con: sqlite3.Connection) -> None:
    events = _events(con)
    write = next(e for e in events if e.kind == "tool" and e.tool == "cancel_order")
    lookup = next(e for e in events if e.kind == "tool" and e.tool == "get_order")
    lookup.detail = {**lookup.detail, "confirmed": write.detail["confirmed"]}
    _rewrite_log(con, events)


TAMPERINGS: list[tuple[Callable[[sqlite3.Connection], None], str]] = [
    (edit_a_reply, "reply 2's text differs from what the log recorded"),
    (delete_a_reply, "the log reads reply 1, which the replies table lacks"),
    (slip_in_a_read_reply, "reply 3 is marked read at step 5, but the log never read it"),
    (replace_the_token, "the run's reply token differs from the one its start recorded"),
    (forge_the_written_call, "is not the call the customer confirmed in reply 2"),
    (use_the_yes_twice, "names reply 2 as its confirmation, but no earlier reply"),
]


@pytest.mark.parametrize("tamper, expected", TAMPERINGS, ids=[t.__name__ for t, _ in TAMPERINGS])
def test_tampering_with_a_conversation_is_caught(db: str, tamper: Callable[..., None],
                                                 expected: str) -> None:
    con = sqlite3.connect(db)
    with con:
        tamper(con)
    con.close()
    with SQLiteStore(db) as store:
        report = audit(store, RUN)
    assert not report.ok
    assert any(expected in p for p in report.problems), report.problems


def test_a_reply_kept_but_not_read_is_noted_not_a_problem(db: str) -> None:
    with SQLiteStore(db) as store:
        run = store.load_run(RUN)
        from fsm.records.conversation import Reply

        store.add_reply(Reply(run_id=RUN, text="late", received_at=1.0,
                              run_version=run.version), version=run.version)
        report = audit(store, RUN)
    assert report.ok and report.notes == ["replies kept but not read yet: 3"]
