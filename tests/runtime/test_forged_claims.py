"""A write runs only from a claim the hash-chained log witnessed.

Someone with write access to the database inserts an ``effects`` row that looks like a
claim a crashed process left: the refund of a paused A-1002 (₹1,800). Whatever happens
next (a denial, a raised budget, a model that calls the tool itself), no money moves,
the run is handed over with one line that says why, and ``fsm audit`` names the row.
On SQLite and on PostgreSQL, through the command line, as an operator would meet it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_inproc import Cli

from fsm import Engine, open_store
from fsm.auditor.audit import audit
from fsm.cli import exits
from fsm.records import Effect, Event, fingerprint
from fsm.store import Store
from workflows.refund import build, clerk
from workflows.refund.shop import open_shop

HEADPHONES = "Order A-1002: my headphones stopped working, I want my money back"
KETTLE = "Order A-1001: the kettle arrived broken, please refund it"
REFUND = {"order_id": "A-1002", "item_id": "headphones-1", "amount_paise": 180_000}


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the runs and the shop live: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(db: str) -> Iterator[Store]:  # type: ignore[override]
    s = open_store(db)
    yield s
    s.close()


def forge(db: str, key: str, run_id: str, step: int, args: dict[str, Any], *,
          status: str = "STARTED", result: Any = None) -> None:
    """Insert an effects row behind fsm's back, as someone with write access could."""
    row = (key, run_id, step, "refund_item", json.dumps(args), status,
           None if result is None else json.dumps(result), time.time())
    sql = ("INSERT INTO effects (key, run_id, step, tool, args, status, result, started_at) "
           "VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m}, {m})")
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(sql.format(m="%s"), row)
    else:
        con = sqlite3.connect(db)
        with con:
            con.execute(sql.format(m="?"), row)
        con.close()


def paid(db: str) -> list[tuple[str, int]]:
    shop = open_shop(db)
    try:
        return [(p["order_id"], p["amount_paise"]) for p in shop.ledger()]
    finally:
        shop.close()


def pause_big(cli: Cli, db: str, *more: str, code: int = exits.OK) -> None:
    r = cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "big", "--db", db, *more)
    assert r.code == code, r


def assert_refused(store: Store, db: str, key: str) -> None:
    """Nothing paid; the run handed over with one line naming the row; the audit names it."""
    assert paid(db) == []
    run = store.load_run("big")
    assert run.status == "handed_over", run
    assert run.reason is not None and "\n" not in run.reason
    assert key in run.reason and "not witnessed" in run.reason, run.reason
    assert not [e for e in store.events("big") if e.kind == "tool" and e.tool == "refund_item"]
    (handover,) = store.run_handovers("big")  # at the desk, for the reason it has
    assert handover.cause == "unwitnessed" and key in handover.reason
    problems = audit(store, "big").problems
    assert any(f"effect {key}" in p and "no claim" in p for p in problems), problems


def test_a_forged_claim_does_not_pay_when_the_refund_is_denied(cli: Cli, db: str,
                                                               store: Store) -> None:
    pause_big(cli, db)
    assert store.load_run("big").step == 5
    forge(db, "big:6", "big", 6, REFUND)
    r = cli("deny", "big", "--reviewer", "priya", "--note", "no receipt", "--db", db)
    assert r.code == exits.HANDED_OVER, r
    assert_refused(store, db, "big:6")


def test_a_forged_claim_does_not_pay_when_a_spent_budget_is_raised(cli: Cli, db: str,
                                                                   store: Store) -> None:
    pause_big(cli, db, "--max-steps", "4", code=exits.BUDGET_EXHAUSTED)
    run = store.load_run("big")
    assert (run.status, run.state, run.step) == ("budget_exhausted", "deciding", 4)
    forge(db, "big:5", "big", 5, REFUND)
    r = cli("resume", "big", "--max-steps", "50", "--by", "ops", "--db", db)
    assert r.code == exits.HANDED_OVER, r
    assert_refused(store, db, "big:5")


def test_a_forged_result_for_the_next_write_is_never_replayed(cli: Cli, db: str,
                                                              store: Store) -> None:
    """A DONE row waiting at the key of the approved refund: replaying it would tell the
    customer they were paid, and the run would never pay."""
    pause_big(cli, db)
    forge(db, "big:6", "big", 6, REFUND, status="DONE",
          result={"status": "ok", "payment": "big:6", "amount_paise": 180_000})
    r = cli("approve", "big", "--reviewer", "priya", "--note", "receipt checked", "--db", db)
    assert r.code == exits.HANDED_OVER, r
    assert_refused(store, db, "big:6")


def test_a_claim_the_log_witnesses_is_still_checked_against_the_state(
        db: str, store: Store) -> None:
    """Someone who can also extend the log (its chain has no secret) writes a claim for
    the refund after the denial: recovery checks it against the tables first."""
    shop = open_shop(db).seed_demo()
    try:
        engine = Engine(build(shop), store, clerk)
        engine.start(HEADPHONES, user="ravi", run_id="big")
        engine.decide("big", False, "priya", "no receipt", drive=False)
        run = store.load_run("big")
        assert (run.status, run.state) == ("running", "replying")
        claim = Event(run_id="big", step=6, time=time.time(), kind="claim", tool="refund_item",
                      state_before="replying", state_after="replying",
                      detail={"key": "big:6", "args_hash": fingerprint(REFUND), "bound": None})
        assert store.claim_effect(Effect(key="big:6", run_id="big", step=6, tool="refund_item",
                                         args=REFUND, status="STARTED",
                                         started_at=time.time()), claim=claim) is None
        run = engine.resume("big")
    finally:
        shop.close()
    assert paid(db) == []
    assert run.status == "handed_over"
    assert run.reason is not None and "big:6" in run.reason
    assert "not allowed in state 'replying'" in run.reason, run.reason


def test_the_audit_names_every_row_no_logged_claim_covers(cli: Cli, db: str,
                                                          store: Store) -> None:
    assert cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "small",
               "--db", db).code == exits.OK
    assert audit(store, "small").ok, audit(store, "small").problems
    assert paid(db) == [("A-1001", 35_000)]
    forge(db, "small:9", "small", 9, {"order_id": "A-1001", "item_id": "kettle-1",
                                       "amount_paise": 35_000})
    forge(db, "small:10", "small", 10, {"order_id": "A-1001", "item_id": "kettle-1",
                                         "amount_paise": 1}, status="DONE", result={})
    problems = audit(store, "small").problems
    assert any("effect small:9" in p and "STARTED" in p and "no claim" in p
               for p in problems), problems
    assert any("effect small:10" in p and "DONE" in p and "no claim" in p
               for p in problems), problems
    r = cli("audit", "small", "--db", db)
    assert r.code == exits.ERROR and "small:9" in r.out + r.err, r
