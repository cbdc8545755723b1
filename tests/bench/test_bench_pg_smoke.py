"""``bench/pg_steps.py`` runs against the test server and reports every figure
(timings are printed, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
from paths import ROOT


def test_the_postgres_step_benchmark_reports_every_figure(pg_server: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pg_steps.py"), "--db", pg_server, "--steps", "20",
         "--json-out", str(out)], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert "x the floor (target <= 2x)" in proc.stdout
    assert result["steps"] == 20 and result["pool_size"] == 4
    assert int(result["postgres"].split(".")[0]) >= 15
    for part in ("framework", "floor"):
        assert all(v > 0 for v in result[part].values())
    assert result["ratio_to_floor"] > 0 and result["machine"]["cpus"] >= 1
    with psycopg.connect(pg_server) as conn:  # its own database, dropped afterwards
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'fsm_bench_%'")
        assert left.fetchone() == (0,)


def test_the_driver_benchmark_measures_each_way_to_the_server(pg_server: str,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "drivers.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pg_drivers.py"), "--db", pg_server,
         "--tasks", "20", "--steps", "3", "--nap", "0.01", "--json-out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["way"] for r in rows] == ["threads", "async", "bridged"]
    assert all(r["steps"] == 60 and r["cpu_ms_per_step"] > 0 for r in rows)
    assert all(0 <= r["kernel_share"] <= 1 for r in rows)
    assert [line.split()[0] for line in proc.stdout.splitlines()] == ["threads", "async",
                                                                       "bridged"]
