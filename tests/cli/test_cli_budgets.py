"""Goals from anywhere (never empty), and budgets an operator can raise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm import Engine, MemoryStore, WorkflowSpec
from fsm.auditor.audit import audit
from fsm.cli import exits
from fsm.cli.history import history_rows
from fsm.errors import InvalidRunState, RunError
from fsm.policy import PolicyUnavailable
from fsm.records import Budgets
from fsm.store import SQLiteStore
from workflows.refund import clerk


def fsm(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=120, input=stdin)


@pytest.mark.parametrize("goal", ["", "   ", "\n\t"], ids=["empty", "spaces", "newline-tab"])
def test_an_empty_goal_is_refused(tmp_path: Path, goal: str) -> None:
    proc = fsm(tmp_path / "x.db", "run", "refund", goal, "--user", "asha")
    assert proc.returncode == exits.USAGE
    assert proc.stderr == ("error: the goal given is empty: give the user's request as text, "
                           "- to read it from standard input, or @FILE\n")


def test_the_goal_from_stdin_a_file_or_text_starting_with_at(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    piped = fsm(db, "run", "refund", "-", "--user", "asha", "--run-id", "p", "--json",
                stdin="Order A-1001: kettle broken\n")
    assert piped.returncode == 0, piped.stderr
    big = tmp_path / "request.txt"
    text = "Order A-1004: the lamp flickers. " + "Details follow. " * 65_536  # over 1 MB
    big.write_text(text)
    filed = fsm(db, "run", "refund", f"@{big}", "--user", "asha", "--run-id", "f", "--json")
    assert filed.returncode == 0, filed.stderr
    assert json.loads(filed.stdout)["status"] == "done"
    at = fsm(db, "run", "refund", "@@home: Order A-1005", "--user", "dev", "--run-id", "a")
    assert at.returncode == 0, at.stderr
    with SQLiteStore(str(db), readonly=True) as store:
        assert store.messages("p")[0]["content"] == "Order A-1001: kettle broken"
        assert store.messages("f")[0]["content"] == text and len(text) > 1_000_000
        assert store.messages("a")[0]["content"] == "@home: Order A-1005"
    missing = fsm(db, "run", "refund", f"@{tmp_path}/nope.txt", "--user", "asha")
    assert missing.returncode == exits.USAGE
    assert missing.stderr.startswith(f"error: cannot read the goal from '{tmp_path}/nope.txt'")
    assert fsm(db, "run", "refund", "-", stdin=" \n").returncode == exits.USAGE


def test_resume_raises_the_budget_of_an_exhausted_run(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    stopped = fsm(db, "run", "refund", "Order A-1001: kettle broken", "--user", "asha",
                  "--run-id", "b", "--max-steps", "2")
    assert stopped.returncode == exits.BUDGET_EXHAUSTED
    plain = fsm(db, "resume", "b")
    assert plain.returncode == exits.BUDGET_EXHAUSTED
    assert "raise its budget to continue, e.g. --max-steps N" in plain.stderr
    too_low = fsm(db, "resume", "b", "--max-steps", "2", "--by", "sam")
    assert too_low.returncode == exits.USAGE
    assert "max_steps 2 is not above what the run has used (2)" in too_low.stderr
    raised = fsm(db, "resume", "b", "--max-steps", "20", "--by", "sam", "--json")
    assert raised.returncode == exits.OK, raised.stderr
    assert json.loads(raised.stdout)["status"] == "done"
    with SQLiteStore(str(db), readonly=True) as store:
        (budget,) = [e for e in store.events("b") if e.kind == "budget"]
        detail = {k: v for k, v in budget.detail.items() if k != "rows"}  # rows: row hashes
        assert (budget.reviewer, detail) == (
            "sam", {"by": "sam", "changes": {"max_steps": [2, 20]}})
        assert store.load_run("b").budgets.max_steps == 20
        assert audit(store, "b").ok
    history = fsm(db, "history", "b").stdout
    assert "max_steps 2 → 20" in history


def test_budgets_cannot_be_raised_on_a_finished_run_or_without_a_name(
        spec: WorkflowSpec, store: MemoryStore) -> None:
    engine = Engine(spec, store, clerk)
    done = engine.start("Order A-1001: kettle broken", user="asha", run_id="d")
    assert done.status == "done"
    with pytest.raises(InvalidRunState, match="has finished \\(done\\)"):
        engine.raise_budgets("d", {"max_steps": 100}, by="sam")
    short = engine.start("Order A-1001: again", user="asha", run_id="s",
                         budgets=Budgets(max_steps=1))
    assert short.status == "budget_exhausted"
    with pytest.raises(RunError, match="needs the name"):
        engine.raise_budgets("s", {"max_steps": 100}, by="")
    with pytest.raises(RunError, match="unknown budget"):
        engine.raise_budgets("s", {"max_money": 100}, by="sam")
    paused = engine.start("Order A-1002: headphones dead", user="ravi", run_id="p")
    assert paused.status == "awaiting_approval"
    with pytest.raises(InvalidRunState, match="waiting for a person"):
        engine.raise_budgets("p", {"max_steps": 100}, by="sam")
    assert engine.decide("p", True, "priya").status == "done"


def test_a_model_that_never_answered_uses_up_no_step(spec: WorkflowSpec,
                                                     store: MemoryStore) -> None:
    calls: list[int] = []

    def flaky(view: Any) -> Any:
        calls.append(view.step)
        if len(calls) == 3:
            raise PolicyUnavailable("the server is down")
        return clerk(view)

    engine = Engine(spec, store, flaky, budgets=Budgets(max_steps=7))
    first = engine.start("Order A-1001: kettle broken", user="asha", run_id="m")
    assert (first.status, first.used.steps) == ("model_unavailable", 2)
    # Seven steps complete the refund: the failed call did not eat one of them.
    after = engine.resume("m")
    assert (after.status, after.used.steps) == ("done", 7)
    assert audit(store, "m").ok
    rows = history_rows(spec, store.events("m"), store.messages("m"))
    assert [r[5] for r in rows if r[2] == "policy"] == [
        "the model gave no answer; no step used"]
