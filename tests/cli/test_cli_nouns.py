"""The verbs grouped under their noun: ``fsm runs show|history|audit|resume|fork|export|
prune`` and ``fsm approvals approve|deny|sweep`` do what the top-level verbs do, and
``fsm runs`` and ``fsm approvals`` alone still list."""

from __future__ import annotations

import json
from pathlib import Path

from cli_inproc import HEADPHONES, KETTLE, Cli, error_line

from fsm.cli import nouns


def test_each_grouped_verb_is_the_top_level_one(cli: Cli) -> None:
    from fsm.cli.app import app

    top = {c.name: c.callback for c in app.registered_commands}
    for noun, (_, verbs) in nouns.NOUNS.items():
        for name, fn, _ in verbs:
            assert top[name] is fn, (noun, name)


def test_runs_and_approvals_act_under_their_noun(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    done = cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "k", "--db", db)
    assert done.code == 0, done
    for run_id in ("h1", "h2"):
        paused = cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", run_id,
                     "--db", db, "--json")
        assert json.loads(paused.out)["status"] == "awaiting_approval", paused

    listed = cli("runs", "--db", db, "--json")
    assert [r["run_id"] for r in json.loads(listed.out)] == ["h2", "h1", "k"]
    assert cli("runs", "history", "k", "--db", db, "--json").out == \
        cli("history", "k", "--db", db, "--json").out
    audited = cli("runs", "audit", "k", "--db", db)
    assert audited.code == 0 and audited.out.startswith("audit ok: k:"), audited
    waiting = json.loads(cli("approvals", "--db", db, "--json").out)
    assert sorted(a["run_id"] for a in waiting) == ["h1", "h2"]

    approved = cli("approvals", "approve", "h1", "--reviewer", "priya", "--db", db)
    assert approved.code == 0, approved
    denied = cli("approvals", "deny", "h2", "--reviewer", "priya", "--note", "no receipt",
                 "--db", db)
    assert denied.code == 0, denied
    runs = {r["run_id"]: r["status"] for r in json.loads(cli("runs", "--db", db,
                                                             "--json").out)}
    assert runs == {"k": "done", "h1": "done", "h2": "done"}
    assert json.loads(cli("approvals", "--db", db, "--json").out) == []
    assert cli("approvals", "sweep", "--db", db, "--json").out.strip() == "[]"

    forked = cli("runs", "fork", "k", "--at", "2", "--run-id", "k2", "--db", db, "--json")
    assert forked.code == 0 and json.loads(forked.out)["run_id"] == "k2", forked


def test_an_unknown_verb_of_a_noun_is_one_usage_line(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    error_line(cli("runs", "tidy", "--db", db), 2, "fsm runs: No such command 'tidy'",
               "fsm runs --help")
    error_line(cli("approvals", "grant", "x"), 2, "fsm approvals: No such command 'grant'")
