"""``fsm run --model`` against a local OpenAI-compatible server, ``fsm show --request``,
and ``--timeout`` for slow models."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from cli_inproc import Cli
from fake_openai import FakeOpenAI, call
from refund_scripts import large_refund, small_refund

from fsm import SQLiteStore
from workflows.refund.shop import Shop

HAPPY = small_refund()


def fsm(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FSM_FAULT"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=60)


def ledger(db: Path) -> list[int]:
    """The amounts the shop in ``db`` paid out."""
    shop = Shop(str(db))
    try:
        return [r["amount_paise"] for r in shop.ledger()]
    finally:
        shop._db.close()


def test_run_with_a_model_and_show_the_exact_requests(tmp_path: Path, server: FakeOpenAI,
                                                      cli: Cli) -> None:
    db = tmp_path / "m.db"
    server.script(*[call(name, args, usage=(1000, 50)) for name, args in HAPPY])
    proc = fsm(db, "run", "refund", "Order A-1001: the kettle arrived broken", "--user", "asha",
               "--run-id", "m1", "--model", "gpt-4o-mini", "--base-url", server.base_url,
               "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "done" and out["tokens"] == 7 * 1050
    assert out["cost_micros"] > 0
    assert ledger(db) == [35_000]
    sent = [r.raw for r in server.chat]
    assert len(sent) == len(HAPPY)
    for step, raw in enumerate(sent, start=1):  # what the process sent, rebuilt here
        shown = cli("show", "m1", "--step", str(step), "--request", "--db", str(db))
        assert shown.code == 0, shown.err
        assert shown.out.rstrip("\n").encode() == raw, f"step {step} differs"
    history = json.loads(cli("history", "m1", "--json", "--db", str(db)).out)
    policy = [e for e in history if e["kind"] == "policy"]
    assert all(e["tokens"] == 1050 and e["cost_micros"] > 0 for e in policy)


def test_show_request_needs_a_model_for_a_rule_based_run(tmp_path: Path, cli: Cli) -> None:
    db = str(tmp_path / "c.db")
    assert cli("run", "refund", "Order A-1001: broken", "--user", "asha",
               "--run-id", "c1", "--db", db).code == 0
    shown = cli("show", "c1", "--request", "--db", db)
    assert shown.code == 1 and "give --model NAME" in shown.err
    body = json.loads(cli("show", "c1", "--step", "6", "--request", "--model", "m",
                          "--db", db).out)
    assert body["model"] == "m"
    assert [t["function"]["name"] for t in body["tools"]] == ["refund_item"]


def policy_calls(db: Path, run_id: str) -> list[int]:
    """``calls`` (attempts) of each policy step in the run's log."""
    store = SQLiteStore(str(db))
    try:
        return [e.detail["calls"] for e in store.events(run_id) if e.kind == "policy"]
    finally:
        store.close()


def test_timeout_for_a_slow_model_is_used_by_run_and_by_approve(tmp_path: Path,
                                                                server: FakeOpenAI) -> None:
    db = tmp_path / "t.db"
    steps = large_refund()
    slow = [dataclasses.replace(call(*steps[0]), delay=1.0), *[call(*s) for s in steps[:5]]]
    server.script(*slow)
    proc = fsm(db, "run", "refund", "Order A-1002: the headphones broke", "--user", "ravi",
               "--run-id", "t1", "--model", "gpt-4o-mini", "--base-url", server.base_url,
               "--timeout", "0.2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "awaiting_approval"
    # The first reply came after 1 s: given up on at 0.2 s, asked again.
    assert policy_calls(db, "t1") == [2, 1, 1, 1, 1]

    server.script(dataclasses.replace(call(*steps[5]), delay=1.0),
                  *[call(*s) for s in steps[5:]])
    proc = fsm(db, "approve", "t1", "--reviewer", "priya", "--note", "ok", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"
    assert policy_calls(db, "t1") == [2, 1, 1, 1, 1, 2, 1]  # the recorded --timeout held
    assert ledger(db) == [180_000]


def test_bad_timeouts_are_refused(tmp_path: Path, server: FakeOpenAI) -> None:
    db = tmp_path / "b.db"
    proc = fsm(db, "run", "refund", "Order A-1001: broken", "--model", "m", "--base-url",
               server.base_url, "--timeout", "0")
    assert proc.returncode == 2  # a usage error: nothing was done
    assert proc.stderr.strip() == ("error: --timeout must be a number of seconds above 0 and "
                                   "at most 86400, not 0")
    proc = fsm(db, "run", "refund", "Order A-1001: broken", "--timeout", "5")
    assert proc.returncode == 2  # a usage error
    assert proc.stderr.strip() == "error: --timeout applies to --model only"
    assert server.chat == []
