"""The refund demo's approver (``python -m workflows.refund approver``), the fleet's
supervisor, outlives its database as a worker does: started while the database cannot be
reached, and cut off from it while it runs, it says so, tries again with backoff, and
approves what waits once the database is back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetkit import wait_for
from pgproxy import PgProxy

from fsm import Engine, open_store
from workflows.refund import build
from workflows.refund.clerk import clerk
from workflows.refund.shop import PostgresShop


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PostgresShop(pg_url) as shop:
        shop.seed_demo()
    p = PgProxy(pg_url)
    yield p
    p.down()


def pause(url: str, run_id: str) -> None:
    with open_store(url) as store, Engine(build(), store, clerk) as engine:
        run = engine.start("Order A-1002: the headphones died", user="ravi", run_id=run_id)
        assert run.status == "awaiting_approval"


def status(url: str, run_id: str) -> str:
    with open_store(url) as store:
        return store.load_run(run_id).status


def test_the_approver_waits_out_a_database_outage_and_approves_after_it(
        proxy: PgProxy, pg_url: str, tmp_path: Path) -> None:
    log = tmp_path / "approver.log"
    proxy.down()  # not reachable when the approver starts
    with open(log, "wb") as out:
        approver = subprocess.Popen(
            [sys.executable, "-m", "workflows.refund", "approver", "--db", proxy.url],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "FSM_DB": proxy.url})
    try:
        wait_for("the approver to say the database is unavailable",
                 lambda: "the database is unavailable" in log.read_text())
        time.sleep(1.0)
        assert approver.poll() is None, log.read_text()
        pause(pg_url, "a1")
        proxy.up()
        wait_for("the first refund to be approved", lambda: status(pg_url, "a1") == "running")
        # Cut off while it runs, for longer than its connection pool waits (10 s), so that
        # its reads fail: it says so and tries again until the database is back.
        proxy.down()
        pause(pg_url, "b1")
        wait_for("the approver to find the database gone", lambda: log.read_text().count(
            "the database is unavailable") >= 2, timeout=30)
        time.sleep(1.0)
        assert approver.poll() is None, log.read_text()
        assert status(pg_url, "b1") == "awaiting_approval"
        proxy.up()
        wait_for("refund b1 to be approved after the outage",
                 lambda: status(pg_url, "b1") == "running")
        approver.send_signal(signal.SIGTERM)
        assert approver.wait(30) == 0
    finally:
        if approver.poll() is None:
            approver.kill()
            approver.wait()
    said = log.read_text()
    assert "Traceback" not in said
    assert said.count("the database is back") == 2
    with open_store(pg_url) as store:
        decided = [a for a in store.approvals(pending_only=False) if a.decision is not None]
    assert sorted((a.run_id, a.decision, a.reviewer) for a in decided) == [
        (r, "approved", "supervisor") for r in ("a1", "b1")]
