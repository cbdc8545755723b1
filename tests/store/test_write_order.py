"""Both SQL stores write a commit's rows in one order (:mod:`fsm.store._statements`).

Triggers on every table a commit writes record each row written, in the order the
database saw them, into a table of their own; the same large refund (paused for a
person, approved, paid, with a result large enough to become an artifact) is driven on
SQLite and on PostgreSQL, and the two recorded orders must be the same, and the
documented one: the run row first, then the log, the transcript and view, effects,
approvals and their decision, artifacts, the outbox and the desk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm import Engine, SQLiteStore, Store
from fsm.records.transcript import read_all
from fsm.store import open_store
from workflows.refund import Shop, build, clerk

LARGE = "Order A-1002: my headphones stopped working, I want my money back"

#: (table, the operations recorded) — what a commit writes.
WATCHED = {
    "runs": ("UPDATE",), "events": ("INSERT",), "messages": ("INSERT", "UPDATE"),
    "views": ("INSERT", "UPDATE"), "effects": ("INSERT", "UPDATE"),
    "approvals": ("INSERT", "UPDATE"), "artifacts": ("INSERT",),
    "notifications": ("INSERT",), "handovers": ("INSERT", "UPDATE"),
    "subjects": ("INSERT",), "replies": ("UPDATE",), "reply_tokens": ("INSERT",),
}


def sqlite_triggers(store: SQLiteStore) -> None:
    db = store.db.connection
    db.execute("CREATE TABLE write_order (n INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT, "
               "op TEXT)")
    for table, ops in WATCHED.items():
        for op in ops:
            db.execute(f"CREATE TRIGGER wo_{table}_{op.lower()} AFTER {op} ON {table} "
                       f"BEGIN INSERT INTO write_order (tbl, op) VALUES ('{table}', '{op}'); "
                       "END")


def sqlite_order(store: SQLiteStore) -> list[tuple[str, str]]:
    rows = store.db.connection.execute("SELECT tbl, op FROM write_order ORDER BY n")
    return [tuple(r) for r in rows]


def pg_triggers(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE write_order (n BIGSERIAL PRIMARY KEY, tbl TEXT, op TEXT)")
        conn.execute("CREATE FUNCTION write_order_row() RETURNS trigger AS $$ BEGIN "
                     "INSERT INTO write_order (tbl, op) VALUES (TG_TABLE_NAME, TG_OP); "
                     "RETURN NULL; END $$ LANGUAGE plpgsql")
        for table, ops in WATCHED.items():
            conn.execute(f"CREATE TRIGGER wo_{table} AFTER {' OR '.join(ops)} ON {table} "
                         "FOR EACH ROW EXECUTE FUNCTION write_order_row()")


def pg_order(url: str) -> list[tuple[str, str]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute("SELECT tbl, op FROM write_order ORDER BY n")]


def drive(store: Store, shop: Shop) -> None:
    """A large refund: paused, approved by a person, paid, answered."""
    engine = Engine(build(shop), store, clerk, clock=lambda: 1_700_000_000.0,
                    result_cap=8000)
    run = engine.start(LARGE, user="ravi", run_id="big")
    assert run.status == "awaiting_approval"
    run = engine.decide("big", True, "supervisor")
    assert run.status == "done", run.reason


def runs(order: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Consecutive rows of one table and operation as one (an executemany's rows)."""
    out: list[tuple[str, str]] = []
    for row in order:
        if not out or out[-1] != row:
            out.append(row)
    return out


@pytest.fixture
def orders(tmp_path: Path, pg_url: str) -> dict[str, list[tuple[str, str]]]:
    got: dict[str, list[tuple[str, str]]] = {}
    with Shop(str(tmp_path / "shop.db")).seed_demo() as shop:
        store = SQLiteStore(str(tmp_path / "runs.db"))
        sqlite_triggers(store)
        drive(store, shop)
        got["sqlite"] = sqlite_order(store)
        store.close()
    with Shop(str(tmp_path / "shop2.db")).seed_demo() as shop:
        pg = open_store(pg_url)
        pg_triggers(pg_url)
        drive(pg, shop)
        pg.close()
        got["postgres"] = pg_order(pg_url)
    return got


def first(order: list[tuple[str, str]], row: tuple[str, str]) -> int:
    return order.index(row)


@pytest.mark.postgres
def test_both_sql_stores_write_a_refund_in_the_same_order(
        orders: dict[str, list[tuple[str, str]]]) -> None:
    sqlite, postgres = orders["sqlite"], orders["postgres"]
    assert ("approvals", "UPDATE") in sqlite
    assert ("effects", "INSERT") in sqlite and ("notifications", "INSERT") in sqlite
    assert runs(sqlite) == runs(postgres)
    assert sqlite == postgres  # row by row, too


def _commits(order: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The rows of each commit: a commit's writes begin with its run row's UPDATE (a
    lease change is an UPDATE of the run row too, and begins a group of its own)."""
    out: list[list[tuple[str, str]]] = []
    for row in order:
        if row == ("runs", "UPDATE") or not out:
            out.append([])
        out[-1].append(row)
    return out


RANK = {t: i for i, t in enumerate(
    ["runs", "events", "messages", "views", "effects", "approvals", "replies", "reply_tokens",
     "artifacts", "notifications", "handovers", "subjects"])}


@pytest.mark.postgres
@pytest.mark.parametrize("which", ["sqlite", "postgres"])
def test_each_commit_writes_in_the_documented_order(
        orders: dict[str, list[tuple[str, str]]], which: str) -> None:
    rank: Callable[[tuple[str, str]], Any] = lambda row: RANK[row[0]]  # noqa: E731
    for rows in _commits(orders[which]):
        after_run = rows[1:]
        assert ("runs", "UPDATE") not in after_run
        ranks = [rank(r) for r in after_run]
        assert ranks == sorted(ranks), runs(rows)
    decided = [rows for rows in _commits(orders[which]) if ("approvals", "UPDATE") in rows]
    assert decided, "the decision's commit was recorded"
    (commit,) = decided
    # The decision is written after the run row and the log, never before them.
    assert first(commit, ("approvals", "UPDATE")) > first(commit, ("events", "INSERT"))


def every_row(store: Store) -> None:
    """Two commits that write a row of every kind a commit writes: messages, a view,
    events, an approval request, artifacts, a handover, a subject, a reply token; then a
    finished effect, the decision, and a customer's reply read."""
    from fsm import Approval, Effect, Event, RunState, ViewRecord
    from fsm.records import ApprovalDecision, Handover, StepCommit
    from fsm.records.conversation import Reply

    run = RunState(run_id="r1", workflow="wf", definition_hash="d" * 16, user="asha",
                   state="s", created_at=1000.0, updated_at=1000.0)
    run = store.create_run(run)

    def ev(step: int) -> Event:
        return Event(run_id="r1", step=step, time=1000.0 + step, kind="policy",
                     state_before="s", state_after="s")

    store.claim_effect(Effect(key="r1:1", run_id="r1", step=1, tool="pay", args={"n": 1},
                              status="STARTED", started_at=1001.0))
    store.add_reply(Reply(run_id="r1", text="yes", received_at=1001.0,
                          run_version=run.version), version=run.version)
    one = run.model_copy(update={"step": 1, "message_count": 2, "updated_at": 1001.0,
                                 "status": "awaiting_approval"})
    run = store.commit(StepCommit(
        run=one, expected_version=run.version,
        messages=read_all([{"role": "user", "content": "hi"},
                           {"role": "assistant", "final": "ok"}]),
        view=ViewRecord(step=1, state="s", tools=[], events=[], message_count=0),
        events=[ev(1), ev(1)], artifacts={"a" * 64: "x" * 100},
        new_approval=Approval(approval_id="a1", run_id="r1", step=1, tool="pay",
                              args={"n": 1}, args_hash="h", run_version=run.version,
                              requested_at=1001.0, expires_at=9999.0),
        handover=Handover(handover_id="h1", run_id="r1", workflow="wf", state="s",
                          handed_at=1001.0, cause="model_event", reason="why"),
        subject="A-1", token_hash="t" * 64))
    two = run.model_copy(update={"step": 2, "message_count": 3, "updated_at": 1002.0,
                                 "status": "running"})
    store.commit(StepCommit(
        run=two, expected_version=run.version,
        messages=read_all([{"role": "tool", "tool": "pay", "result": 1}]), events=[ev(2)],
        effects_done={"r1:1": ({"paid": 1}, None)}, replies_read=[1],
        decision=ApprovalDecision(approval_id="a1", decision="approved", reviewer="boss",
                                  note="fine", time=1002.0)))


@pytest.mark.postgres
def test_a_commit_of_every_kind_of_row_is_written_in_one_order(
        tmp_path: Path, pg_url: str) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    sqlite_triggers(store)
    every_row(store)
    sqlite = sqlite_order(store)
    store.close()
    pg = open_store(pg_url)
    pg_triggers(pg_url)
    every_row(pg)
    pg.close()
    postgres = pg_order(pg_url)
    assert sqlite == postgres
    commits = [rows for rows in _commits(sqlite) if ("messages", "INSERT") in rows]
    assert [runs(c) for c in commits] == [
        [("runs", "UPDATE"), ("events", "INSERT"), ("messages", "INSERT"),
         ("views", "INSERT"), ("approvals", "INSERT"), ("reply_tokens", "INSERT"),
         ("artifacts", "INSERT"), ("notifications", "INSERT"), ("handovers", "INSERT"),
         ("notifications", "INSERT"), ("subjects", "INSERT")],
        [("runs", "UPDATE"), ("events", "INSERT"), ("messages", "INSERT"),
         ("effects", "UPDATE"), ("approvals", "UPDATE"), ("replies", "UPDATE")],
    ]
