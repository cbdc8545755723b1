"""The retail leaderboard file through the retail desk in shadow (``make shadow``'s run),
checked against the reviewed classification in ``bench/shadow_review.md``.

The file is read, never written, from ``../shared/trajectories/`` beside the repository
(see its README); without it this test fails and says where to put it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from airline_env import airline_command
from paths import ROOT
from shadowkit import TRAJECTORIES, assert_meets_the_targets, reviewed

from fsm.sandbox.shadow import replay_recorded
from fsm.sandbox.shadow_read import read_file
from workflows.airline.workflow import SERVER_ENV
from workflows.retail import SHADOW, build

RETAIL = TRAJECTORIES / "retail-gpt-4.1-mini.json"


def test_the_retail_file_replays_whole_and_every_refusal_in_a_pass_is_reviewed() -> None:
    assert RETAIL.is_file(), (
        f"{RETAIL} is missing: it is τ²-bench's retail leaderboard file (see "
        "../shared/trajectories/README.md); put it there, read-only, to run this test")
    outcomes = replay_recorded(build(), read_file(RETAIL), SHADOW)
    assert_meets_the_targets(outcomes, 114, 96, reviewed())


def test_make_shadow_runs_each_file_whose_desk_exists_and_skips_the_others(
        tmp_path: Path) -> None:
    folder = tmp_path / "trajectories"
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "sandbox" / "shadow_data" / "tau2_results.json", folder)
    for domain in ("airline", "telecom"):
        (folder / f"{domain}-x.json").write_text(json.dumps(
            {"info": {"environment_info": {"domain_name": domain}}, "tasks": [],
             "simulations": []}))
    out, figures = tmp_path / "shadow.md", tmp_path / "shadow.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "shadow.py"), "--dir", str(folder),
         "--markdown-out", str(out), "--json-out", str(figures)],
        capture_output=True, text=True, timeout=300, cwd=str(ROOT),
        env={**os.environ, SERVER_ENV: airline_command()})
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "## Desk `retail`" in text and "### `tau2_results.json`" in text
    assert "| passed | 1 | 1 | 0 | 0 | 2 |" in text and "| failed | 1 | 0 | 0 | 0 | 1 |" in text
    assert "## Desk `airline`" in text and "### `airline-x.json`" in text
    assert "- `telecom-x.json` (domain telecom: no desk yet)" in text
    assert "airline-x.json" not in text.split("## Skipped")[1]
    report = json.loads(figures.read_text())
    assert report["retail"]["summary"]["verdicts"] == {
        "admitted": 2, "refused": 1, "unmappable": 0, "unreadable": 0}
    assert report["airline"]["summary"]["verdicts"] == {
        "admitted": 0, "refused": 0, "unmappable": 0, "unreadable": 0}
