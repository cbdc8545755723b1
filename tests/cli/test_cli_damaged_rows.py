"""One damaged row never stops the others: ``fsm approvals``, ``fsm sweep`` and
``fsm worker --stats`` read and sweep every other row, name the damaged one (its run and
table) on one ``error:`` line, and exit 1. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest
from cli_inproc import HEADPHONES, Cli, Result
from damage import execute, refuse_writes

from fsm.cli import exits

#: Past every approval's expiry (the refund workflow's approvals last 72 hours).
LATER = str(73 * 3600)


def pause(cli: Cli, db: str, *run_ids: str) -> None:
    for run_id in run_ids:
        paused = cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", run_id,
                     "--db", db, "--json")
        assert json.loads(paused.out)["status"] == "awaiting_approval", paused


def errors(result: Result) -> list[str]:
    """The ``error:`` lines a command printed (and nothing else on stderr)."""
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert all(line.startswith("error: ") for line in lines), result.err
    return lines


def test_a_damaged_approval_row_is_named_and_every_other_row_is_read(
        any_db: str, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    pause(cli, any_db, "ok1", "bad", "ok2")
    assert execute(any_db, "UPDATE approvals SET args = '[1,2]' WHERE run_id = 'bad'") == 1

    listed = cli("approvals", "--db", any_db, "--json")
    assert listed.code == exits.ERROR
    assert [r["run_id"] for r in json.loads(listed.out)] == ["ok1", "ok2"]
    (line,) = errors(listed)
    assert "a row of run 'bad' in table 'approvals' is damaged and cannot be read" in line

    stats = cli("worker", "--stats", "--db", any_db, "--json")
    assert stats.code == exits.ERROR
    counts = json.loads(stats.out)
    assert (counts["approvals_waiting"], counts["damaged_rows"]) == (2, 1)
    assert counts["runs"] == {"awaiting_approval": 3}
    (line,) = errors(stats)
    assert "run 'bad' in table 'approvals'" in line

    monkeypatch.setenv("FSM_CLOCK_OFFSET", LATER)
    swept = cli("sweep", "--db", any_db, "--json")
    assert swept.code == exits.ERROR
    assert sorted(t["run_id"] for t in json.loads(swept.out)) == ["ok1", "ok2"]
    (line,) = errors(swept)
    assert "run 'bad' in table 'approvals'" in line
    runs = json.loads(cli("runs", "--db", any_db, "--json").out)
    assert {r["run_id"]: r["status"] for r in runs} == {
        "ok1": "handed_over", "ok2": "handed_over", "bad": "awaiting_approval"}


def test_the_audit_reports_a_damaged_row_as_its_finding(any_db: str, cli: Cli) -> None:
    """Other commands point to ``fsm audit``; the audit itself names the row and says
    FAILED (exit 1), without pointing back to itself."""
    pause(cli, any_db, "bad")
    assert execute(any_db, "UPDATE approvals SET args = '[1,2]' WHERE run_id = 'bad'") == 1
    approving = cli("approve", "bad", "--reviewer", "priya", "--db", any_db)
    assert approving.code == exits.ERROR and "inspect it with fsm audit" in approving.err
    audited = cli("audit", "bad", "--db", any_db)
    assert audited.code == exits.ERROR and audited.err == "", audited
    (line,) = audited.out.splitlines()
    assert line.startswith("audit FAILED: bad: ") and "a row of run 'bad' in table " \
        "'approvals' is damaged and cannot be read" in line
    assert line.endswith("restore the database from a backup") and "fsm audit" not in line
    report = json.loads(cli("audit", "bad", "--db", any_db, "--json").out)
    assert not report["ok"] and "table 'approvals' is damaged" in report["problems"][0]


def test_the_sweep_goes_on_past_runs_it_cannot_read_or_write(
        any_db: str, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Approvals are swept oldest first: the two broken runs come before the good one."""
    pause(cli, any_db, "a-refused", "b-unreadable", "c-ok")
    refuse_writes(any_db, "a-refused")
    assert execute(any_db, "UPDATE runs SET snapshot = '{\"not\": \"a run\"}' "
                           "WHERE run_id = 'b-unreadable'") == 1
    monkeypatch.setenv("FSM_CLOCK_OFFSET", LATER)
    swept = cli("sweep", "--db", any_db, "--json")
    assert swept.code == exits.ERROR
    assert json.loads(swept.out) == [{"run_id": "c-ok", "status": "handed_over",
                                      "state": "handed_over"}]
    unreadable, refused = sorted(errors(swept), key=lambda line: "a-refused" in line)
    assert refused.startswith("error: cannot sweep run 'a-refused': ")
    assert "writes of run a-refused are refused" in refused
    assert "a row of run 'b-unreadable' in table 'runs' is damaged" in unreadable
    again = cli("sweep", "--db", any_db, "--json")  # the broken runs are tried again
    assert json.loads(again.out) == [] and len(errors(again)) == 2
