"""One damaged row never stops the others: ``fsm approvals``, ``fsm sweep`` and
``fsm worker --stats`` skip the run it belongs to, name it (its run and table) on one
``warning:`` line, read and sweep every other row, and exit 0, as a worker goes on past
such a run. A run they cannot write is an ``error:`` (exit 1). On SQLite and on
PostgreSQL."""

from __future__ import annotations

import json
import time

import pytest
from cli_inproc import HEADPHONES, Cli, Result
from damage import execute, refuse_writes

from fsm.cli import exits
from fsm.definition.registry import load_workflow
from fsm.errors import RowDamaged
from fsm.runtime.engine import Engine
from fsm.store import open_store

#: Past every approval's expiry (the refund workflow's approvals last 72 hours).
LATER = str(73 * 3600)


def pause(cli: Cli, db: str, *run_ids: str) -> None:
    for run_id in run_ids:
        paused = cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", run_id,
                     "--db", db, "--json")
        assert json.loads(paused.out)["status"] == "awaiting_approval", paused


def errors(result: Result, kind: str = "error") -> list[str]:
    """The ``error:`` (or ``warning:``) lines a command printed (nothing else on stderr)."""
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert all(line.startswith(f"{kind}: ") for line in lines), result.err
    return lines


def warnings_of(result: Result) -> list[str]:
    return errors(result, "warning")


def test_a_damaged_approval_row_is_named_and_every_other_row_is_read(
        any_db: str, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    pause(cli, any_db, "ok1", "bad", "ok2")
    assert execute(any_db, "UPDATE approvals SET args = '[1,2]' WHERE run_id = 'bad'") == 1

    listed = cli("approvals", "--db", any_db, "--json")
    assert listed.code == exits.OK
    assert [r["run_id"] for r in json.loads(listed.out)] == ["ok1", "ok2"]
    (line,) = warnings_of(listed)
    assert "a row of run 'bad' in table 'approvals' is damaged and cannot be read" in line
    assert line.endswith("(not listed)")

    stats = cli("worker", "--stats", "--db", any_db, "--json")
    assert stats.code == exits.OK
    counts = json.loads(stats.out)
    assert (counts["approvals_waiting"], counts["damaged_rows"]) == (2, 1)
    assert counts["runs"] == {"awaiting_approval": 3}
    (line,) = warnings_of(stats)
    assert "run 'bad' in table 'approvals'" in line

    monkeypatch.setenv("FSM_CLOCK_OFFSET", LATER)
    swept = cli("sweep", "--db", any_db, "--json")
    assert swept.code == exits.OK
    assert sorted(t["run_id"] for t in json.loads(swept.out)) == ["ok1", "ok2"]
    (line,) = warnings_of(swept)
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
    unreadable, refused = swept.err.splitlines()
    assert refused.startswith("error: cannot sweep run 'a-refused': ")
    assert "writes of run a-refused are refused" in refused
    assert unreadable.startswith("warning: ")
    assert "a row of run 'b-unreadable' in table 'runs' is damaged" in unreadable
    again = cli("sweep", "--db", any_db, "--json")  # the broken runs are tried again
    assert json.loads(again.out) == [] and len(again.err.splitlines()) == 2


def test_a_store_read_of_many_rows_gives_a_page_with_its_damaged_rows(
        any_db: str, cli: Cli) -> None:
    """``list_runs``, ``approvals`` and ``waiting`` raise a damaged row, or, asked to skip
    it, leave it out and name it in the page; the old ``damaged=[]`` still fills."""
    pause(cli, any_db, "ok1", "bad-run", "bad-approval", "ok2")
    assert execute(any_db, "UPDATE runs SET snapshot = '{}' WHERE run_id = 'bad-run'") == 1
    assert execute(any_db, "UPDATE approvals SET args = '[1,2]' "
                           "WHERE run_id = 'bad-approval'") == 1
    with open_store(any_db) as store:
        for read in (store.list_runs, store.approvals, store.waiting):
            with pytest.raises(RowDamaged):
                read()
        runs = store.list_runs(skip_damaged=True)
        assert [r.run_id for r in runs] == ["ok1", "bad-approval", "ok2"]
        assert [(d.table, d.run_id) for d in runs.damaged] == [("runs", "bad-run")]
        approvals = store.approvals(skip_damaged=True)
        assert [a.run_id for a in approvals] == ["ok1", "bad-run", "ok2"]
        assert [(d.table, d.run_id) for d in approvals.damaged] == [
            ("approvals", "bad-approval")]
        waiting = store.waiting(workflow="refund", skip_damaged=True)
        assert sorted(a.run_id for a, _ in waiting) == ["ok1", "ok2"]  # bad-run's is out
        assert sorted((d.table, d.run_id) for d in waiting.damaged) == [
            ("approvals", "bad-approval"), ("runs", "bad-run")]
        old: list[RowDamaged] = []
        with pytest.warns(DeprecationWarning, match=r"list_runs\(damaged=\[...\]\) is "
                                                    r"deprecated; give skip_damaged=True"):
            assert len(store.list_runs(damaged=old)) == 3
        assert [d.run_id for d in old] == ["bad-run"]


def test_the_engine_s_sweep_returns_what_it_could_not_do_as_a_value(
        any_db: str, cli: Cli) -> None:
    """``Engine.sweep`` gives a ``Swept``: the runs it expired, and the failed run and the
    damaged row beside them; it raises the first problem unless told not to. The old
    out-parameters still fill, with a warning."""
    pause(cli, any_db, "a-refused", "b-unreadable", "c-ok", "d-ok")
    refuse_writes(any_db, "a-refused")
    assert execute(any_db, "UPDATE runs SET snapshot = '{\"not\": \"a run\"}' "
                           "WHERE run_id = 'b-unreadable'") == 1
    later = time.time() + int(LATER)
    with open_store(any_db) as store:
        engine = Engine(load_workflow("refund"), store, clock=lambda: later)
        with pytest.raises(RowDamaged, match="run 'b-unreadable' in table 'runs'"):
            engine.sweep()  # every other run is swept all the same
        assert store.load_run("c-ok").status == "handed_over"
        pause(cli, any_db, "e-ok")
        swept = engine.sweep(raising=False)
        assert swept == ["e-ok"]
        assert [r for r, _ in swept.failed] == ["a-refused"]
        assert "writes of run a-refused are refused" in swept.failed[0][1]
        assert [d.run_id for d in swept.damaged] == ["b-unreadable"]
        assert swept.skipped == []
        failed: list[tuple[str, str]] = []
        damaged: list[RowDamaged] = []
        with pytest.warns(DeprecationWarning, match=r"sweep\(failed, damaged=\[...\]\)"):
            assert engine.sweep(failed=failed, damaged=damaged) == []
        assert [r for r, _ in failed] == ["a-refused"]
        assert [d.run_id for d in damaged] == ["b-unreadable"]


def test_a_damaged_event_of_one_run_is_skipped_and_named_and_exits_0(
        any_db: str, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of the log of one run: the commands go on past that run, as workers do."""
    pause(cli, any_db, "ok1", "bad", "ok2")
    assert execute(any_db, "UPDATE events SET detail = '{bad' WHERE run_id = 'bad' "
                           "AND seq = 0") == 1
    listed = cli("approvals", "--db", any_db, "--json")
    assert listed.code == exits.OK, listed
    assert [r["run_id"] for r in json.loads(listed.out)] == ["ok1", "ok2"]
    (line,) = warnings_of(listed)
    assert "a row of run 'bad' in table 'events' is damaged" in line
    monkeypatch.setenv("FSM_CLOCK_OFFSET", LATER)
    swept = cli("sweep", "--db", any_db, "--json")
    assert swept.code == exits.OK, swept
    assert sorted(t["run_id"] for t in json.loads(swept.out)) == ["ok1", "ok2"]
    (line,) = warnings_of(swept)
    assert "a row of run 'bad' in table 'events' is damaged" in line
