"""The inbox after a deploy: ``fsm serve`` running release 2 shows each waiting run's
version and decides a run of version 1 on version 1, over real HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import deploykit
import pytest
from web_server import Inbox, decision_form, make_inbox

from fsm import Engine, SQLiteStore
from workflows.refund import Shop, clerk

SUPPORT = str(Path(deploykit.__file__).resolve().parent)


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[Inbox]:
    box = make_inbox(tmp_path)
    yield box
    box.stop()


def start(inbox: Inbox, spec_of: str, order: str, customer: str, run_id: str) -> None:
    """Start a run the way ``fsm run deploykit:WORKFLOW`` does under release ``spec_of``."""
    shop, store = Shop(str(inbox.db)), SQLiteStore(str(inbox.db))
    try:
        Engine(deploykit.release(spec_of, shop), store, clerk).start(
            f"Order {order}: it stopped working", user=customer, run_id=run_id,
            meta={"workflow_ref": "deploykit:WORKFLOW", "policy": "default"})
    finally:
        store.close()
        shop.close()


def test_the_inbox_shows_versions_and_decides_an_old_run_on_its_version(inbox: Inbox) -> None:
    start(inbox, "1", "B-2002", "meena", "old")
    start(inbox, "2", "B-2001", "ravi", "new")
    inbox.serve(DEPLOY_RELEASE="2", PYTHONPATH=SUPPORT)
    with inbox.client("priya") as c:
        page = c.get("/inbox").text
        versions = dict(re.findall(r'data-run="(\w+)".*?class="workflow-version">([^<]*)<',
                                   page, re.S))
        assert versions == {"old": "1", "new": "2"}
        aid = inbox.approval_id("old")
        detail = c.get(f"/approvals/{aid}").text
        assert 'class="workflow-version">1<' in detail
        done = c.post(f"/approvals/{aid}/decide",
                      data={**decision_form(c, aid), "action": "approve", "note": "checked"})
        assert done.status_code == 303, done.text
        run_page = c.get("/runs/old").text
        assert 'class="workflow-version">1<' in run_page
    run = inbox.run("old")
    assert (run.status, run.definition_hash) == ("done", deploykit.v1().definition_hash)
    assert inbox.payments("old") == [("B-2002", 900_000)]
    assert inbox.run("new").status == "awaiting_approval"
