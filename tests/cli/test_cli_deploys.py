"""Deploys from the command line: ``fsm definitions``, versions in ``fsm runs``,
``fsm diagram``/``fsm verify --version``, ``fsm migrate`` and ``fsm check-history`` (also
``fsm definitions migrate|check-history``).

A deploy is the workflow module's code changing under the same name: the tests start
runs with ``deploykit:WORKFLOW`` as release 1 defines it, then put release 2 in its place.
"""

from __future__ import annotations

import json
from typing import Any

import deploykit
import pytest
from cli_inproc import Cli, error_line

from fsm.cli import exits

LARGE = "Order A-1002: my headphones stopped working, I want my money back"
SMALL = "Order A-1001: the kettle arrived broken"
LAMP = "Order A-1004: the desk lamp flickers"
REF = "deploykit:WORKFLOW"


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``release("2")`` deploys release 2: ``deploykit:WORKFLOW`` is its code from now on."""

    def deploy(number: str, **options: Any) -> None:
        spec = deploykit.v2(**options) if options else deploykit.release(number)
        monkeypatch.setattr(deploykit, "WORKFLOW", spec)

    deploy("1")
    return deploy


@pytest.fixture
def deployed(cli: Cli, release: Any) -> Cli:
    """A large refund waiting (big) and a small one paid (small) under release 1, then
    release 2 deployed and one more small refund paid on it (new)."""
    assert cli("run", REF, LARGE, "--user", "ravi", "--run-id", "big").code == exits.OK
    assert cli("run", REF, SMALL, "--user", "asha", "--run-id", "small").code == exits.OK
    release("2")
    assert cli("run", REF, LAMP, "--user", "asha", "--run-id", "new").code == exits.OK
    return cli


def as_json(result: Any) -> Any:
    assert result.code == 0, result
    return json.loads(result.out)


def test_definitions_lists_each_version_with_its_runs_per_status(deployed: Cli) -> None:
    rows = as_json(deployed("definitions", "--json"))
    assert [(r["version"], r["runs"], r["in_code"]) for r in rows] == [
        ("1", {"awaiting_approval": 1, "done": 1}, "kept"), ("2", {"done": 1}, "current")]
    assert rows[1]["definition_hash"] == deploykit.v2().definition_hash
    table = deployed("definitions", "refund").out
    assert "awaiting_approval 1, done 1" in table and "kept" in table
    assert deployed("definitions", "other").out.strip() == "no definitions recorded for other"


def test_definitions_is_a_noun_whose_bare_word_is_still_the_workflow(deployed: Cli) -> None:
    """``fsm definitions migrate|check-history`` act on versions; any other bare word is
    the workflow to list, wherever the listing's options stand."""
    mine = deployed("definitions", "refund", "--json").out
    assert [r["version"] for r in json.loads(mine)] == ["1", "2"]
    for spelling in (["--workflow", "refund", "--json"], ["--json", "refund"],
                     ["--json", "--", "refund"]):
        assert deployed("definitions", *spelling).out == mine, spelling
    assert deployed("definitions", "--workflow", "other").out.strip() == \
        "no definitions recorded for other"

    dry = deployed("definitions", "migrate", "--workflow", REF, "--from", "1", "--dry-run",
                   "--by", "ops")
    assert dry.code == 0 and dry.out == deployed(
        "migrate", "--workflow", REF, "--from", "1", "--dry-run", "--by", "ops").out, dry
    moved = deployed("definitions", "migrate", "big", "--to", "2", "--by", "ops")
    assert moved.code == 0 and moved.out.splitlines()[-1] == "migrated 1 run(s) to version 2"
    assert {r["run_id"]: r["version"] for r in as_json(deployed("runs", "--json"))}["big"] == "2"
    checked = deployed("definitions", "check-history", "--against", "deploykit:ADDITIVE")
    assert checked.code == 0 and checked.out.splitlines()[0].endswith(": 0 would break")
    error_line(deployed("definitions", "migrate", "--from", "1", "--by", "ops"), exits.USAGE,
               "--from needs --workflow W")


def test_runs_show_each_runs_version(deployed: Cli) -> None:
    runs = {r["run_id"]: r["version"] for r in as_json(deployed("runs", "--json"))}
    assert runs == {"big": "1", "small": "1", "new": "2"}
    header = deployed("runs").out.splitlines()[1]
    assert "version" in header


def test_a_waiting_run_is_approved_and_paid_on_its_version_after_the_deploy(
        deployed: Cli) -> None:
    assert deployed("approve", "big", "--reviewer", "sup").code == exits.OK
    shown = as_json(deployed("runs", "--json"))
    assert {r["run_id"]: (r["status"], r["version"]) for r in shown}["big"] == ("done", "1")
    assert deployed("audit", "big").code == exits.OK


def test_code_that_dropped_the_version_refuses_the_run_in_one_line(
        deployed: Cli, release: Any) -> None:
    release("2", keep_v1=False)
    line = error_line(deployed("approve", "big", "--reviewer", "sup"), exits.ERROR,
                      "run 'big' needs workflow 'refund' version 1",
                      deploykit.v1().definition_hash, "fsm migrate big --to current")
    assert "earlier=" in line


def test_diagram_and_verify_take_a_version(deployed: Cli) -> None:
    current = deployed("diagram", REF, "--format", "mermaid")
    one = deployed("diagram", REF, "--format", "mermaid", "--version", "1")
    assert current.code == one.code == 0
    assert "escalated" in current.out and "escalated" not in one.out
    assert deploykit.v1().definition_hash in one.out
    drawn = deployed("diagram", REF, "--format", "mermaid", "--run", "big")
    assert drawn.code == 0 and deploykit.v1().definition_hash in drawn.out
    error_line(deployed("diagram", REF, "--run", "big", "--version", "2"), exits.USAGE,
               "run 'big' lives on version 1")
    error_line(deployed("diagram", REF, "--version", "9"), exits.USAGE,
               "workflow 'refund' keeps no version '9' (kept: 1 (")
    verified = deployed("verify", REF, "--version", "1")
    assert verified.code == 0 and deploykit.v1().definition_hash in verified.out


def test_migrate_dry_run_then_for_real(deployed: Cli) -> None:
    dry = deployed("migrate", "--workflow", REF, "--from", "1", "--dry-run", "--by", "ops")
    assert dry.code == 0, dry
    assert dry.out.splitlines()[0] == "migrate big: version 1 → 2, awaiting_approval → " \
                                      "awaiting_approval"
    assert dry.out.splitlines()[-1] == "dry run: 1 run(s) would move to version 2; nothing " \
                                       "was changed"
    assert {r["run_id"]: r["version"] for r in as_json(deployed("runs", "--json"))}["big"] == "1"
    done = deployed("migrate", "big", "--to", "2", "--by", "ops")
    assert done.code == 0 and done.out.splitlines()[-1] == "migrated 1 run(s) to version 2"
    assert {r["run_id"]: r["version"] for r in as_json(deployed("runs", "--json"))}["big"] == "2"
    assert deployed("audit", "big").code == 0
    history = as_json(deployed("history", "big", "--json"))
    moved = [e for e in history if e["kind"] == "migrated"]
    assert len(moved) == 1 and moved[0]["detail"]["to_version"] == "2"
    assert deployed("approve", "big", "--reviewer", "sup").code == exits.OK


def test_a_refused_plan_prints_its_lines_and_changes_nothing(deployed: Cli) -> None:
    before = deployed("history", "big", "--json").out
    refused = deployed("migrate", "big", "--map", "awaiting_approval=deciding", "--by", "ops")
    assert refused.code == exits.ERROR
    assert refused.out.splitlines() == [
        "refuse  big: version 1 → 2, awaiting_approval → deciding",
        "  - state 'awaiting_approval' waits for a person, but 'deciding' in version 2 is a "
        "model state: map a waiting state to a state that waits for a person",
        "the plan is refused: nothing was changed"]
    assert deployed("history", "big", "--json").out == before
    dry = deployed("migrate", "big", "--map", "awaiting_approval=deciding", "--dry-run",
                   "--by", "ops")
    assert dry.code == exits.ERROR and dry.out.startswith("refuse  big")


@pytest.mark.parametrize("args, fragment", [
    pytest.param(["big", "--map", "nothing"], "--map 'nothing' is not OLD=NEW", id="map"),
    pytest.param(["--workflow", REF], "give the runs to migrate, or --workflow W --from",
                 id="nothing-selected"),
    pytest.param(["--from", "1"], "--from needs --workflow W", id="from-alone"),
    pytest.param([], "give the runs to migrate, or --workflow W --from", id="no-arguments"),
    pytest.param(["big", "--to", "7"], "keeps no version '7' (kept: 1, 2, or current)",
                 id="unknown-target"),
    pytest.param(["--workflow", REF, "--from", "5"], "no version '5' of workflow 'refund'",
                 id="unknown-source"),
])
def test_migrate_refuses_bad_arguments_in_one_line(deployed: Cli, args: list[str],
                                                   fragment: str) -> None:
    error_line(deployed("migrate", *args, "--by", "ops"), exits.USAGE, fragment)


def test_check_history_fails_a_breaking_candidate_and_passes_an_additive_one(
        deployed: Cli) -> None:
    ok = deployed("check-history", "--against", "deploykit:ADDITIVE")
    assert ok.code == 0, ok
    assert ok.out.splitlines()[0].endswith(": 0 would break")
    broken = deployed("check-history", "--against", "deploykit:RENAMED_TOOL")
    assert broken.code == exits.ERROR
    assert "BREAK small (version 1, done in done)" in broken.out
    assert "the run called 'refund_item', which the candidate does not have" in broken.out
    removed = as_json_any(deployed("check-history", "--against", "deploykit:REMOVED_STATE",
                                   "--runs", "big,new", "--json"))
    assert [r["run_id"] for r in removed["runs"]] == ["big", "new"] and not removed["ok"]
    assert removed["runs"][0]["problems"][-1] == (
        "it waits for a person in 'awaiting_approval', which the candidate does not have")
    sampled = as_json_any(deployed("check-history", "--against", "deploykit:TIGHTER_GUARD",
                                   "--sample", "2", "--seed", "1", "--json"))
    assert len(sampled["runs"]) == 2
    error_line(deployed("check-history", "--against", "deploykit:ADDITIVE", "--runs", "big",
                        "--sample", "1"), exits.USAGE, "give --runs or --sample, not both")


def as_json_any(result: Any) -> Any:
    return json.loads(result.out)
