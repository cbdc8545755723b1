"""The command line takes money as people write it, through the workflow's Presentation:
``fsm approve --set``, ``fsm users add --limit`` and ``fsm users limit``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_inproc import HEADPHONES, Cli, error_line

FORM = "one amount in ₹ (rupees), e.g. 1,200 or 1200.50, with at most 2 decimals"


@pytest.fixture
def waiting(cli: Cli) -> Path:
    """fsm.db with run ``w`` (₹1,800 of headphones) awaiting approval."""
    assert cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "w").code == 0
    return Path("fsm.db")


def _state(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT status, version FROM runs UNION ALL "
                           "SELECT decision, approved_args FROM approvals").fetchall()
    con.close()
    return rows


@pytest.mark.parametrize(("typed", "said"), [
    pytest.param("1,200.5.3", f"--set amount_paise must be {FORM}", id="two-points"),
    pytest.param("-5", f"--set amount_paise must be {FORM}", id="negative"),
    pytest.param("1e3", f"--set amount_paise must be {FORM}", id="exponent"),
    pytest.param("1200.505", "--set amount_paise has 3 decimals", id="decimals"),
    pytest.param("12,00", f"--set amount_paise must be {FORM}", id="twelve-or-1200"),
    pytest.param("$1200", "--set amount_paise is in ₹ (rupees), not in another currency ($)",
                 id="dollars"),
])
def test_an_amount_that_is_not_one_is_exit_2_and_decides_nothing(
        cli: Cli, waiting: Path, typed: str, said: str) -> None:
    before = _state(waiting)
    error_line(cli("approve", "w", "--reviewer", "priya", "--note", "ok", "--set",
                   f"amount_paise={typed}"), 2, said, "nothing was decided")
    assert _state(waiting) == before


def test_rupees_typed_approve_that_many_rupees(cli: Cli, waiting: Path) -> None:
    done = cli("approve", "w", "--reviewer", "priya", "--note", "part", "--set",
               "amount_paise=₹1,200.50")
    assert done.code == 0, done
    with sqlite3.connect(waiting) as con:
        (granted,) = con.execute("SELECT approved_args FROM approvals").fetchone()
        (paid,) = con.execute("SELECT amount_paise FROM shop_payments").fetchone()
    con.close()
    assert '"amount_paise":120050' in granted and paid == 120_050


def test_release_limits_are_typed_in_the_currency(cli: Cli,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PW_FOR_TEST", "long-enough-password")
    added = cli("users", "add", "priya", "--role", "approver", "--limit", "15,000",
                "--password-env", "PW_FOR_TEST")
    assert added.code == 0 and "limit ₹15,000" in added.out, added
    error_line(cli("users", "add", "kiran", "--role", "approver", "--limit", "1,000.5.0",
                   "--password-env", "PW_FOR_TEST"), 2, f"--limit must be {FORM}",
               "nothing was changed")
    changed = cli("users", "limit", "priya", "20,000.50")
    assert changed.code == 0 and "₹20,000.50" in changed.out, changed
    error_line(cli("users", "limit", "priya", "--", "-1"), 2, "the limit must be")
    error_line(cli("users", "limit", "priya", "€5", "--workflow", "refund"), 2,
               "the limit is in ₹ (rupees), not in another currency (€)")
    euros = cli("users", "limit", "priya", "€5", "--workflow", "cancel_desk:WORKFLOW")
    assert euros.code == 0 and "€5,00" in euros.out, euros
    with sqlite3.connect("fsm.db") as con:
        rows = con.execute("SELECT name, release_limit FROM accounts").fetchall()
    con.close()
    assert rows == [("priya", 500)]


def test_a_limit_of_a_workflow_with_money_but_no_currency_is_refused_not_read_in_cents(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newcomer's desk shows dollars with its own money= and names no currency:
    ``--limit 1`` (one dollar, as the help says) would have been one cent."""
    monkeypatch.setenv("PW_FOR_TEST", "long-enough-password")
    desk = "newcomer_desk:WORKFLOW"
    refused = cli("users", "add", "nadia", "--role", "approver", "--limit", "1",
                  "--workflow", desk, "--password-env", "PW_FOR_TEST")
    error_line(refused, 2, "shows amounts with its own money= but names no currency")
    assert refused.code == 2
    error_line(cli("users", "limit", "nadia", "1", "--workflow", desk), 2,
               "a release limit cannot be typed or shown in it")
    assert not Path("fsm.db").exists()  # refused before the database was opened
    assert cli("users", "add", "nadia", "--role", "approver", "--limit", "none",
               "--workflow", desk, "--password-env", "PW_FOR_TEST").code == 0
    with sqlite3.connect("fsm.db") as con:
        con.execute("UPDATE accounts SET release_limit = 100")
    con.close()
    listed = cli("users", "list", "--workflow", desk)
    assert listed.code == 0 and "100 (minor units)" in listed.out and "₹" not in listed.out
