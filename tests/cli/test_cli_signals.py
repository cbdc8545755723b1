"""What a real process meets: Ctrl-C, a reader that goes away, closed standard streams."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_inproc import HEADPHONES, KETTLE
from paths import ROOT

from fsm.cli import exits
from fsm.store import SQLiteStore


def fsm_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args], capture_output=True, text=True,
                          env=env, timeout=60)


# -- standard output and input -----------------------------------------------------------

def test_a_reader_that_goes_away_does_not_change_the_exit_code(tmp_path: Path) -> None:
    """The reader of the output has gone before anything is written (``fsm ... | head``
    whose ``head`` has exited): the command's work and exit code stand, and it is quiet."""
    db = str(tmp_path / "pipe.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    for args, code in (
        (["run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "p1"], 0),
        (["approve", "p1", "--reviewer", "priya"], 0),
        (["run", "refund", "Order A-1004: lamp", "--user", "kiran", "--run-id", "h"], 5),
        (["audit", "p1"], 0),
    ):
        read, write = os.pipe()
        os.close(read)  # nobody will ever read: the first write meets EPIPE
        try:
            proc = subprocess.run([sys.executable, "-m", "fsm", *args, "--db", db],
                                  stdout=write, stderr=subprocess.PIPE, text=True, env=env,
                                  timeout=60)
        finally:
            os.close(write)
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stderr == "", (args, proc.stderr)
    with SQLiteStore(db, readonly=True) as store:
        assert store.load_run("p1").status == "done"  # the approval was carried out


def test_closed_standard_streams_give_no_traceback(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with SQLiteStore(str(db)):
        pass
    closed_out = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m fsm runs --db "{db}" >&-; echo "rc=$?" >&2'],
        capture_output=True, text=True, timeout=60)
    assert closed_out.stderr == "rc=0\n", closed_out.stderr
    closed_in = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m fsm run refund - --db "{db}" <&-'],
        capture_output=True, text=True, timeout=60)
    assert closed_in.returncode == exits.USAGE
    assert closed_in.stderr.startswith("error: the goal on standard input is empty"), \
        closed_in.stderr
    assert "Traceback" not in closed_in.stderr


# -- Ctrl-C ------------------------------------------------------------------------------

SLOW_POLICY = '''
import os, time
from workflows.refund.clerk import clerk

def policy(view):
    time.sleep(float(os.environ.get("SLOW_POLICY_SECONDS", "0")))
    return clerk(view)
'''


@pytest.mark.parametrize("run_id", [pytest.param(["--run-id", "slow"], id="named"),
                                    pytest.param([], id="generated")])
def test_ctrl_c_during_a_run_names_the_run_to_resume(tmp_path: Path, run_id: list[str]) -> None:
    (tmp_path / "slow_policy.py").write_text(SLOW_POLICY)
    db = str(tmp_path / "int.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsm", "run", "refund", KETTLE, "--user", "asha", *run_id,
         "--policy", "slow_policy:policy", "--db", db],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env, "SLOW_POLICY_SECONDS": "0.5"},
        # A shell that started this suite in the background ignores SIGINT, and its
        # children inherit that: the command under test gets Ctrl-C's default back.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Interrupted inside a policy call, once a step after the start has been committed.
    deadline = time.monotonic() + 30
    while not _stepped(db):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == exits.INTERRUPTED == 130, (out, err)
    with SQLiteStore(db, readonly=True) as store:
        [stopped] = store.list_runs()
    assert stopped.status == "running"
    assert err == (f"interrupted: run {stopped.run_id} stays resumable "
                   f"(fsm resume {stopped.run_id})\n")
    resumed = fsm_process("resume", stopped.run_id, "--db", db, env=env)
    assert resumed.returncode == 0 and "status   done" in resumed.stdout, resumed.stderr


def _stepped(db: str) -> bool:
    """Whether the run in ``db`` has committed a step after its start."""
    if not Path(db).exists():
        return False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            row = con.execute("SELECT max(step) FROM views").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return bool(row and row[0])


def test_ctrl_c_is_in_the_exit_codes_page_and_the_help() -> None:
    readme = (ROOT / "docs" / "reference" / "exit-codes.md").read_text()
    assert "| 130 | (interrupted) |" in readme
    assert "130 interrupted" in exits.HELP
