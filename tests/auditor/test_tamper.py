"""Tampering with a run's log in the SQLite file is caught by ``audit()`` and ``fsm audit``.

Each case edits the database behind fsm's back the way a person with the file
could: change, delete, reorder or insert event rows, re-hash to cover their
tracks, or move the head kept in the run row. The audit names the first bad row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from crashkit import fork_fsm, run_fsm

from fsm import Event, SQLiteStore
from fsm.auditor.audit import audit
from fsm.store._columns import EVENT_COLUMNS as _EVENT_COLS
from workflows.refund import Shop, build, clerk

RUN = "r"


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A finished small refund, its log intact."""
    path = str(tmp_path / "runs.db")
    store = SQLiteStore(path)
    from fsm import Engine

    run = Engine(build(Shop(path).seed_demo()), store, clerk).start(
        "Order A-1001: the kettle arrived broken, please refund it", user="asha", run_id=RUN)
    assert run.status == "done" and audit(store, RUN).ok
    assert len(store.events(RUN)) > 12
    store.close()
    return path


def _events(con: sqlite3.Connection) -> list[Event]:
    con.row_factory = sqlite3.Row
    rows = con.execute(f"SELECT {', '.join(_EVENT_COLS)} FROM events WHERE run_id = ? "
                       "ORDER BY seq", (RUN,)).fetchall()
    con.row_factory = None
    return [Event.model_validate({**dict(r), "detail": json.loads(r["detail"])}) for r in rows]


def _insert(con: sqlite3.Connection, ev: Event) -> None:
    d = ev.model_dump(mode="json")
    d["detail"] = json.dumps(d["detail"])
    con.execute(f"INSERT INTO events ({', '.join(_EVENT_COLS)}) "
                f"VALUES ({', '.join('?' * len(_EVENT_COLS))})", [d[c] for c in _EVENT_COLS])


def _rehash_from(con: sqlite3.Connection, events: list[Event], start: int) -> str:
    """Recompute prev_hash and hash of every row from ``start`` on; the new last hash."""
    prev = events[start - 1].hash
    for ev in events[start:]:
        ev.prev_hash = prev
        ev.hash = ev.compute_hash()
        con.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE run_id = ? AND seq = ?",
                    (ev.prev_hash, ev.hash, RUN, ev.seq))
        prev = ev.hash
    return prev


# -- the tamperings ---------------------------------------------------------------------------

def edit_reason(con: sqlite3.Connection) -> None:
    con.execute("UPDATE events SET reason = 'nothing to see' WHERE run_id = ? AND seq = 5", (RUN,))


def edit_cost(con: sqlite3.Connection) -> None:
    con.execute("UPDATE events SET cost_micros = 0, tokens = 999 WHERE run_id = ? AND seq = 3",
                (RUN,))


def edit_and_rehash_the_row(con: sqlite3.Connection) -> None:
    events = _events(con)
    ev = events[6]
    ev.detail = {**ev.detail, "forged": True}
    ev.hash = ev.compute_hash()
    con.execute("UPDATE events SET detail = ?, hash = ? WHERE run_id = ? AND seq = 6",
                (json.dumps(ev.detail), ev.hash, RUN))


def edit_and_rehash_the_rest_of_the_chain(con: sqlite3.Connection) -> None:
    events = _events(con)
    events[4].reason = "rewritten"
    con.execute("UPDATE events SET reason = 'rewritten' WHERE run_id = ? AND seq = 4", (RUN,))
    _rehash_from(con, events, 4)


def delete_a_middle_row(con: sqlite3.Connection) -> None:
    con.execute("DELETE FROM events WHERE run_id = ? AND seq = 4", (RUN,))


def delete_the_first_row(con: sqlite3.Connection) -> None:
    con.execute("DELETE FROM events WHERE run_id = ? AND seq = 0", (RUN,))


def delete_the_last_row(con: sqlite3.Connection) -> None:
    con.execute("DELETE FROM events WHERE run_id = ? AND seq = "
                "(SELECT MAX(seq) FROM events WHERE run_id = ?)", (RUN, RUN))


def swap_two_rows(con: sqlite3.Connection) -> None:
    for a, b in ((2, -1), (3, 2), (-1, 3)):
        con.execute("UPDATE events SET seq = ? WHERE run_id = ? AND seq = ?", (b, RUN, a))


def insert_a_row_in_the_middle(con: sqlite3.Connection) -> None:
    events = _events(con)
    con.execute("UPDATE events SET seq = seq + 1000 WHERE run_id = ? AND seq >= 5", (RUN,))
    con.execute("UPDATE events SET seq = seq - 999 WHERE run_id = ? AND seq >= 1000", (RUN,))
    forged = events[4].model_copy(update={"seq": 5, "kind": "decision", "reviewer": "mallory",
                                          "prev_hash": events[4].hash})
    _insert(con, forged.model_copy(update={"hash": forged.compute_hash()}))


def append_a_row(con: sqlite3.Connection) -> None:
    last = _events(con)[-1]
    forged = last.model_copy(update={"seq": last.seq + 1, "kind": "transition",
                                     "event": "refund_ok", "prev_hash": last.hash})
    _insert(con, forged.model_copy(update={"hash": forged.compute_hash()}))


def move_the_head(con: sqlite3.Connection) -> None:
    con.execute("UPDATE runs SET log_head = ? WHERE run_id = ?", ("f" * 64, RUN))


def rewrite_the_log_and_the_head_but_not_the_story(con: sqlite3.Connection) -> None:
    # Re-hashed end to end and the head moved too: the chain checks out, but the log
    # no longer tells the run row's story (its last stop says 'failed', the run is done).
    events = _events(con)
    last = events[-1]
    last.detail = {**last.detail, "status": "failed"}
    con.execute("UPDATE events SET detail = ? WHERE run_id = ? AND seq = ?",
                (json.dumps(last.detail), RUN, last.seq))
    head = _rehash_from(con, events, len(events) - 1)
    con.execute("UPDATE runs SET log_head = ? WHERE run_id = ?", (head, RUN))


CASES = [
    pytest.param(edit_reason, "event seq 5: hash does not match its contents", id="edit"),
    pytest.param(edit_cost, "event seq 3: hash does not match its contents", id="edit-cost"),
    pytest.param(edit_and_rehash_the_row, "event seq 7: prev_hash does not match",
                 id="edit-rehash-row"),
    pytest.param(edit_and_rehash_the_rest_of_the_chain, "event seq {last}: not the head the run",
                 id="edit-rehash-chain"),
    pytest.param(delete_a_middle_row, "event seq 4 is missing (found seq 5", id="delete"),
    pytest.param(delete_the_first_row, "event seq 0 is missing (found seq 1", id="delete-first"),
    pytest.param(delete_the_last_row, "the run row records {count} events but the log has",
                 id="delete-last"),
    pytest.param(swap_two_rows, "event seq 2: prev_hash does not match", id="reorder"),
    pytest.param(insert_a_row_in_the_middle, "event seq 6: prev_hash does not match",
                 id="insert"),
    pytest.param(append_a_row, "the run row records {count} events but the log has",
                 id="append"),
    pytest.param(move_the_head, "event seq {last}: not the head the run row records",
                 id="move-head"),
    pytest.param(rewrite_the_log_and_the_head_but_not_the_story,
                 "the run is done but the log's last stop does not say so", id="rewrite-all"),
]


def _tamper(db: str, how: Callable[[sqlite3.Connection], None]) -> tuple[int, int]:
    """Apply ``how``; return (events before, last seq before)."""
    con = sqlite3.connect(db, isolation_level=None)
    count = con.execute("SELECT COUNT(*) FROM events WHERE run_id = ?", (RUN,)).fetchone()[0]
    con.execute("BEGIN")
    how(con)
    con.execute("COMMIT")
    con.close()
    return count, count - 1


@pytest.mark.parametrize(("how", "first"), CASES)
def test_tampering_is_reported_with_the_first_bad_row(
    db: str, how: Callable[[sqlite3.Connection], None], first: str,
) -> None:
    count, last = _tamper(db, how)
    expected = first.format(count=count, last=last)
    report = audit(SQLiteStore(db), RUN)
    assert not report.ok
    assert expected in report.problems[0], report.problems
    cli = fork_fsm("audit", RUN, "--db", db)
    assert cli.code == 1, cli
    assert cli.stdout.startswith(f"audit FAILED: {RUN}: ") and expected in cli.stdout, cli.stdout
    as_json = json.loads(fork_fsm("audit", RUN, "--db", db, "--json").stdout)
    assert as_json["ok"] is False and expected in as_json["problems"][0]


def test_an_intact_log_passes_the_cli_audit(db: str) -> None:
    cli = run_fsm("audit", RUN, "--db", db)  # the installed console script
    assert cli.code == 0, cli
    assert "audit ok: r:" in cli.stdout and "hash chain intact" in cli.stdout


def test_the_console_script_exits_non_zero_on_a_tampered_log(db: str) -> None:
    _tamper(db, delete_a_middle_row)
    cli = run_fsm("audit", RUN, "--db", db)
    assert cli.code == 1, cli
    assert "audit FAILED" in cli.stdout and "event seq 4 is missing" in cli.stdout
    assert "Traceback" not in cli.stdout + cli.stderr


def test_a_deleted_tail_is_still_reported_after_the_run_goes_on(tmp_path: Path) -> None:
    """Deleting the newest rows of a paused run must not be covered by its next commit."""
    from fsm import Engine

    path = str(tmp_path / "runs.db")
    engine = Engine(build(Shop(path).seed_demo()), SQLiteStore(path), clerk)
    run = engine.start("Order A-1002: my headphones stopped working", user="ravi", run_id=RUN)
    assert run.status == "awaiting_approval"
    count, _ = _tamper(path, delete_the_last_row)
    assert engine.decide(RUN, True, "priya", "ok").status == "done"
    report = audit(SQLiteStore(path), RUN)
    assert not report.ok
    assert f"event seq {count - 1} is missing (found seq {count}" in report.problems[0]


# -- a whole-chain rewrite still has to agree with the approvals and effects tables -------------

def _rewrite(con: sqlite3.Connection, pick: Callable[[Event], bool],
             change: Callable[[Event], None]) -> int:
    """Change the first event ``pick`` selects, re-hash the chain after it, move the head."""
    events = _events(con)
    ev = next(e for e in events if pick(e))
    change(ev)
    d = ev.model_dump(mode="json")
    con.execute("UPDATE events SET reviewer = ?, detail = ? WHERE run_id = ? AND seq = ?",
                (d["reviewer"], json.dumps(d["detail"]), RUN, ev.seq))
    head = _rehash_from(con, events, ev.seq)
    con.execute("UPDATE runs SET log_head = ? WHERE run_id = ?", (head, RUN))
    return ev.seq


#: What the audit says of a rehashed chain: the head it ends at is no signed head.
_UNSIGNED = ("the log's head is not signed by the deployment's key (its signature does not "
             "verify with the key it names): no row of this run is witnessed")


def _claims_lost(*effects: str) -> list[str]:
    """What the audit says of effect rows whose claims a rehashed chain no longer holds:
    each row names its claim event by hash, and rehashing changed every later hash."""
    return [f"effect {e}, DONE): no claim in the log covers it; the row was not written by "
            "a step of this run" for e in effects]


def test_a_rewritten_refund_call_disagrees_with_its_effect_record(db: str) -> None:
    def bigger(ev: Event) -> None:
        ev.detail = {**ev.detail, "args": {**ev.detail["args"], "amount_paise": 99_000}}

    con = sqlite3.connect(db, isolation_level=None)
    seq = _rewrite(con, lambda e: e.kind == "tool" and e.tool == "refund_item", bigger)
    con.close()
    report = audit(SQLiteStore(db), RUN)
    assert report.problems == [
        f"event seq {seq}: the log's call refund_item {{'amount_paise': 99000, 'item_id': "
        "'kettle-1', 'order_id': 'A-1001'} differs from the effect record refund_item "
        "{'amount_paise': 35000, 'item_id': 'kettle-1', 'order_id': 'A-1001'}",
        *_claims_lost("r:7 (send_reply"),
        _UNSIGNED,
    ]


def test_a_rewritten_reviewer_disagrees_with_the_approvals_table(tmp_path: Path) -> None:
    from fsm import Engine

    path = str(tmp_path / "runs.db")
    store = SQLiteStore(path)
    engine = Engine(build(Shop(path).seed_demo()), store, clerk)
    engine.start("Order A-1002: headphones dead", user="ravi", run_id=RUN)
    engine.decide(RUN, True, "priya", "receipt checked")
    assert audit(store, RUN).ok
    store.close()

    def mallory(ev: Event) -> None:
        ev.reviewer = "mallory"

    con = sqlite3.connect(path, isolation_level=None)
    seq = _rewrite(con, lambda e: e.kind == "decision", mallory)
    con.close()
    report = audit(SQLiteStore(path), RUN)
    assert report.problems == [
        f"event seq {seq}: the log says approved by mallory, the approvals table says "
        "approved by priya",
        *_claims_lost("r:6 (refund_item", "r:7 (send_reply"),
        _UNSIGNED,
    ]
    cli = fork_fsm("audit", RUN, "--db", path)
    assert cli.code == 1 and "approvals table says approved by priya" in cli.stdout


@pytest.mark.parametrize("rows", [{"messages": "abc"}, {"view": [1]}, ["snapshot"],
                                  {"effects": ["k"]}, {"approval": None}],
                         ids=["messages", "view", "a-list", "effects", "approval"])
def test_a_rehashed_log_with_malformed_row_hashes_is_reported_not_a_crash(
        db: str, rows: object) -> None:
    """A log rewritten with its hashes made again may hold anything where a commit
    recorded the hashes of the rows it wrote: the audit says so and goes on."""
    def malformed(ev: Event) -> None:
        ev.detail = {**ev.detail, "rows": rows}

    con = sqlite3.connect(db, isolation_level=None)
    seq = _rewrite(con, lambda e: "rows" in e.detail and e.kind != "stop", malformed)
    con.close()
    report = audit(SQLiteStore(db), RUN)
    assert f"event seq {seq}: its record of the rows its commit wrote is malformed" \
        in report.problems, report.problems


@pytest.mark.parametrize("column, value", [("status", "running"), ("workflow", "other")])
def test_a_run_rows_status_or_workflow_column_changed_alone_is_reported(
        db: str, column: str, value: str) -> None:
    """The queue and ``fsm runs --status`` read the run row's columns, not its hashed
    snapshot: a column changed on its own is a problem the audit names."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (value, RUN))
    con.close()
    report = audit(SQLiteStore(db), RUN)
    said = {"status": "status 'running' and workflow 'refund'",
            "workflow": "status 'done' and workflow 'other'"}[column]
    assert report.problems == [
        f"the run row's columns say {said}, its snapshot 'done' and 'refund' (changed "
        "outside a step; the queue and the listings read the columns)"]
