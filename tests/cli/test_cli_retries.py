"""A command drives a run through failures of the infrastructure: one line per try, and
the run goes on; when the failures last, one ``error:`` line and the run stays resumable
(or the engine hands it over at its bound)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_inproc import Cli, error_line

from fsm import SQLiteStore
from fsm.cli import exits

FLAKY = '''
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fsm import ToolSpec, Unavailable, View, define_workflow

TRIES = Path(__file__).with_name("tries")


class Sku(BaseModel):
    sku: str


def stock(args: Sku, ctx: Any) -> dict[str, int]:
    """Fails for now as many times as the file ``fails`` says, then answers."""
    done = int(TRIES.read_text()) if TRIES.exists() else 0
    TRIES.write_text(str(done + 1))
    if done < int(Path(__file__).with_name("fails").read_text()):
        raise Unavailable("stock service: connection refused")
    return {"in_stock": 3}


spec = define_workflow(
    "stock", transitions={"asking": {}}, tools_by_state={"asking": ["stock"]},
    initial="asking", terminal=set(), finish_states={"asking"},
    tools=[ToolSpec("stock", stock, "Units in stock.", Sku)])


def policy(view: View) -> dict[str, Any]:
    if any(m.get("role") == "tool" for m in view.messages):
        return {"final": "3 in stock"}
    return {"tool": "stock", "args": {"sku": "kettle-1"}}
'''


@pytest.fixture
def flaky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "flaky.py").write_text(FLAKY)
    monkeypatch.delitem(sys.modules, "flaky", raising=False)  # this test's own file
    monkeypatch.setenv("FSM_RETRY_SECONDS", "0")
    return tmp_path


def test_a_command_tries_again_and_the_run_finishes(cli: Cli, flaky: Path) -> None:
    (flaky / "fails").write_text("2")
    r = cli("run", "flaky:spec", "How many?", "--policy", "flaky:policy", "--run-id", "s1",
            "--db", str(flaky / "runs.db"))
    assert r.code == exits.OK, r
    lines = r.err.splitlines()
    assert len(lines) == 2 and all(x.startswith("unavailable: run 's1': stock: ") for x in lines)
    assert "(try 1 of 5;" in lines[0] and "(try 2 of 5;" in lines[1]
    assert "status   done" in r.out
    with SQLiteStore(str(flaky / "runs.db")) as store:
        run = store.load_run("s1")
        assert (run.answer, run.used.steps, run.unavailable) == ("3 in stock", 2, 0)


def test_a_command_gives_up_after_its_tries_and_the_run_is_handed_over(
        cli: Cli, flaky: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (flaky / "fails").write_text("99")
    monkeypatch.setenv("FSM_RETRIES", "3")
    r = cli("run", "flaky:spec", "How many?", "--policy", "flaky:policy", "--run-id", "s1",
            "--db", str(flaky / "runs.db"))
    assert r.code == exits.HANDED_OVER, r
    assert len(r.err.splitlines()) == 2
    assert ("status   handed_over (the infrastructure failed 3 tries in a row: stock: "
            "Unavailable: stock service: connection refused)") in r.out


def test_bad_retry_settings_are_one_usage_line(cli: Cli, flaky: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSM_RETRIES", "many")
    error_line(cli("run", "flaky:spec", "How many?", "--policy", "flaky:policy",
                   "--db", str(flaky / "runs.db")), exits.USAGE,
               "FSM_RETRIES='many' is not a whole number (allowed: 1 or more)")
