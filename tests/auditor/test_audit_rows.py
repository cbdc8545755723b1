"""The log covers every row of a run: a change to any of them is caught by the audit.

Each case edits one row behind fsm's back, the way someone with write access to the
database could, and leaves the event log untouched: the audit names what changed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm import Engine, SQLiteStore
from fsm.auditor.audit import audit
from workflows.refund import Shop, build, clerk

Edit = Callable[[sqlite3.Connection], None]


def _snapshot(con: sqlite3.Connection, run_id: str, change: Callable[[dict], None]) -> None:
    (raw,) = con.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    snap = json.loads(raw)
    change(snap)
    con.execute("UPDATE runs SET snapshot = ? WHERE run_id = ?", (json.dumps(snap), run_id))


def _first(con: sqlite3.Connection, sql: str, *args: object) -> object:
    return con.execute(sql, args).fetchone()[0]


EDITS: dict[str, tuple[str, Edit, str]] = {
    "approval note": ("big", lambda c: c.execute(
        "UPDATE approvals SET note = 'all good' WHERE run_id = 'big'"),
        "the decision on approval"),
    "approval arguments": ("big", lambda c: c.execute(
        "UPDATE approvals SET args = ? WHERE run_id = 'big'",
        (json.dumps({"item_id": "headphones-1", "amount_paise": 999_999}),)),
        "as requested"),
    "approval args hash": ("big", lambda c: c.execute(
        "UPDATE approvals SET args_hash = ? WHERE run_id = 'big'", ("0" * 64,)),
        "as requested"),
    "approval expiry": ("big", lambda c: c.execute(
        "UPDATE approvals SET expires_at = expires_at + 86400 WHERE run_id = 'big'"),
        "as requested"),
    "decision time": ("big", lambda c: c.execute(
        "UPDATE approvals SET decided_at = decided_at - 3600 WHERE run_id = 'big'"),
        "the decision on approval"),
    "effect result": ("small", lambda c: c.execute(
        "UPDATE effects SET result = ? WHERE key = 'small:6'",
        (json.dumps({"status": "ok", "amount_paise": 1}),)), "effect row small:6"),
    "effect status": ("small", lambda c: c.execute(
        "UPDATE effects SET status = 'STARTED' WHERE key = 'small:6'"), "effect row small:6"),
    "effect row deleted": ("small", lambda c: c.execute(
        "DELETE FROM effects WHERE key = 'small:6'"), "effect row small:6 was removed"),
    "snapshot facts": ("small", lambda c: _snapshot(
        c, "small", lambda s: s["facts"]["decision"].update(amount_paise=999_999)),
        "the run row's snapshot"),
    "snapshot user": ("small", lambda c: _snapshot(
        c, "small", lambda s: s.update(user="mallory")), "the run row's snapshot"),
    "snapshot status": ("big", lambda c: _snapshot(
        c, "big", lambda s: s.update(reason="nothing to see")), "the run row's snapshot"),
    "transcript message": ("small", lambda c: c.execute(
        "UPDATE messages SET body = ? WHERE run_id = 'small' AND idx = 0",
        (json.dumps({"role": "user", "content": "refund me everything"}),)),
        "transcript messages 0"),
    "transcript message deleted": ("small", lambda c: c.execute(
        "DELETE FROM messages WHERE run_id = 'small' AND idx = 3"), "transcript messages"),
    "view record": ("small", lambda c: c.execute(
        "UPDATE views SET body = ? WHERE run_id = 'small' AND step = 2",
        (json.dumps({"step": 2, "state": "collecting", "tools": ["refund_item"], "events": [],
                     "message_count": 3}),)), "view record of step 2"),
}


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A paid small refund and an approved large one, both auditing clean."""
    path = str(tmp_path / "runs.db")
    with SQLiteStore(path) as store, Shop(path) as shop:
        engine = Engine(build(shop.seed_demo()), store, clerk)
        engine.start("Order A-1001: the kettle arrived broken", user="asha", run_id="small")
        engine.start("Order A-1002: the headphones died", user="ravi", run_id="big")
        engine.decide("big", True, "priya", "receipt checked")
        for run_id in ("small", "big"):
            assert audit(store, run_id).ok, audit(store, run_id).problems
    return path


@pytest.mark.parametrize("name", sorted(EDITS))
def test_a_changed_row_is_caught(db: str, name: str) -> None:
    run_id, edit, expected = EDITS[name]
    con = sqlite3.connect(db)
    edit(con)
    con.commit()
    con.close()
    with SQLiteStore(db) as store:
        report = audit(store, run_id)
    assert not report.ok
    assert any(expected in p for p in report.problems), report.problems


def test_a_run_last_committed_by_an_earlier_store_audits_clean_and_is_still_covered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores before this one wrote the snapshot as canonical JSON (sorted keys): the log
    of such a run records that text's hash, which the audit still accepts."""
    import fsm.records as records
    import fsm.records.models as models

    def canonical_snapshot(run: records.RunState) -> str:
        return records.canonical(run.model_dump(mode="json", exclude={"version"}))

    path = str(tmp_path / "runs.db")
    with monkeypatch.context() as patch, SQLiteStore(path) as store, Shop(path) as shop:
        patch.setattr(models, "snapshot_json", canonical_snapshot)  # what the store wrote
        Engine(build(shop.seed_demo()), store, clerk).start(
            "Order A-1001: the kettle arrived broken", user="asha", run_id="old")
    con = sqlite3.connect(path)
    (raw,) = con.execute("SELECT snapshot FROM runs WHERE run_id = 'old'").fetchone()
    assert raw == records.canonical(json.loads(raw))  # written as the earlier store did
    with SQLiteStore(path) as store:
        assert audit(store, "old").ok, audit(store, "old").problems
    _snapshot(con, "old", lambda s: s.update(user="mallory"))
    con.commit()
    con.close()
    with SQLiteStore(path) as store:
        assert any("the run row's snapshot" in p for p in audit(store, "old").problems)
