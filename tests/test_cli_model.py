"""``fsm run --model`` against a local OpenAI-compatible server, and ``fsm show --request``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_openai import FakeOpenAI, call
from refund_scripts import small_refund

from workflows.refund.shop import Shop

HAPPY = small_refund()


def fsm(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FSM_FAULT"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=60)


def test_run_with_a_model_and_show_the_exact_requests(tmp_path: Path,
                                                      server: FakeOpenAI) -> None:
    db = tmp_path / "m.db"
    server.script(*[call(name, args, usage=(1000, 50)) for name, args in HAPPY])
    proc = fsm(db, "run", "refund", "Order A-1001: the kettle arrived broken", "--user", "asha",
               "--run-id", "m1", "--model", "gpt-4o-mini", "--base-url", server.base_url,
               "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "done" and out["tokens"] == 7 * 1050
    assert out["cost_micros"] > 0
    assert [r["amount_paise"] for r in Shop(str(db)).ledger()] == [35_000]
    sent = [r.raw for r in server.chat]
    assert len(sent) == len(HAPPY)
    for step, raw in enumerate(sent, start=1):
        shown = fsm(db, "show", "m1", "--step", str(step), "--request")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.rstrip("\n").encode() == raw, f"step {step} differs"
    history = json.loads(fsm(db, "history", "m1", "--json").stdout)
    policy = [e for e in history if e["kind"] == "policy"]
    assert all(e["tokens"] == 1050 and e["cost_micros"] > 0 for e in policy)


def test_show_request_needs_a_model_for_a_rule_based_run(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    assert fsm(db, "run", "refund", "Order A-1001: broken", "--user", "asha",
               "--run-id", "c1").returncode == 0
    proc = fsm(db, "show", "c1", "--request")
    assert proc.returncode == 1 and "give --model NAME" in proc.stderr
    body = json.loads(fsm(db, "show", "c1", "--step", "6", "--request", "--model", "m").stdout)
    assert body["model"] == "m"
    assert [t["function"]["name"] for t in body["tools"]] == ["refund_item"]
