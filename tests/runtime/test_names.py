"""People's names: look-alike names are one person, and reviewers write in one script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_inproc import Cli, Result

from fsm._names import is_blank, name_problem, same_person, skeleton
from workflows.refund.shop import Shop


@pytest.mark.parametrize("a, b, same", [
    pytest.param("ravi", "ravi", True, id="equal"),
    pytest.param("ravi", "Ravi", True, id="case"),
    pytest.param("ravi", "ｒａｖｉ", True, id="width"),
    pytest.param("ravi", "r\u0430vi", True, id="cyrillic-a"),
    pytest.param("ravi", "rav\u0131", True, id="dotless-i"),
    pytest.param("rn", "m", True, id="rn-looks-like-m"),
    pytest.param("R0B", "rob", True, id="zero-and-O"),
    pytest.param("paul", "pau1", True, id="digit-one-and-l"),
    pytest.param(" asha ", "asha", True, id="spaces"),
    pytest.param("ravi\u200b", "ravi", True, id="zero-width-space"),
    pytest.param("ra\u200dvi", "ravi", True, id="zero-width-joiner"),
    pytest.param("\ufeffr\u2060avi\u00ad", "Ravi", True, id="bom-word-joiner-soft-hyphen"),
    pytest.param("r\u034fa\ufe0fvi", "ravi", True, id="grapheme-joiner-variation-selector"),
    pytest.param("ravi\U000e0041", "ravi", True, id="tag-character"),
    pytest.param("ravi", "raví", False, id="accent"),
    pytest.param("ravi", "priya", False, id="other-person"),
])
def test_same_person_compares_confusable_skeletons(a: str, b: str, same: bool) -> None:
    assert same_person(a, b) is same
    assert (skeleton(a) == skeleton(b)) is same


@pytest.mark.parametrize("name, problem", [
    pytest.param("priya", None, id="latin"),
    pytest.param("Анна", None, id="cyrillic"),
    pytest.param("प्रिया", None, id="devanagari"),
    pytest.param("Priya S.", None, id="with-punctuation"),
    pytest.param("r\u0430vi", "mixes letters of 2 scripts (CYRILLIC, LATIN)", id="mixed"),
    pytest.param("  ", "must not be empty", id="blank"),
    pytest.param("\u200b\u2060", "must not be empty", id="invisible"),
])
def test_reviewer_names_in_one_script(name: str, problem: str | None) -> None:
    found = name_problem(name)
    assert found is None if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize("text, blank", [
    pytest.param("", True, id="empty"),
    pytest.param(" \t\n", True, id="spaces"),
    pytest.param("\u200b", True, id="zero-width-space"),
    pytest.param("\u200c\u200d\u2060\ufeff\u00ad\u3164", True, id="only-invisible"),
    pytest.param("\u200bok\u200b", False, id="a-word-between"),
    pytest.param("क्\u200dष", False, id="joiner-inside-a-word"),
])
def test_a_note_of_invisible_characters_is_blank(text: str, blank: bool) -> None:
    assert is_blank(text) is blank


def test_a_deny_whose_note_is_invisible_is_refused(tmp_path: Path, cli: Cli) -> None:
    db = str(tmp_path / "x.db")
    cli("run", "refund", "Order A-1002: headphones dead", "--user", "ravi", "--run-id", "big",
        "--db", db)
    refused = cli("deny", "big", "--reviewer", "priya", "--note", "\u200b\u2060", "--db", db)
    assert refused.code == 2
    assert refused.err.startswith("error: --note must say why the request is denied")
    shown = cli("runs", "--db", db, "--json")
    assert json.loads(shown.out)[0]["status"] == "awaiting_approval"


def test_a_name_with_an_invisible_character_cannot_approve_its_own_refund(
        tmp_path: Path, cli: Cli) -> None:
    db = str(tmp_path / "x.db")
    cli("run", "refund", "Order A-1002: headphones dead", "--user", "ravi", "--run-id", "big",
        "--db", db)
    for alias in ("ravi\u200b", "r\u200da\u2060vi", "\ufeffRavi"):
        refused = cli("approve", "big", "--reviewer", alias, "--db", db)
        assert refused.code == 2 and "cannot decide on it" in refused.err, alias
    with Shop(db) as shop:
        assert shop.ledger() == []


def test_a_look_alike_name_cannot_approve_its_own_refund(tmp_path: Path, cli: Cli) -> None:
    db = tmp_path / "x.db"

    def fsm(*args: str) -> Result:
        return cli(*args, "--db", str(db))

    fsm("run", "refund", "Order A-1002: headphones dead", "--user", "ravi", "--run-id", "big")
    mixed = fsm("approve", "big", "--reviewer", "r\u0430vi")
    assert mixed.code == 2  # a bad argument: nothing was done
    assert mixed.err == ("error: run 'big': reviewer name 'r\u0430vi' mixes letters of 2 "
                         "scripts (CYRILLIC, LATIN); write it in one script\n")
    for alias in ("rav\u0131", "ＲＡＶＩ"):
        refused = fsm("approve", "big", "--reviewer", alias)
        assert refused.code == 2 and "cannot decide on it" in refused.err, alias
    with Shop(str(db)) as shop:
        assert shop.ledger() == []
    approved = fsm("approve", "big", "--reviewer", "priya", "--json")
    assert approved.code == 0 and json.loads(approved.out)["status"] == "done"
    with Shop(str(db)) as shop:
        assert [r["amount_paise"] for r in shop.ledger()] == [180_000]
