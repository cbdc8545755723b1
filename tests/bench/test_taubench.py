"""``bench/taubench.py`` on a quick subset of τ²-bench's retail tasks: every task matched,
every generated violation refused with the database unchanged and the refusal in the log,
and every figure reported (timings printed, never asserted). The whole benchmark runs in
CI (``make taubench``, called by ``.ci/run``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT, bench_script

from workflows.retail import build, data
from workflows.retail.runner import Bench
from workflows.retail.violations import CLASSES, attempts
from workflows.retail.workflow import TOOLS_BY_STATE


def _quick(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    out = tmp_path / "taubench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "taubench.py"), "--json-out", str(out),
         "--markdown-out", str(tmp_path / "taubench.md"), *extra],
        capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    return proc, json.loads(out.read_text())


def test_the_quick_benchmark_matches_every_task_and_refuses_every_violation(
        tmp_path: Path) -> None:
    proc, result = _quick(tmp_path, "--quick")
    s = result["summary"]
    assert s["tasks"] == s["matched"] == len(bench_script("taubench").QUICK)
    assert [r["task"] for r in result["tasks"]] == list(bench_script("taubench").QUICK)
    for cls, c in s["violations"].items():
        assert c["tasks"] > 0, cls
        assert c["attempts"] == c["refused"] > 0, (cls, c)
        assert c["database_unchanged"] == c["refusal_in_log"] == c["tasks"], (cls, c)
    # τ²-bench's own check lets an agent skip authentication and confirmations.
    assert s["violations"]["skip_authentication"]["tau2"] == {"not caught": 7}
    assert s["violations"]["write_without_yes"]["tau2"] == {"not caught": 7}
    [forbidden] = s["forbidden_reference_actions"]
    assert (forbidden["task"], forbidden["action"]) == ("64", "64_6")
    assert "only a delivered order may be returned or exchanged" in forbidden["reason"]
    assert s["tau2_expected_differs"] == ["21"] and s["tau2_upstream_mode_differs"] == []
    rows = {r["task"]: r for r in result["tasks"]}
    assert rows["105"]["inserted"] == {"authentication": 1, "read before write": 1}
    assert rows["26"]["status"] == "handed_over"
    for figure in ("cpu_ms_per_step", "baseline_cpu_ms_per_call", "ms_per_task_median",
                   "bytes_per_task_median", "bytes_per_step"):
        assert s[figure] > 0, figure
    assert all(r["steps"] > 0 and r["bytes"] > 0 for r in result["tasks"])
    text = (tmp_path / "taubench.md").read_text()
    assert text == proc.stdout.rstrip("\n") + "\n"
    assert "**8 of 8 tasks matched**" in text and "| task | matched | steps |" in text
    assert all(CLASSES[c] in text for c in CLASSES)


def test_the_benchmark_runs_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    _, result = _quick(tmp_path, "--tasks", "0,16", "--database", pg_url)
    s = result["summary"]
    assert result["location"] == "postgresql" and s["tasks"] == s["matched"] == 2
    assert all(c["attempts"] == c["refused"] for c in s["violations"].values())


def test_a_retail_database_locked_too_long_stops_the_benchmark_in_one_line(
        pg_url: str, tmp_path: Path) -> None:
    """Another session holds the retail tables' lock while the benchmark would create
    them: it gives up after FSM_PG_LOCK_TIMEOUT and says what it waited for."""
    import os

    import psycopg

    from workflows.retail.sql import PG_LOCK

    out = tmp_path / "taubench.json"
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (PG_LOCK,))
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "taubench.py"), "--tasks", "0",
             "--database", pg_url, "--json-out", str(out)],
            capture_output=True, text=True, timeout=120, cwd=str(ROOT),
            env={**os.environ, "FSM_PG_LOCK_TIMEOUT": "0.5"})
        made = holder.execute("SELECT to_regclass('retail_meta')").fetchone()
    assert proc.returncode == 1 and proc.stdout == "" and not out.exists(), proc
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: retail database postgresql://") and line.endswith(
        ": cannot open the tables: waited 0.5s for a lock another session holds "
        "(lock_timeout); find the holder in pg_locks (canceling statement due to lock "
        "timeout); try again"), line
    assert made == (None,)  # nothing of the retail tables was made


def test_a_desk_that_lets_writes_through_is_reported(tmp_path: Path) -> None:
    """The benchmark's checks can fail: with cancel_pending_order callable in serving and
    bound to no yes, writing without the customer's yes is reported as not refused and the
    database as changed."""
    import dataclasses

    weak_tools = [dataclasses.replace(t, confirmed_by=None) for t in build().tools.values()]
    weak = build(tools=weak_tools, tools_by_state={
        **TOOLS_BY_STATE, "serving": [*TOOLS_BY_STATE["serving"], "cancel_pending_order"]})
    task = next(t for t in data.tasks() if t["id"] == "16")  # its first write is a cancel
    [attempt] = attempts(task, ["write_without_yes"])
    with Bench(str(tmp_path / "weak.db"), spec=weak) as bench:
        row = bench_script("taubench").violation(bench, attempt)
    assert row["refused"] < row["attempts"] and not row["database_unchanged"]
    assert not row["moves"][0]["refused"]


@pytest.mark.parametrize("cls", list(CLASSES))
def test_each_class_applies_to_some_quick_task(cls: str) -> None:
    generated = [a for t in data.tasks() if t["id"] in bench_script("taubench").QUICK
                 for a in attempts(t, [cls])]
    assert any(a.not_applicable is None and a.violating for a in generated), cls


def test_ci_runs_the_whole_benchmark_once() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    loop_end = ci.index("\ndone\n")
    assert ci.index("\nmake taubench") > loop_end  # after the per-Python loop: once
    target = (ROOT / "Makefile").read_text().split("\ntaubench:", 1)[1].split("\n\n", 1)[0]
    desk, over_mcp, airline = [line for line in target.splitlines()
                               if "bench/taubench.py" in line]
    assert "--quick" not in desk and "--tasks" not in desk and "--tools" not in desk
    # Over the MCP server CI runs the quick tasks; make bench runs all of them.
    assert "--tools mcp --quick" in over_mcp
    # The airline desk: whole in make taubench, its quick form in CI.
    assert "--domain airline $(TAUBENCH_AIRLINE)" in airline
    assert "make taubench TAUBENCH_AIRLINE=--quick" in ci
    bench = (ROOT / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "bench/taubench.py --tools mcp --markdown-out" in bench
    assert "bench/taubench.py --domain airline --markdown-out" in bench


def test_unknown_task_ids_are_refused_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "taubench.py"), "--tasks",
                           "0,abc,999"], capture_output=True, text=True, timeout=60,
                          cwd=str(ROOT))
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.splitlines()[-1] == ("taubench.py: error: --tasks: no task 'abc', "
                                            "'999' in the retail domain (ids are 0 to 113)")


def test_a_task_that_stops_matching_fails_the_benchmark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``make taubench`` in CI fails when a task no longer reaches its expected database,
    not only when a violation gets through."""
    bench = bench_script("taubench")
    real = bench.run

    def one_unmatched(*args: Any, **kwargs: Any) -> dict[str, Any]:
        result = real(*args, **kwargs)
        result["tasks"][0]["matched"] = False
        return result

    monkeypatch.setattr(bench, "run", one_unmatched)
    assert bench.main(["--tasks", "0,16"]) == 1
    assert bench.main(["--tasks", "0"]) == 1
    monkeypatch.setattr(bench, "run", real)
    assert bench.main(["--tasks", "0"]) == 0


def test_the_breakdown_says_where_a_steps_cpu_goes(tmp_path: Path) -> None:
    """``--breakdown`` replays the same tasks with every statement timed: the steps are the
    benchmark's own, every step commits the store at least once, and the parts add up."""
    proc, result = _quick(tmp_path, "--tasks", "0,26", "--breakdown")
    b, s = result["breakdown"], result["summary"]
    assert b["steps"] == s["steps"] > 0
    assert b["store_commits_per_step"] >= 1
    assert 0 < b["commit_ms_per_step"] <= b["sql_ms_per_step"] < b["cpu_ms_per_step"]
    assert b["python_ms_per_step"] == pytest.approx(
        b["cpu_ms_per_step"] - b["sql_ms_per_step"], abs=0.002)
    kinds = {k["kind"]: k for k in b["kinds"]}
    assert kinds["fsm: COMMIT"]["per_step"] == b["store_commits_per_step"]
    for statement in ("fsm: INSERT INTO events", "fsm: INSERT INTO messages",
                      "fsm: UPDATE runs", "retail: SELECT … FROM retail_orders"):
        assert kinds[statement]["per_step"] > 0, statement
    assert "### Where a step's CPU goes" in proc.stdout
    assert f"Over {b['steps']} steps" in (tmp_path / "taubench.md").read_text()


@pytest.mark.parametrize("sql, kind", [
    ("SELECT body FROM messages WHERE run_id = ?", "SELECT … FROM messages"),
    ("select a,\n b from runs", "SELECT … FROM runs"),
    ("INSERT INTO events (a) VALUES (?)", "INSERT INTO events"),
    ("UPDATE runs SET x = 1", "UPDATE runs"),
    ("DELETE FROM effects WHERE 1", "DELETE FROM effects"),
    ("BEGIN IMMEDIATE", "BEGIN IMMEDIATE"),
    ("COMMIT", "COMMIT"),
    ("PRAGMA user_version", "PRAGMA"),
    ("WITH x AS (SELECT 1) SELECT * FROM x", "WITH"),
])
def test_a_statement_is_timed_under_its_kind(sql: str, kind: str) -> None:
    assert bench_script("taubench_breakdown").kind(sql) == kind


def test_the_breakdown_takes_only_the_desks_own_sqlite(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "taubench.py"), "--breakdown", "--tools", "mcp"],
        capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == (
        "taubench.py: error: --breakdown times the desk's own SQLite statements: it takes "
        "none of --model, --database, --tools mcp")
