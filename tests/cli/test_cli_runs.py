"""``fsm runs`` pages through many runs in the database; ``fsm history`` reads like a log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, call
from refund_scripts import small_refund

from fsm import Engine
from fsm.adapters.openai import OpenAIPolicy
from fsm.cli.history import history_rows
from fsm.records import RunState
from fsm.store import MemoryStore, SQLiteStore, Store
from workflows.refund import Shop, build


def fsm(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=60)


def ids(db: Path, *args: str) -> list[str]:
    proc = fsm(db, "runs", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return [r["run_id"] for r in json.loads(proc.stdout)]


def add_runs(store: Store, n: int) -> None:
    """``n`` runs r000.., created one second apart; every third of workflow "other"."""
    for i in range(n):
        store.create_run(RunState(
            run_id=f"r{i:03d}", workflow="other" if i % 3 == 0 else "refund",
            definition_hash="d", state="start",
            status="done" if i % 2 else "awaiting_approval",
            created_at=1_000_000 + i, updated_at=1_000_000 + i))


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("many") / "many.db"
    with SQLiteStore(str(db)) as store:
        add_runs(store, 120)
    return db


def test_runs_shows_the_newest_fifty_and_says_how_to_see_more(many: Path) -> None:
    assert ids(many) == [f"r{i:03d}" for i in range(119, 69, -1)]
    text = fsm(many, "runs")
    assert text.returncode == 0
    assert sum(1 for line in text.stdout.splitlines() if line.startswith("│ r")) == 50
    assert text.stdout.rstrip().endswith("runs 1-50, newest first; more with --offset 50 or --all")


def test_runs_pages_and_filters_in_the_query(many: Path) -> None:
    assert ids(many, "--limit", "3", "--offset", "2") == ["r117", "r116", "r115"]
    assert len(ids(many, "--all")) == 120
    assert ids(many, "--workflow", "other", "--limit", "3") == ["r117", "r114", "r111"]
    assert ids(many, "--status", "done", "--workflow", "refund", "--limit", "2") == [
        "r119", "r115"]
    assert ids(many, "--offset", "500") == []
    assert fsm(many, "runs", "--workflow", "none").stdout.strip().endswith("no runs match")


@pytest.mark.parametrize("make", [MemoryStore, "sqlite"], ids=["memory", "sqlite"])
def test_list_runs_filters_and_pages_in_every_store(tmp_path: Path, make: Any) -> None:
    with (SQLiteStore(str(tmp_path / "s.db")) if make == "sqlite" else MemoryStore()) as store:
        add_runs(store, 10)
        assert [r.run_id for r in store.list_runs("done")] == [
            "r001", "r003", "r005", "r007", "r009"]  # the old call: oldest first
        newest = store.list_runs(newest_first=True, limit=2, offset=1, workflow="refund")
        assert [r.run_id for r in newest] == ["r007", "r005"]
        assert store.list_runs(workflow="other", status="done") == [
            r for r in store.list_runs() if r.run_id in ("r003", "r009")]


def test_history_names_decisions_and_shows_tool_arguments_and_results(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    fsm(db, "run", "refund", "Order A-1002: headphones dead", "--user", "ravi", "--run-id", "h")
    fsm(db, "deny", "h", "--reviewer", "priya", "--note", "the item was used")
    rows = fsm(db, "history", "h").stdout
    decision = next(line for line in rows.splitlines() if " decision " in line)
    assert "declined: the item was used" in decision and "priya" in decision
    assert "denied" not in rows
    order = next(line for line in rows.splitlines() if " tool " in line and "get_order" in line)
    assert '(order_id=A-1002) → {"customer_matches":true,' in order
    assert " policy " not in rows  # the clerk's calls cost nothing: no rows
    verbose = fsm(db, "history", "h", "--verbose").stdout
    assert verbose.count(" policy ") >= 5


def test_a_server_without_usage_is_warned_about_once_and_shown_in_history(
        tmp_path: Path, server: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    happy = small_refund()
    server.script(*[call(name, args, usage=None) for name, args in happy])
    db = str(tmp_path / "u.db")
    with Shop(db) as shop, SQLiteStore(db) as store:
        shop.seed_demo()
        spec = build(shop)
        policy = OpenAIPolicy(spec, "local-model", base_url=server.base_url)
        with caplog.at_level(logging.WARNING, logger="fsm.adapters.openai"):
            run = Engine(spec, store, policy).start("Order A-1001: kettle broken", user="asha",
                                                     run_id="u")
        assert run.status == "done"
        warned = [r.getMessage() for r in caplog.records
                  if "sent no token usage" in r.getMessage()]
        assert warned == [f"'local-model' at {server.base_url} sent no token usage: its calls "
                          "count 0 tokens and cost 0, so token and cost budgets cannot limit "
                          "them (set --max-steps or max_steps to bound the run)"]
        rows = history_rows(spec, store.events("u"), store.messages("u"))
    said = [r for r in rows if r[2] == "policy"]
    assert len(said) == len(happy)
    assert {r[5] for r in said} == {
        "the model server reported no usage: tokens and cost not counted"}


def test_the_cli_lists_every_status_the_records_define() -> None:
    """``fsm runs --status`` checks against its own list (``import fsm.cli`` loads no
    pydantic); it must be the records' list."""
    from fsm.cli.inspect import STATUSES as cli_statuses
    from fsm.records import STATUSES

    assert cli_statuses == STATUSES
