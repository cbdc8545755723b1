"""Options and arguments the CLI refuses: exit 2 ("usage, nothing was done") with one line
that names the option and what it takes, before any run or file is created."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
from pathlib import Path

import pytest
from cli_inproc import HEADPHONES, KETTLE, Cli, error_line

from fsm.cli import exits
from fsm.records import RunState, utc
from fsm.store import SQLiteStore

USAGE = exits.USAGE


def runs_in(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT run_id, status FROM runs ORDER BY run_id").fetchall()
    con.close()
    return rows


@pytest.fixture
def waiting(cli: Cli) -> Path:
    """fsm.db with run ``w`` awaiting approval and run ``b`` out of its step budget."""
    assert cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "w").code == 0
    assert cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "b", "--max-steps",
               "2").code == exits.BUDGET_EXHAUSTED
    return Path("fsm.db")


@pytest.mark.parametrize("args, fragments", [
    pytest.param(["approve", "w", "--reviewer", "priya", "--set", "amount_paise=abc"],
                 ["amount_paise"], id="set-not-a-number"),
    pytest.param(["approve", "w", "--reviewer", "priya", "--set", "amount_paise=-5"],
                 ["amount_paise"], id="set-negative"),
    pytest.param(["approve", "w", "--reviewer", "priya", "--set", "nofield"],
                 ["--set takes field=value"], id="set-syntax"),
    pytest.param(["approve", "w", "--reviewer", ""], ["--reviewer", "empty"],
                 id="empty-reviewer"),
    pytest.param(["deny", "w", "--reviewer", " ", "--note", "no"], ["--reviewer", "empty"],
                 id="blank-reviewer"),
    pytest.param(["approve", "w", "--reviewer", "priya", "--event", "nosuch"], ["nosuch"],
                 id="event-not-offered"),
    pytest.param(["approve", "w", "--reviewer", "priya", "--event", ""], ["--event", "empty"],
                 id="empty-event"),
    pytest.param(["resume", "b", "--max-steps", "1", "--by", "ops"],
                 ["max_steps 1 is not above what the run has used"], id="limit-not-above"),
    pytest.param(["resume", "b", "--max-steps", "3", "--by", ""], ["--by", "empty"],
                 id="empty-by"),
    pytest.param(["resume", "b", "--max-tokens", "5", "--by", "ops"],
                 ["run 'b' has no token limit; nothing to raise (leave out --max-tokens)"],
                 id="no-token-limit"),
    pytest.param(["resume", "b", "--max-cost-micros", "7", "--by", "ops"],
                 ["run 'b' has no cost limit; nothing to raise"], id="no-cost-limit"),
    pytest.param(["resume", "b", "--max-seconds", "7", "--by", "ops"],
                 ["run 'b' has no active-time limit; nothing to raise (leave out "
                  "--max-seconds)"], id="no-time-limit"),
])
def test_a_refused_decision_or_budget_is_a_usage_error_and_changes_nothing(
        cli: Cli, waiting: Path, args: list[str], fragments: list[str]) -> None:
    before = waiting.read_bytes(), runs_in(waiting)
    error_line(cli(*args), USAGE, *fragments)
    assert (waiting.read_bytes(), runs_in(waiting)) == before
    history = cli("history", "b", "--json")
    assert "budget" not in [e["kind"] for e in json.loads(history.out)]


def test_a_budget_with_a_limit_is_still_raised(cli: Cli, waiting: Path) -> None:
    raised = cli("resume", "b", "--max-steps", "80", "--by", "ops")
    assert raised.code == exits.OK, raised
    assert ("b", "done") in runs_in(waiting)


@pytest.mark.parametrize("value, shown", [
    pytest.param("-1", "-1", id="negative"), pytest.param("0", "0", id="zero"),
    pytest.param("nan", "nan", id="nan"), pytest.param("inf", "inf", id="inf"),
    pytest.param("1e300", "1e+300", id="too-large"),
])
def test_a_bad_timeout_names_the_option_and_creates_no_run(cli: Cli, value: str,
                                                           shown: str) -> None:
    line = error_line(cli("run", "refund", KETTLE, "--user", "asha", "--model", "m",
                          "--base-url", "http://127.0.0.1:1/v1", "--timeout", value), USAGE)
    assert line == ("error: --timeout must be a number of seconds above 0 and at most 86400, "
                    f"not {shown}")
    assert not Path("fsm.db").exists()


@pytest.mark.parametrize("args, fragments", [
    pytest.param(["diagram", "refund", "-o", "x.txt"], ["cannot tell the format"],
                 id="unknown-suffix"),
    pytest.param(["diagram", "refund", "--format", "bogus"], ["unknown diagram format 'bogus'",
                 "allowed: dot"], id="unknown-format"),
    pytest.param(["users", "add", "alice", "--role", "boss", "--password-env", "HOME"],
                 ["--role", "unknown role 'boss' (allowed: approver, auditor)"],
                 id="unknown-role"),
    pytest.param(["runs", "--limit", str(2**63 - 1)], ["--limit"], id="limit-at-the-maximum"),
    pytest.param(["run", "refund", KETTLE, "--model", ""], ["--model must not be empty"],
                 id="empty-model"),
    pytest.param(["run", "refund", KETTLE, "--policy", ""], ["--policy must not be empty"],
                 id="empty-policy"),
    pytest.param(["run", "refund", KETTLE, "--db", ""], ["--db must not be empty"],
                 id="empty-db"),
    pytest.param(["runs", "--db", ""], ["--db must not be empty"], id="empty-db-reader"),
    pytest.param(["worker", "--lease-seconds", "inf"], ["--lease-seconds"], id="lease-inf"),
    pytest.param(["worker", "--poll-seconds", "1e300"], ["--poll-seconds"], id="poll-huge"),
    pytest.param(["worker", "--sweep-seconds", "inf"], ["--sweep-seconds"], id="sweep-inf"),
    pytest.param(["submit", "refund", ""], ["the goal given is empty"], id="submit-empty"),
    pytest.param(["submit", "refund", "   "], ["the goal given is empty"], id="submit-blank"),
    pytest.param(["submit", "refund", "@missing.txt"], ["cannot read the goal from"],
                 id="submit-missing-file"),
    pytest.param(["submit", "refund", "x", "--max-steps", "99999999999999999999"],
                 ["--max-steps"], id="submit-max-steps"),
])
def test_a_bad_argument_is_a_usage_error_and_writes_nothing(cli: Cli, args: list[str],
                                                           fragments: list[str]) -> None:
    error_line(cli(*args), USAGE, *fragments)
    assert sorted(os.listdir()) == []


def test_submit_reads_the_goal_as_run_does(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "goal.txt").write_text("Order A-1001: kettle broken\n")
    assert cli("submit", "refund", "@goal.txt", "--run-id", "f").code == 0
    shown = cli("show", "f", "--json")
    assert shown.code == 1 and "it has not been driven yet" in shown.err
    with SQLiteStore("fsm.db", readonly=True) as store:
        assert store.messages("f")[0]["content"] == "Order A-1001: kettle broken"


@pytest.mark.parametrize("offset", ["1e12", "nan", "inf", "-1e12", "abc"])
def test_a_clock_offset_no_listing_could_show_is_refused(cli: Cli,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         offset: str) -> None:
    monkeypatch.setenv("FSM_CLOCK_OFFSET", offset)
    error_line(cli("run", "refund", KETTLE, "--user", "asha"), USAGE, "FSM_CLOCK_OFFSET",
               "between 1970 and the year 9999", repr(offset))
    error_line(cli("submit", "refund", KETTLE), USAGE, "FSM_CLOCK_OFFSET")
    assert not Path("fsm.db").exists()


def test_one_time_beyond_any_date_does_not_break_the_listings(cli: Cli) -> None:
    assert cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "w").code == 0
    with SQLiteStore("fsm.db") as store:
        store.create_run(RunState(run_id="far", workflow="refund", definition_hash="d",
                                  state="collecting", created_at=1e12, updated_at=1e12))
    assert utc(1e12) == "1000000000000.0 s after 1970 (not a date)"
    assert utc(float("nan")) == "nan s after 1970 (not a date)"
    listed = cli("runs", "--json")
    assert listed.code == 0, listed
    assert {r["run_id"]: r["updated"] for r in json.loads(listed.out)}["far"] == utc(1e12)
    for args in (["runs"], ["approvals"], ["history", "w"]):
        assert cli(*args).code == 0


# -- fsm diagram -o ----------------------------------------------------------------------

def test_diagram_refuses_to_replace_what_is_not_a_regular_file(cli: Cli,
                                                               tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.dot"
    os.mkfifo(fifo)
    error_line(cli("diagram", "refund", "--format", "dot", "-o", str(fifo)), USAGE,
               "is not a regular file", "(a device, FIFO or socket)")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    os.symlink(fifo, tmp_path / "to-fifo.dot")
    error_line(cli("diagram", "refund", "-o", str(tmp_path / "to-fifo.dot")), USAGE,
               "is not a regular file", f"(the link points to {str(fifo)!r})")
    assert (tmp_path / "to-fifo.dot").is_symlink()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock.dot"))
        error_line(cli("diagram", "refund", "-o", str(tmp_path / "sock.dot")), USAGE,
                   "is not a regular file")
    assert sorted(os.listdir(tmp_path)) == ["fifo.dot", "sock.dot", "to-fifo.dot"]


def test_diagram_writes_through_a_symlink_to_its_target(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "target.dot").write_text("old")
    os.symlink("target.dot", tmp_path / "link.dot")
    assert cli("diagram", "refund", "-o", str(tmp_path / "link.dot")).code == 0
    assert (tmp_path / "link.dot").is_symlink()
    assert "digraph" in (tmp_path / "target.dot").read_text()


# -- fsm serve ---------------------------------------------------------------------------

def test_serve_that_cannot_listen_is_one_line_not_a_run_status(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        error_line(cli("serve", "--port", str(port)), exits.ERROR,
                   f"cannot listen on 127.0.0.1:{port}: Address already in use",
                   "give --port")
    error_line(cli("serve", "--host", "999.1.1.1"), USAGE,
               "--host '999.1.1.1' is not an address of this machine")
    assert not Path("fsm.db").exists()
