"""The benchmarks run in quick mode and report every figure (timings are not asserted):
``bench/steps.py``, the fsm side of ``bench/peers.py`` with its pure parts on synthetic
figures (the peers' environments are never installed here), and ``bench/imports.py``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT, bench_script


def test_the_quick_benchmark_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "steps.py"), "--quick", "--sizes", "10,20",
         "--long-steps", "150", "--json-out", str(out), "--dir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120, cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert json.loads(proc.stdout[proc.stdout.index("\n{") + 1:]) == result
    assert "ms/step" in proc.stdout and "resume to next policy call" in proc.stdout
    assert "==> CPU per step is" in proc.stdout and "the audited floor's" in proc.stdout
    assert result["synchronous"] == "FULL"
    assert set(result["steps"]) == {"10", "20"}
    for row in result["steps"].values():
        for key in ("ms_per_step", "ms_per_step_median", "ms_per_step_incl_setup",
                    "bytes_per_step", "floor_ms_per_step", "floor_ms_per_step_median",
                    "ratio_to_floor", "disk_commit_ms", "cpu_ms_per_step_median",
                    "cpu_floor_ms_per_step_median", "cpu_ratio_to_floor",
                    "cpu_audited_floor_ms_per_step_median", "cpu_ratio_to_audited_floor"):
            assert isinstance(row[key], float) and row[key] > 0, (key, row)
    assert result["long_run"]["steps"] == 150 and result["long_run"]["bytes"] > 0
    for key in ("resume_ms", "show_ms", "show_first_ms", "per_step_spread", "bytes_spread",
                "cpu_per_step_spread", "cpu_ratio_to_floor", "cpu_ratio_to_audited_floor"):
        assert isinstance(result[key], float) and result[key] > 0, key
    assert set(result["targets_met"]) == {
        "per_step_within_2x_floor", "cpu_per_step_within_2x_floor", "per_step_flat",
        "bytes_per_step_flat", "resume_within_100ms", "show_within_50ms"}
    assert (tmp_path / "work" / "long.db").exists()


def test_the_audited_floor_writes_a_log_the_audit_accepts(tmp_path: Path) -> None:
    """The audited floor does the encoding and hashing fsm's store does, no less: its
    rows are the run's transcript and snapshot, and ``fsm audit`` finds its log intact."""
    from fsm import SQLiteStore
    from fsm.auditor.audit import audit
    from fsm.store.schema import MIGRATIONS

    steps = bench_script("steps")
    with SQLiteStore(str(tmp_path / "fsm.db"), synchronous="OFF") as store:
        steps.drive(store, 12)
    steps.floor(tmp_path / "fsm.db", tmp_path / "audited.db", "OFF", encode=True)
    db = sqlite3.connect(tmp_path / "audited.db")
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")  # the floor writes no version
    db.commit()
    db.close()
    with SQLiteStore(str(tmp_path / "fsm.db")) as ours, \
            SQLiteStore(str(tmp_path / "audited.db")) as floor:
        report = audit(floor, steps.RUN)
        assert report.ok, report.problems
        assert len(floor.events(steps.RUN)) == len(ours.events(steps.RUN)) > 24
        assert floor.messages(steps.RUN) == ours.messages(steps.RUN)
        assert floor.snapshot_text(steps.RUN) == ours.snapshot_text(steps.RUN)


# -- bench/peers.py: the fsm side for real, the peers' pure parts on synthetic figures ---------

def test_the_peer_harness_measures_fsm_without_installing_anything(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peers.py"), "--systems", "fsm", "--sizes", "5,10",
         "--repeat", "2", "--no-plot", "--json-out", str(out), "--dir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120, cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr
    assert "installing" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("[")]) == 4
    assert "[  1/4] fsm       N=5     repetition 1/2" in proc.stderr
    result = json.loads(out.read_text())
    assert result["synchronous"] == "FULL" and set(result["systems"]) == {"fsm"}
    for n in ("5", "10"):
        row = result["systems"]["fsm"][n]
        assert row["samples"] == 2 and row["bytes"] > 0 and row["ms_per_round"] > 0
        assert row["ms_ratio_to_fsm"] == 1.0 and row["bytes_ratio_to_fsm"] == 1.0
    assert "| 10 | fsm |" in proc.stdout
    assert list((tmp_path / "work").iterdir()) == []  # every database removed


@pytest.mark.parametrize(("argv", "fragment"), [
    pytest.param(["--systems", "fsm,crewai"],
                 "unknown system(s) 'crewai' for --systems (allowed: fsm, langgraph, burr)",
                 id="unknown-system"),
    pytest.param(["--sizes", "10,ten"],
                 "--sizes takes comma-separated whole numbers of at least 2, not '10,ten'",
                 id="bad-size"),
    pytest.param(["--repeat", "0"], "--repeat must be at least 1, not 0", id="bad-repeat"),
    pytest.param(["--synchronous", "extra"],
                 "--synchronous must be OFF, NORMAL or FULL, not 'EXTRA'", id="bad-sync"),
])
def test_bad_peer_arguments_give_one_error_line(argv: list[str], fragment: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    peers = bench_script("peers")
    assert peers.main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: {fragment}\n"


def _synthetic() -> dict[str, dict[str, list[dict[str, Any]]]]:
    def sample(ms: float, size: int) -> dict[str, Any]:
        return {"ms_per_round": ms, "ms_per_round_median": ms * 0.9,
                "ms_per_round_incl_setup": ms * 1.1, "bytes": size, "sqlite": "3"}
    return {
        "fsm": {"10": [sample(1.0, 40_000), sample(3.0, 40_000)], "100": [sample(1.0, 100_000)]},
        "langgraph": {"10": [sample(4.0, 60_000)], "100": [sample(5.0, 1_000_000)]},
        "burr": {"10": [sample(2.0, 20_000)], "100": [sample(8.0, 2_500_000)]},
    }


def test_summary_table_and_plot_series_from_synthetic_figures() -> None:
    peers = bench_script("peers")
    result = peers.summarise(_synthetic(), "FULL", "3.40.1")
    fsm10 = result["systems"]["fsm"]["10"]
    assert fsm10["ms_per_round"] == 2.0 and fsm10["samples"] == 2  # the median of 1 and 3
    assert result["systems"]["burr"]["100"]["ms_ratio_to_fsm"] == 8.0
    assert result["systems"]["langgraph"]["100"]["bytes_ratio_to_fsm"] == 10.0
    lines = peers.table(result).splitlines()
    assert lines[4:] == [
        "| 10 | fsm | 2.00 | 1.80 | 1.0× | 40,000 | 4,000 | 1.0× |",
        "| 10 | LangGraph | 4.00 | 3.60 | 2.0× | 60,000 | 6,000 | 1.5× |",
        "| 10 | Burr | 2.00 | 1.80 | 1.0× | 20,000 | 2,000 | 0.5× |",
        "| 100 | fsm | 1.00 | 0.90 | 1.0× | 100,000 | 1,000 | 1.0× |",
        "| 100 | LangGraph | 5.00 | 4.50 | 5.0× | 1,000,000 | 10,000 | 10.0× |",
        "| 100 | Burr | 8.00 | 7.20 | 8.0× | 2,500,000 | 25,000 | 25.0× |",
    ]
    assert peers.series(result) == {
        "fsm": {"n": [10.0, 100.0], "ms_per_round": [2.0, 1.0], "bytes": [40_000.0, 100_000.0]},
        "LangGraph": {"n": [10.0, 100.0], "ms_per_round": [4.0, 5.0],
                      "bytes": [60_000.0, 1_000_000.0]},
        "Burr": {"n": [10.0, 100.0], "ms_per_round": [2.0, 8.0],
                 "bytes": [20_000.0, 2_500_000.0]},
    }


def test_each_peer_runs_in_its_own_environment_and_fsm_in_this_one() -> None:
    peers = bench_script("peers")
    assert peers.interpreter(peers.SYSTEMS["fsm"]) == Path(sys.executable)
    for name in ("langgraph", "burr"):
        system = peers.SYSTEMS[name]
        assert system.pins and all("==" in pin for pin in system.pins)
        assert (ROOT / "bench" / system.script).exists()
    assert "/bench/.peers/" in (ROOT / ".gitignore").read_text().splitlines()


# -- start-up: what ``import fsm.cli`` loads ------------------------------------------------------

def test_the_cli_imports_neither_the_runtime_nor_its_heavy_dependencies() -> None:
    code = ("import sys, fsm.cli; print('\\n'.join(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('pydantic', 'rich', 'graphviz', 'openai', 'transitions') "
            "or m.startswith(('fsm.runtime', 'fsm.agent', 'fsm.store', 'fsm.auditor')))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=str(ROOT))
    assert proc.stdout.strip() == ""


def test_the_cli_help_names_every_diagram_format_of_the_renderer() -> None:
    from fsm.auditor.render import FORMATS
    from fsm.cli import auditor

    assert auditor.FORMATS == FORMATS


def test_the_start_up_benchmark_reports_its_figures() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "imports.py"), "--repeat", "1",
                           "--top", "3", "--json"], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert set(result["ms"]) == {"python -c pass", "import typer", "import fsm.cli",
                                 "fsm --help"}
    assert all(t["best"] > 0 for t in result["ms"].values())
    assert len(result["slowest_imports_ms"]) == 3 and result["importtime_fsm_cli_ms"] > 0
    assert isinstance(result["help_within_target"], bool)
