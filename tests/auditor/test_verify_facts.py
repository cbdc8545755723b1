"""``fsm verify`` warns about a guard, or an ``unless=``, that reads a fact nothing sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_inproc import Cli
from pydantic import BaseModel

from fsm import Guard, ToolSpec, define_workflow
from fsm.auditor.facts import fact_warnings, reads, sets
from fsm.auditor.verify import ToolOnlyAfter, verify
from fsm.cli import exits
from workflows.refund import WORKFLOW as REFUND


class Account(BaseModel):
    account: str


def balance_of(facts: Any) -> int:
    return int(facts["acount"]["balance"])  # the typo, one call away from the guard


def small(facts: Any, payload: Any) -> bool:
    return balance_of(facts) < 10


def desk(remember: Any = None) -> Any:
    return define_workflow(
        "desk", transitions={"reading": {"small": "paying", "large": "approving"},
                             "approving": {"approved": "paying", "declined": "done"},
                             "paying": {"paid": "done"}},
        tools_by_state={"reading": ["look"], "paying": ["pay"]}, initial="reading",
        terminal={"done"}, human_events={"approved", "declined"},
        tools=[ToolSpec("look", lambda a, c: {}, args=Account,
                        remember=remember or (lambda a, r, f: {"account": r})),
               ToolSpec("pay", lambda a, c: "ok", write=True, emits=lambda r: "paid",
                        emits_events=("paid",))],
        guards={"small": Guard("balance under 10", small, establishes=("within_limit",)),
                "large": Guard("balance of 10 or more",
                               lambda f, p: "account" in f and f["account"]["balance"] >= 10)},
        records={"large": "decision"},
        invariants=(ToolOnlyAfter("pay", "approved", unless="within_limit"),))


def test_a_guard_that_reads_a_fact_nothing_sets_is_named_with_the_facts_that_are() -> None:
    spec = desk()
    assert fact_warnings(spec) == [
        "the guard of 'small' (balance under 10) reads 'acount', which no event's record and "
        "no remember hook sets (the facts set are 'account', 'decision'): it can never see "
        "'acount'",
        "pay runs only after a person fires approved, unless a guard established "
        "within_limit: 'within_limit' is established only by the guard of 'small', which "
        "reads facts nothing sets",
    ]
    report = verify(spec)
    assert report.ok and report.warnings == tuple(fact_warnings(spec))
    assert "WARNING   the guard of 'small'" in report.text()
    assert "Warnings:\n\n- the guard of 'small'" in report.markdown()


def test_what_the_guards_read_and_the_hooks_set() -> None:
    assert reads(small) == {"acount"}
    assert reads(REFUND.guards["small_refund"].fn) == {"order", "policy"}
    assert sets(lambda a, r, f: {"account": r, "seen": True}) == {"account", "seen"}
    assert sets(lambda a, r, f: dict(r)) is None       # built at run time: not guessed at
    assert reads(len) is None                          # no source to read


def test_no_warning_for_the_refund_workflow_or_a_hook_that_cannot_be_read() -> None:
    assert fact_warnings(REFUND) == [] and verify(REFUND).warnings == ()
    assert fact_warnings(desk(remember=lambda a, r, f: dict(r))) == []


def test_fsm_verify_prints_the_warnings(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "desk_module.py").write_text(
        "from test_verify_facts import desk\nSPEC = desk()\n")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    try:
        text = cli("verify", "desk_module:SPEC")
        md = cli("verify", "desk_module:SPEC", "-o", "report.md")
    finally:
        sys.path.remove(str(Path(__file__).parent))
    assert text.code == exits.OK and "WARNING   the guard of 'small'" in text.out
    assert md.code == exits.OK
    assert md.err.startswith("warning: the guard of 'small' (balance under 10) reads 'acount'")
    assert "- the guard of 'small'" in (tmp_path / "report.md").read_text()
