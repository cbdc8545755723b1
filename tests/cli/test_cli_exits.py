"""Exit codes scripts can trust, and one ``error:`` line for every kind of bad input."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_inproc import Cli, Result
from paths import ROOT

from fsm.cli import exits
from fsm.store import SQLiteStore

POLICIES = '''
from fsm.policy import PolicyUnavailable

def explode(view):
    raise RuntimeError("the policy has a bug")

def offline(view):
    raise PolicyUnavailable("the model server is down")
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "cli_policies.py").write_text(POLICIES)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    full["PYTHONPATH"] = os.pathsep.join([str(tmp_path), full.get("PYTHONPATH", "")])
    return full


def fsm(db: Path, *args: str | bytes, env: dict[str, str] | None = None,
        stdin: bytes | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, env=env, timeout=60, input=stdin)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode(errors="replace"),
                                       proc.stderr.decode(errors="replace"))


def error_line(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """The one line a failed command printed; it exited with ``code``."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("goal, user, options, status, code", [
    pytest.param("Order A-1001: kettle broken", "asha", [], "done", 0, id="done"),
    pytest.param("Order A-1002: headphones dead", "ravi", [], "awaiting_approval", 0,
                 id="waits-for-a-person"),
    pytest.param("Order A-1001: kettle broken", "asha", ["--policy", "cli_policies:explode"],
                 "failed", 3, id="failed"),
    pytest.param("Order A-1001: kettle broken", "asha", ["--max-steps", "2"],
                 "budget_exhausted", 4, id="budget-exhausted"),
    pytest.param("Order A-1004: refund the lamp", "kiran", [], "handed_over", 5,
                 id="handed-over"),
    pytest.param("Order A-1001: kettle broken", "asha", ["--policy", "cli_policies:offline"],
                 "model_unavailable", 6, id="model-unavailable"),
])
def test_run_exits_with_the_code_of_its_status(tmp_path: Path, cli: Cli, goal: str,
                                               user: str, options: list[str], status: str,
                                               code: int) -> None:
    (tmp_path / "cli_policies.py").write_text(POLICIES)
    done = cli("run", "refund", goal, "--user", user, "--run-id", "r", *options, "--json",
               "--db", "x.db")
    assert json.loads(done.out)["status"] == status
    assert done.code == code == exits.for_status(status), done.err


def test_resume_approve_and_deny_exit_with_the_status_code(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "cli_policies.py").write_text(POLICIES)

    def fsm_here(*args: str) -> Result:
        return cli(*args, "--db", "x.db")

    assert fsm_here("run", "refund", "Order A-1004: lamp", "--user", "kiran", "--run-id",
                    "h").code == exits.HANDED_OVER
    again = fsm_here("resume", "h")
    assert again.code == exits.HANDED_OVER
    assert again.err == "run 'h' has already finished (handed_over); nothing to resume\n"
    offline = fsm_here("run", "refund", "Order A-1001: kettle", "--user", "asha", "--run-id",
                       "m", "--policy", "cli_policies:offline")
    assert offline.code == exits.MODEL_UNAVAILABLE
    # Still offline on resume: the same code; with a working policy it finishes.
    assert fsm_here("resume", "m").code == exits.MODEL_UNAVAILABLE
    assert fsm_here("resume", "m", "--policy", "workflows.refund:clerk").code == exits.OK
    fsm_here("run", "refund", "Order A-1002: dead", "--user", "ravi", "--run-id", "a")
    assert fsm_here("approve", "a", "--reviewer", "priya").code == exits.OK
    fsm_here("run", "refund", "Order A-1002: dead", "--user", "ravi", "--run-id", "d")
    denied = fsm_here("deny", "d", "--reviewer", "priya", "--note", "used")
    assert denied.code == exits.OK and "status   done" in denied.out


def test_the_exit_codes_are_in_the_help_and_the_docs(env: dict[str, str],
                                                       tmp_path: Path) -> None:
    readme = (ROOT / "docs" / "reference" / "exit-codes.md").read_text()
    for command in ("run", "resume", "approve", "deny"):
        shown = subprocess.run([sys.executable, "-m", "fsm", command, "--help"],
                               capture_output=True, text=True, env=env, timeout=60)
        assert shown.returncode == 0
        text = " ".join(shown.stdout.split())
        assert "3 failed; 4 budget exhausted; 5 handed over; 6 model unavailable" in text
    table = {line.split("|")[1].strip(): line for line in readme.splitlines()
             if line.startswith("| ") and line.split("|")[1].strip().isdigit()}
    for status, code in exits.BY_STATUS.items():
        if status != "running":
            assert f"`{status}`" in table[str(code)], (status, code)
    assert "(usage)" in table[str(exits.USAGE)] and "(error)" in table[str(exits.ERROR)]


def test_bad_utf8_in_a_run_id_or_goal_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "x.db"
    fsm(db, "run", "refund", "Order A-1001: kettle", "--user", "asha", "--run-id", "ok", env=env)
    before = db.read_bytes()
    error_line(fsm(db, "resume", b"bad\xff\xfeid", env=env), 2,
               "argument 2 is not valid UTF-8", "bad\\xff\\xfeid")
    error_line(fsm(db, "run", "refund", b"Order A-1001 \xff", env=env), 2, "not valid UTF-8")
    error_line(fsm(db, "run", "refund", "-", env=env, stdin=b"refund \xff please"), 2,
               "standard input is not valid UTF-8")
    assert db.read_bytes() == before


def test_a_step_beyond_any_integer_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "x.db"
    fsm(db, "run", "refund", "Order A-1001: kettle", "--user", "asha", "--run-id", "s", env=env)
    error_line(fsm(db, "show", "s", "--step", "99999999999999999999", env=env), 2,
               "fsm show:", "--step", "less than or equal to 9223372036854775807")
    error_line(fsm(db, "show", "s", "--step", "9223372036854775807", env=env), 1,
               "no view recorded for step 9223372036854775807")
    error_line(fsm(db, "runs", "--limit", "many", env=env), 2, "--limit", "valid integer")
    error_line(fsm(db, "runs", "--no-such-option", env=env), 2, "No such option")


@pytest.mark.parametrize("command", [
    pytest.param(["diagram", "refund", "-o", "{missing}/x.mmd"], id="diagram-missing-folder"),
    pytest.param(["diagram", "refund", "-f", "mermaid", "-o", "{folder}"],
                 id="diagram-onto-a-folder"),
    pytest.param(["verify", "refund", "-o", "{missing}/report.md"], id="verify-missing-folder"),
    pytest.param(["verify", "refund", "-o", "{folder}"], id="verify-onto-a-folder"),
])
def test_output_to_a_missing_folder_or_onto_a_folder_is_one_line(
        tmp_path: Path, env: dict[str, str], command: list[str]) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    args = [c.format(missing=tmp_path / "missing", folder=folder) for c in command]
    proc = subprocess.run([sys.executable, "-m", "fsm", *args], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == exits.USAGE
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: -o ")
    assert ("does not exist" in proc.stderr) or ("is a directory" in proc.stderr)
    assert list(folder.iterdir()) == [] and not (tmp_path / "missing").exists()


def _damage(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as con:
        con.execute(sql)
    con.close()


@pytest.mark.parametrize("table, sql, command", [
    pytest.param("runs", "UPDATE runs SET snapshot = '{\"run_id\": ' WHERE run_id = 'c'",
                 ["show", "c"], id="snapshot"),
    pytest.param("runs", "UPDATE runs SET snapshot = '{\"run_id\": ' WHERE run_id = 'c'",
                 ["runs"], id="snapshot-in-a-listing"),
    pytest.param("messages", "UPDATE messages SET body = '{\"role\": \"us' "
                 "WHERE run_id = 'c' AND idx = 2", ["resume", "c"], id="message"),
    pytest.param("events", "UPDATE events SET detail = 'not json' WHERE run_id = 'c' AND seq = 1",
                 ["history", "c"], id="event"),
    pytest.param("approvals", "UPDATE approvals SET args = '{' WHERE run_id = 'c'",
                 ["approve", "c", "--reviewer", "priya"], id="approval"),
    pytest.param("views", "UPDATE views SET body = '[' WHERE run_id = 'c' AND step = 1",
                 ["show", "c", "--step", "1"], id="view"),
])
def test_a_damaged_row_names_its_run_and_table(tmp_path: Path, env: dict[str, str], table: str,
                                               sql: str, command: list[str]) -> None:
    db = tmp_path / "x.db"
    fsm(db, "run", "refund", "Order A-1002: dead", "--user", "ravi", "--run-id", "c", env=env)
    _damage(db, sql)
    error_line(fsm(db, *command, env=env), 1, "run 'c'", f"table {table!r}", "damaged")


def test_a_listing_skips_a_damaged_run_naming_it_on_a_warning_line(
        tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "x.db"
    fsm(db, "run", "refund", "Order A-1002: dead", "--user", "ravi", "--run-id", "c", env=env)
    _damage(db, "UPDATE approvals SET args = '{' WHERE run_id = 'c'")
    listed = fsm(db, "approvals", env=env)
    assert listed.returncode == exits.OK, listed.stderr
    (line,) = listed.stderr.splitlines()
    assert line.startswith("warning: ") and "run 'c'" in line and "table 'approvals'" in line


def test_a_full_disk_during_a_step_is_one_line_and_loses_nothing(
        tmp_path: Path, env: dict[str, str]) -> None:
    """A real write failure: the process may write no file beyond 200 KB (RLIMIT_FSIZE),
    so the write-ahead log fills up in the middle of the run."""
    import resource
    import signal

    db = tmp_path / "x.db"
    with SQLiteStore(str(db)):
        pass  # the schema is in place before the limit applies

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    proc = subprocess.run(
        [sys.executable, "-m", "fsm", "run", "refund", "Order A-1001: kettle broken", "--user",
         "asha", "--run-id", "full", "--db", str(db)],
        capture_output=True, text=True, env=env, timeout=60, preexec_fn=small_files)
    assert proc.returncode == exits.ERROR, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: database {str(db)!r}: "), lines
    assert "nothing of this write was saved" in lines[0]
    with SQLiteStore(str(db), readonly=True) as store:
        stopped = store.load_run("full")
    assert stopped.status == "running" and 0 < stopped.step < 7
    # With room again, the run continues from its last committed step, and the log holds.
    resumed = fsm(db, "resume", "full", env=env)
    assert resumed.returncode == exits.OK and "status   done" in resumed.stdout
    audit = fsm(db, "audit", "full", env=env)
    assert audit.returncode == 0 and "audit ok" in audit.stdout
