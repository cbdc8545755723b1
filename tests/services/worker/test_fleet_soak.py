"""A bounded kill soak: worker processes SIGKILLed at random while refunds run.

The long version is ``bench/fleet.py``; this one keeps ``make test`` short.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.refund.fleet import Soak, submit_refunds


@pytest.mark.parametrize("kind", ["threads", "async", "async-loop"])
def test_refunds_survive_workers_killed_at_random(pg_url: str, tmp_path: Path,
                                                  kind: str) -> None:
    orders = submit_refunds(pg_url, 30)
    soak = Soak(pg_url, tmp_path, workers=3, concurrency=4, lease_seconds=2.0, sleep=0.2,
                say=lambda line: None, evented=kind == "async", on_loop=kind == "async-loop")
    report = soak.run(orders, kill_for=8.0, kill_every=(0.7, 1.5), timeout=120)
    print("\n".join(report.lines()))
    starts = [line for log in soak.log_of.values() for line in log.read_text().splitlines()
              if "started (async" in line]
    assert all(("steps on the loop" in line) == (kind == "async-loop") for line in starts)
    assert bool(starts) == (kind != "threads")
    assert report.problems == []
    assert report.kills >= 3
    assert report.takeovers >= 1  # a killed worker's runs were finished by others
    assert report.runs == 30 and report.audits_clean == 30
    assert report.statuses == {"done": 30}  # the supervisor approves every large refund
    assert report.payments == 30
