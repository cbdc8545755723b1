"""``bench/prune.py`` in quick mode builds its database by copying real runs and reports
every figure (timings are printed, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import ROOT


def test_the_prune_benchmark_reports_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "prune.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "prune.py"), "--runs", "400",
                           "--batch", "100", "--quick", "--json-out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(out.read_text())
    assert result["store"] == "sqlite" and result["runs"] == 408   # 8 templates, 50 copies
    # Seven templates in eight finish; one copy in ten is recent: those are kept.
    assert 0 < result["pruned"] < result["runs"] and result["batches"] >= 3
    assert result["used_after"] < result["used_before"]
    assert result["bytes_after_vacuum"] < result["bytes_before"]
    for key in ("seconds", "bytes_per_run", "worker_longest_wait_s", "baseline_seconds"):
        assert isinstance(result[key], float) and result[key] > 0, key
    assert "bytes per pruned run" in proc.stdout and "baseline, one transaction" in proc.stdout
