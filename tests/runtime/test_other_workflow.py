"""A workflow that is not about refunds shows none of the refund workflow's words.

The cancellation desk (``tests/cancel_desk.py``) has another currency (euros), other
record names (``offer``) and other approve/deny events. Its CLI output, its approval
listing and its diagrams speak only its own words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import cancel_desk
import pytest
from cli_inproc import Cli, error_line
from typer.testing import CliRunner

from fsm.cli import app

REF = "cancel_desk:WORKFLOW"
REFUND_WORDS = re.compile(r"₹|paise|refund|rupee", re.IGNORECASE)


def fsm(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "desk.db")


def test_a_paused_cancellation_reads_in_its_own_words(db: str) -> None:
    cancel_desk.GRANTED.clear()
    shown = fsm("run", REF, "Please cancel my subscription", "--user", "lena",
                "--run-id", "c1", "--policy", "cancel_desk:policy", "--db", db)
    assert "awaiting_approval" in shown
    assert "retention credit of €5,00" in shown
    listing = fsm("approvals", "--db", db)
    assert "€5,00" in listing and "retention credit" in listing
    rows = json.loads(fsm("approvals", "--db", db, "--json"))
    assert [(r["run_id"], r["amount"], r["asks"]) for r in rows] == [
        ("c1", "€5,00", "retention credit of €5,00")]
    decided = fsm("approve", "c1", "--reviewer", "mara", "--note", "loyal customer",
                  "--db", db)
    assert "done" in decided and "kept" in decided
    assert cancel_desk.GRANTED == [{"account": "acct-7", "credit_cents": 500}]
    history = fsm("history", "c1", "--db", db)
    everything = shown + listing + decided + history
    assert not REFUND_WORDS.search(everything), REFUND_WORDS.findall(everything)


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "md"])
def test_its_diagrams_say_nothing_of_refunds(fmt: str) -> None:
    drawn = fsm("diagram", REF, "--format", fmt)
    assert "awaiting_supervisor" in drawn and "accept_credit" in drawn
    assert not REFUND_WORDS.search(drawn), REFUND_WORDS.findall(drawn)


def test_its_money_is_typed_in_euros_and_nothing_says_paise(db: str, cli: Cli) -> None:
    cancel_desk.GRANTED.clear()
    fsm("run", REF, "Please cancel my subscription", "--user", "lena", "--run-id", "c2",
        "--policy", "cancel_desk:policy", "--db", db)
    error_line(cli("approve", "c2", "--reviewer", "mara", "--note", "ok", "--set",
                   "credit_cents=₹3", "--db", db), 2,
               "--set credit_cents is in € (euros), not in another currency (₹)",
               "nothing was decided")
    decided = fsm("approve", "c2", "--reviewer", "mara", "--note", "loyal", "--set",
                  "credit_cents=3.50", "--db", db)
    assert "done" in decided
    assert cancel_desk.GRANTED == [{"account": "acct-7", "credit_cents": 350}]
    helps = fsm("approve", "--help") + fsm("users", "add", "--help")
    assert not REFUND_WORDS.search(helps), REFUND_WORDS.findall(helps)
