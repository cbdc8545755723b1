"""``bench/steps.py --quick`` runs and reports every figure (timings are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    assert result["synchronous"] == "FULL"
    assert set(result["steps"]) == {"10", "20"}
    for row in result["steps"].values():
        for key in ("ms_per_step", "ms_per_step_median", "ms_per_step_incl_setup",
                    "bytes_per_step", "floor_ms_per_step", "floor_ms_per_step_median",
                    "ratio_to_floor", "disk_commit_ms", "cpu_ms_per_step_median",
                    "cpu_floor_ms_per_step_median"):
            assert isinstance(row[key], float) and row[key] > 0, (key, row)
    assert result["long_run"]["steps"] == 150 and result["long_run"]["bytes"] > 0
    for key in ("resume_ms", "show_ms", "show_first_ms", "per_step_spread", "bytes_spread",
                "cpu_per_step_spread"):
        assert isinstance(result[key], float) and result[key] > 0, key
    assert set(result["targets_met"]) == {
        "per_step_within_2x_floor", "per_step_flat", "bytes_per_step_flat",
        "resume_within_100ms", "show_within_50ms"}
    assert (tmp_path / "work" / "long.db").exists()
