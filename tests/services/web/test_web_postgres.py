"""The approval inbox on PostgreSQL: the same pages, accounts and outbox as on SQLite.

``fsm serve --db postgresql://...`` in its own process, real HTTP on loopback: an
approver signs in, finds the waiting large refund, approves it, and the refund is paid
once; the pause wrote its notification row in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from web_server import decision_form, launch, login, stopped

from fsm import Engine, open_store
from fsm.web.accounts import add_account
from workflows.refund import build, clerk
from workflows.refund.shop import PostgresShop


@pytest.fixture
def served(pg_url: str) -> Iterator[str]:
    """``fsm serve`` on a fresh Postgres schema; yields the inbox's base URL."""
    with open_store(pg_url) as store:
        add_account(store, "priya", "approver", "priya-password", 1_500_000)
    process, url = launch(pg_url)
    try:
        yield url
    finally:
        stopped(process)


def test_an_approval_on_postgres_pays_once(pg_url: str, served: str) -> None:
    with open_store(pg_url) as store, PostgresShop(pg_url) as shop:
        shop.seed_demo()
        run = Engine(build(shop), store, clerk).start(
            "Order A-1002: the headphones stopped working", user="ravi", run_id="pg-big",
            meta={"workflow_ref": "refund", "policy": "default"})
        assert run.status == "awaiting_approval" and run.pending is not None
        aid = run.pending.approval_id
        assert aid is not None
        (note,) = store.notifications(approval_ids=[aid])
        assert (note.kind, note.run_id) == ("waiting", "pg-big")
        with httpx.Client(base_url=served, timeout=30) as c:
            login(c, "priya", "priya-password")
            inbox = c.get("/inbox")
            assert "refund ₹1,800 for the noise-cancelling headphones of order A-1002" \
                in inbox.text
            form = decision_form(c, aid)
            done = c.post(f"/approvals/{aid}/decide",
                          data={**form, "action": "approve", "note": "receipt checked"})
            assert done.status_code == 303, done.text
        assert store.load_run("pg-big").status == "done"
        assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [
            ("A-1002", 180_000)]
        (approval,) = store.approvals("pg-big", pending_only=False)
        assert (approval.decision, approval.reviewer) == ("approved", "priya")
