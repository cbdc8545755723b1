"""``fsm export`` and ``fsm prune`` from the command line."""

from __future__ import annotations

import json
import re
import sqlite3
import zipfile

import pytest
from cli_inproc import HEADPHONES, KETTLE, Cli, error_line

from fsm import SQLiteStore
from fsm.auditor.bundle import verify

LAMP = "Order A-1003: the lamp flickers"


def test_export_writes_a_bundle_the_checker_verifies(cli: Cli) -> None:
    assert cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "k1").code == 0
    assert cli("run", "refund", LAMP, "--user", "ravi", "--run-id", "l1").code == 5
    done = cli("export", "k1", "l1", "-o", "evidence.zip", "--by", "audrey")
    assert done.code == 0 and "wrote evidence.zip (2 runs" in done.out, done
    with SQLiteStore("fsm.db", readonly=True) as store:
        keys = dict(store.keys.public)
    assert not verify("evidence.zip").ok  # no public key given: nothing vouches for it
    report = verify("evidence.zip", keys=keys)
    assert report.ok and len(report.proved) == 4, report.text()
    shown = cli("keys", "show")
    assert shown.code == 0 and next(iter(keys.values())).hex() in shown.out, shown
    with zipfile.ZipFile("evidence.zip") as z:
        assert '"exported_by": "audrey"' in z.read("manifest.json").decode()
    error_line(cli("export", "nope", "-o", "x.zip"), 1, "run 'nope' not found",
               "nothing was written")
    error_line(cli("export", "k1", "-o", "x.txt"), 2, "an evidence bundle is a .zip file")


def test_prune_refuses_what_it_cannot_use_and_changes_nothing(cli: Cli) -> None:
    assert cli("run", "refund", KETTLE, "--user", "asha", "--run-id", "k1").code == 0
    error_line(cli("prune", "--finished-before", "last week"), 2,
               "--finished-before takes a date or time such as 2026-01-31")
    error_line(cli("prune", "--finished-before", "2999-01-01", "--status", "running"), 2,
               "--status 'running' is not a finished status", "never pruned")
    dry = cli("prune", "--finished-before", "2999-01-01", "--dry-run")
    assert dry.code == 0 and "would prune 1 runs" in dry.out, dry
    with sqlite3.connect("fsm.db") as con:
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
    con.close()
    done = cli("prune", "--finished-before", "2999-01-01", "--by", "ops", "--json")
    assert done.code == 0 and '"runs": 1' in done.out, done
    audited = cli("audit", "k1")
    assert audited.code == 0 and "k1: pruned; head " in audited.out
    assert "pruned at" in audited.out and "by ops" in audited.out


def _forked_big(cli: Cli) -> None:
    """``big``, a large refund approved and paid, and two forks of it: f1 from step 6
    (running), f2 from step 5 (waiting for a person again)."""
    assert cli("run", "refund", HEADPHONES, "--user", "ravi", "--run-id", "big").code == 0
    assert cli("approve", "big", "--reviewer", "priya", "--note", "ok").code == 0
    assert cli("fork", "big", "--at", "6", "--run-id", "f1").code == 0
    assert cli("fork", "big", "--at", "5", "--run-id", "f2").code == 0


def test_prune_keeps_a_run_whose_forks_are_not_pruned_and_their_audits_pass(cli: Cli) -> None:
    _forked_big(cli)
    dry = cli("prune", "--finished-before", "2999-01-01", "--dry-run")
    assert dry.code == 0 and dry.out.splitlines() == [
        "would prune 0 runs (0 log events) that finished before 2999-01-01; would keep 1 "
        "run whose forks are not pruned", "would keep big: forked by f1, f2"], dry
    done = cli("prune", "--finished-before", "2999-01-01", "--by", "ops")
    assert done.code == 0 and "kept big: forked by f1, f2" in done.out, done
    for run_id, step in (("f1", 6), ("f2", 5)):
        audited = cli("audit", run_id)
        assert audited.code == 0, audited
        assert f"forked from big at step {step}; the link to it verified" in audited.out
    assert cli("resume", "f1").code == 0  # f1 finishes: it is pruned, big still is not
    pruned = json.loads(cli("prune", "--finished-before", "2999-01-01", "--by", "ops",
                            "--json").out)
    assert (pruned["runs"], pruned["kept"]) == (1, {"big": ["f2"]})
    assert "f1: pruned; head " in cli("audit", "f1").out
    report = json.loads(cli("audit", "f2", "--json").out)
    assert report["ok"] and report["warnings"] == []
    assert report["forked_from"]["link"] == "verified"
    assert report["forked_from"]["run_id"] == "big" and report["forked_from"]["step"] == 5


def test_a_fork_whose_parent_was_pruned_anyway_is_audited_with_a_warning(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsm.store import prune

    _forked_big(cli)
    # An fsm from before parents were kept for their forks pruned big all the same.
    where = prune._where
    with monkeypatch.context() as patch:
        patch.setattr(prune, "_where", lambda cut, mark, now, t="runs", forks=True:
                      where(cut, mark, now, t, forks=False))
        done = cli("prune", "--finished-before", "2999-01-01", "--by", "old-ops", "--json")
    assert json.loads(done.out)["runs"] == 1, done
    for run_id in ("f1", "f2"):
        audited = cli("audit", run_id)
        assert audited.code == 0, audited
        lines = audited.out.splitlines()
        assert lines[0].startswith(f"audit ok: {run_id}: "), lines
        assert f"forked from big at step {6 if run_id == 'f1' else 5}; the link cannot be " \
               "verified (see the warning)" in lines
        assert re.search(r"^warning: parent big was pruned on \d{4}-\d\d-\d\d [\d:]+Z by "
                         "old-ops; the link to it cannot be verified", audited.out, re.M)
    report = json.loads(cli("audit", "f2", "--json").out)
    assert report["ok"] and len(report["warnings"]) == 1
    assert report["forked_from"]["link"] == "unverifiable"
    assert report["forked_from"]["parent_pruned_at"] is not None
    # The fork's own part is still audited: its steps and cost from its start event on.
    # (the shop refunded the item already: handed over)
    assert cli("approve", "f2", "--reviewer", "priya", "--note", "again").code == 5
    assert json.loads(cli("audit", "f2", "--json").out)["problems"] == []
    # The pruned run is named as pruned, not as unknown.
    for args in (("show", "big"), ("history", "big"), ("export", "big", "-o", "b.zip")):
        error_line(cli(*args), 1, "run 'big' was pruned on ", " by old-ops (it finished "
                   "done); only its tombstone is left (fsm audit big reports it)")
    error_line(cli("show", "nope"), 1, "run 'nope' not found")
