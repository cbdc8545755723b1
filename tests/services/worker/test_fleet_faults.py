"""A short fault soak: three real ``fsm worker`` processes drive refunds while their
PostgreSQL server (one of this test's own) is restarted, every fsm session (the
workers', the shop gateway's, the approver's) is terminated, and workers are
SIGKILLed. At the end every run is finished, none failed, each order was paid once at
the decided amount, and every log audits clean.

The long version is ``bench/faults.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.refund.faults import Faults, restartable_postgres
from workflows.refund.fleet import Soak, submit_refunds


@pytest.mark.parametrize("kind", ["threads", "async", "async-loop"])
def test_refunds_survive_database_restarts_terminated_sessions_and_kills(
        tmp_path: Path, kind: str) -> None:
    lines: list[str] = []
    with restartable_postgres() as server:
        orders = submit_refunds(server.url, 24)
        soak = Soak(server.url, tmp_path, workers=3, concurrency=4, lease_seconds=2.0,
                    sleep=0.02, say=lines.append, evented=kind == "async",
                    on_loop=kind == "async-loop")
        # Short waits for a connection, so that a restart fails the steps it meets (they
        # are tried again), and a bound for tries in a row that a slow restart keeps.
        soak.env.update(FSM_RETRY_SECONDS="0.2", FSM_RETRY_MAX_SECONDS="2",
                        FSM_PG_CONNECT_TIMEOUT="1", FSM_RETRIES="10")
        faults = Faults(server, until=10.0, every=(0.7, 1.4),
                        plan=["restart", "terminate", "terminate-shop", "restart",
                              "terminate"])
        # The runs go in six waves, the next after each fault, the last after two kills
        # too: the faults and the kills meet runs in flight however fast or slow the
        # machine is.
        report = soak.run(orders, kill_for=9.0, kill_every=(1.5, 2.5), timeout=100,
                          faults=faults, waves=6, kills=2)
    print("\n".join(lines + report.lines()))
    logs = [log.read_text().splitlines() for log in soak.log_of.values()]
    starts = [line for log in logs for line in log if "started (async" in line]
    assert bool(starts) == (kind != "threads")
    if kind == "async-loop":
        # A worker whose async pool does not open in time (it starts during a restart,
        # or on a loaded machine: FSM_PG_CONNECT_TIMEOUT is 1s here) says so and runs its
        # steps in the threads; every other one runs them on the loop.
        for log in logs:
            for i, line in enumerate(log):
                if "started (async" in line and "steps on the loop" not in line:
                    assert "steps in the threads" in line, line
                    said = "cannot open the store's async driver, the steps run in the threads"
                    assert any(said in before for before in log[:i]), log[:i + 1]
    else:
        assert not any("steps on the loop" in line for line in starts), starts
    assert report.problems == []
    assert report.faults.get("restart", 0) >= 1, report.faults
    assert report.faults.get("terminate", 0) + report.faults.get("terminate-shop", 0) >= 2
    assert sum(report.faults.values()) >= 5 and report.sessions_ended > 0
    assert report.kills >= 2
    assert report.runs == 24 and report.audits_clean == 24
    assert report.statuses == {"done": 24}  # none failed, none given up on
    assert report.payments == 24
