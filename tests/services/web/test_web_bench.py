"""``bench/inbox.py`` on a small database reports every figure (timings are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import ROOT


def test_the_inbox_benchmark_reports_every_page(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "inbox.py"), "--waiting", "60", "--finished",
         "120", "--requests", "5", "--db", str(tmp_path / "inbox.db"), "--json-out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert (result["waiting"], result["finished"]) == (60, 120)
    for key in ("inbox_first_page", "inbox_deep_page", "inbox_filtered", "approval_page",
                "approval_page_diagram_uncached", "runs_list", "run_page"):
        row = result[key]
        assert row["n"] >= 5 and 0 < row["p50_ms"] <= row["p95_ms"] <= row["max_ms"], (key, row)
    assert set(result["targets_met"]) == {"inbox_p95_within_100ms",
                                          "approval_page_p95_within_100ms"}
    assert "inbox, first page" in proc.stdout and "approval page" in proc.stdout
