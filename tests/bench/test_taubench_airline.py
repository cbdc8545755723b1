"""``bench/taubench.py --domain airline`` on two tasks: each matches the reference applied
directly to a fresh server, every generated violation is refused for its own rule, and
the recording proxy saw none cross. ``fsm verify airline`` proves its invariants. The
whole benchmark runs in ``make taubench``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from airline_env import airline_command
from paths import ROOT


def test_two_airline_tasks_match_and_every_violation_is_refused(tmp_path: Path) -> None:
    airline_command()
    out = tmp_path / "airline.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "taubench.py"), "--domain", "airline",
         "--tasks", "8,13", "--json-out", str(out)], capture_output=True, text=True,
        timeout=900, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    result = json.loads(out.read_text())
    s = result["summary"]
    assert result["domain"] == "airline"
    assert s["tasks"] == s["matched"] == 2
    assert s["writes_sent"] == s["reference_writes"] == 1
    assert [r["state"] for r in result["tasks"]] == ["done", "transferred_to_human"]
    assert len(s["violations"]) >= 15
    for cls, c in s["violations"].items():
        assert c["attempts"] == c["refused"] == c["own_rule"] > 0, (cls, c)
        assert c["reached_server"] == 0, (cls, c)
    assert s["cpu_per_step_ms"] > 0 and s["direct_cpu_per_call_ms"] > 0
    assert "| 8 | yes | done |" in proc.stdout


def test_an_unknown_airline_task_is_refused_in_one_line() -> None:
    airline_command()
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "taubench.py"), "--domain",
                           "airline", "--tasks", "50"], capture_output=True, text=True,
                          timeout=120, cwd=str(ROOT))
    assert proc.returncode == 2
    assert "no task '50' in the airline domain (ids are 0 to 49)" in proc.stderr


def test_fsm_verify_airline_proves_its_invariants() -> None:
    airline_command()
    proc = subprocess.run([sys.executable, "-m", "fsm", "verify", "airline"],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "18 invariants: 18 proved, 0 violated." in proc.stdout


def test_without_the_server_the_workflow_says_how_to_install_it(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "FSM_AIRLINE_MCP": str(tmp_path / "missing")}
    proc = subprocess.run([sys.executable, "-m", "fsm", "verify", "airline"],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT), env=env)
    assert proc.returncode != 0
    assert "the airline MCP server is not installed" in proc.stderr
    assert "run `make airline-mcp`" in proc.stderr
