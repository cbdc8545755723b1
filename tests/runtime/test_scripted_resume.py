"""A scripted run continued by another process picks up where its transcript left off.

``fsm run --policy scripted_policies:LARGE`` pauses for approval; ``fsm approve`` in a
new process loads a fresh ScriptedPolicy, which must not replay the script from its
first action. The same for a process killed with SIGKILL mid-run and resumed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paths import ROOT, SUPPORT
from refund_scripts import LARGE_REPLY, SMALL_REPLY, actions, large_refund, small_refund

from fsm import Engine, MemoryStore, SQLiteStore, WorkflowSpec
from fsm.testing import ScriptedPolicy, script_position
from workflows.refund.shop import Shop


def fsm(db: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FSM_FAULT"))}
    env["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), str(ROOT)])
    if fault:
        env["FSM_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=60)


def ledger_and_outbox(db: Path) -> tuple[list[int], list[str]]:
    shop = Shop(str(db))
    try:
        return [r["amount_paise"] for r in shop.ledger()], [m["text"] for m in shop.outbox()]
    finally:
        shop._db.close()


def kinds_and_tools(db: Path, run_id: str) -> tuple[dict[str, int], list[str]]:
    """How many policy calls and refusals the log holds, and the tools that ran."""
    store = SQLiteStore(str(db))
    try:
        events = store.events(run_id)
    finally:
        store.close()
    counts = {k: sum(1 for e in events if e.kind == k) for k in ("policy", "refusal")}
    return counts, [e.tool or "" for e in events if e.kind == "tool"]


def test_approve_in_another_process_continues_the_script(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    started = fsm(db, "run", "refund", "Order A-1002: the headphones broke", "--user", "ravi",
                  "--run-id", "s1", "--policy", "scripted_policies:LARGE", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["status"] == "awaiting_approval"

    approved = fsm(db, "approve", "s1", "--reviewer", "priya", "--note", "receipt checked",
                   "--json")
    assert approved.returncode == 0, approved.stderr
    out = json.loads(approved.stdout)
    assert (out["status"], out["state"]) == ("done", "done")
    assert ledger_and_outbox(db) == ([180_000], [LARGE_REPLY])
    # Each scripted action was used once, in order: nothing replayed, nothing refused.
    assert kinds_and_tools(db, "s1") == (
        {"policy": 7, "refusal": 0}, ["get_order", "get_policy", "refund_item", "send_reply"])


def test_a_run_killed_mid_script_resumes_at_its_next_action(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    killed = fsm(db, "run", "refund", "Order A-1001: the kettle broke", "--user", "asha",
                 "--run-id", "k1", "--policy", "scripted_policies:SMALL",
                 fault="after_commit@3")
    assert killed.returncode == -9, killed.stderr
    resumed = fsm(db, "resume", "k1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "done"
    assert ledger_and_outbox(db) == ([35_000], [SMALL_REPLY])
    assert kinds_and_tools(db, "k1") == (
        {"policy": 7, "refusal": 0}, ["get_order", "get_policy", "refund_item", "send_reply"])


def test_a_fresh_policy_object_continues_in_process(spec: WorkflowSpec, store: MemoryStore,
                                                    shop: Shop) -> None:
    script = actions(large_refund())
    first = ScriptedPolicy(script)
    run = Engine(spec, store, first).start("Order A-1002: broken", user="ravi", run_id="p1")
    assert run.status == "awaiting_approval" and first.used == 5
    second = ScriptedPolicy(script)
    run = Engine(spec, store, second).decide("p1", True, "priya", "ok")
    assert run.status == "done" and [r["amount_paise"] for r in shop.ledger()] == [180_000]
    assert second.used == len(script) and len(second.views) == 2  # refund_item, send_reply
    second.assert_finished()


def test_the_position_counts_answered_turns() -> None:
    history = [{"role": "user", "content": "goal"},
               {"role": "assistant", "tool": "get_order", "args": {}},
               {"role": "tool", "tool": "get_order", "result": {}},
               {"role": "assistant", "content": ""}]
    assert script_position(history) == 2
    policy = ScriptedPolicy(actions(small_refund()))
    assert policy(history) == {"tool": "get_policy", "args": {"order_id": "A-1001"}}
    assert policy.used == 3 and len(policy.remaining) == 4
