"""A decided approval of another run, copied onto a waiting run's row: the log holds no
such decision, so ``fsm approve`` and ``fsm sweep`` hand the run over and say why,
instead of leaving it waiting for ever. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json

from cli_inproc import HEADPHONES, Cli
from damage import execute, query

from fsm.cli import exits

COPY = ("UPDATE approvals SET decision = ?, reviewer = ?, note = ?, decided_at = ? "
        "WHERE run_id = ?")


def pause(cli: Cli, db: str, *run_ids: str) -> None:
    for run_id in run_ids:
        paused = cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", run_id,
                     "--db", db, "--json")
        assert json.loads(paused.out)["status"] == "awaiting_approval", paused


def copy_decision(db: str, source: str, target: str) -> None:
    """``source``'s decided approval, written over ``target``'s waiting one."""
    (row,) = query(db, "SELECT decision, reviewer, note, decided_at FROM approvals "
                       "WHERE run_id = ? AND decision IS NOT NULL", (source,))
    assert execute(db, COPY, (*row, target)) == 1


def status(cli: Cli, db: str, run_id: str) -> dict[str, str]:
    return json.loads(cli("show", run_id, "--db", db, "--json").out)


def test_approve_hands_over_a_run_whose_approval_row_holds_a_copied_decision(
        any_db: str, cli: Cli) -> None:
    pause(cli, any_db, "decided", "waiting")
    approved = cli("approve", "decided", "--reviewer", "priya", "--note", "ok", "--db", any_db)
    assert approved.code == exits.OK, approved
    copy_decision(any_db, "decided", "waiting")

    again = cli("approve", "waiting", "--reviewer", "priya", "--note", "ok", "--db", any_db,
                "--json")
    assert "Traceback" not in again.err
    run = json.loads(again.out)
    assert run["status"] == "handed_over"
    assert "says it was approved by priya, but the run's log holds no decision of it" \
        in run["reason"]
    shop = query(any_db, "SELECT COUNT(*) FROM shop_payments WHERE idempotency_key "
                         "LIKE ?", ("waiting:%",))
    assert shop == [(0,)]


def test_sweep_hands_over_a_run_whose_approval_row_holds_a_copied_decision(
        any_db: str, cli: Cli) -> None:
    pause(cli, any_db, "decided", "waiting", "other")
    assert cli("approve", "decided", "--reviewer", "priya", "--note", "ok",
               "--db", any_db).code == exits.OK
    copy_decision(any_db, "decided", "waiting")

    swept = cli("sweep", "--db", any_db, "--json")
    assert swept.code == exits.OK, swept
    assert [t["run_id"] for t in json.loads(swept.out)] == ["waiting"]
    runs = {r["run_id"]: r for r in json.loads(cli("runs", "--db", any_db, "--json").out)}
    assert runs["waiting"]["status"] == "handed_over"
    assert runs["other"]["status"] == "awaiting_approval"
    assert cli("sweep", "--db", any_db, "--json").out.strip() in ("[]", "")
