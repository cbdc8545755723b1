"""Release limits fail closed, over real HTTP: a request whose amount the limit cannot
read is beyond every limit. The newcomer's desk (tests/support/newcomer_desk.py) asks a
supervisor to release a $270 charge; a $1.00 approver cannot release it, nor a request
whose amount the workflow does not read."""

from __future__ import annotations

import html
import os
from pathlib import Path

from newcomer_desk import MISREAD, WORKFLOW, clerk
from paths import SUPPORT
from web_server import alert, decision_form, login, make_inbox

from fsm import Engine, SQLiteStore
from fsm.web.accounts import add_account

#: A supervisor whose release limit is $1.00 (100 cents).
NADIA = ("nadia", "nadia-password")


def started(db: Path, spec: object, ref: str, run_id: str) -> str:
    store = SQLiteStore(str(db))
    try:
        run = Engine(spec, store, clerk).start(  # type: ignore[arg-type]
            "please charge my order", user="nia", run_id=run_id,
            meta={"workflow_ref": ref, "policy": "newcomer_desk:clerk"})
        if run_id == "n1":
            add_account(store, NADIA[0], "approver", NADIA[1], 100)
    finally:
        store.close()
    assert run.status == "awaiting_approval" and run.pending is not None
    assert run.pending.approval_id is not None
    return run.pending.approval_id


def test_a_one_dollar_approver_cannot_release_270_dollars_nor_an_unread_amount(
        tmp_path: Path) -> None:
    box = make_inbox(tmp_path)
    charge = started(box.db, WORKFLOW, "newcomer_desk:WORKFLOW", "n1")
    unread = started(box.db, MISREAD, "newcomer_desk:MISREAD", "n2")
    path = os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])
    box.serve(PYTHONPATH=path)
    try:
        with box.client() as c:
            login(c, *NADIA)
            page = html.unescape(c.get(f"/approvals/{charge}").text)
            assert "$270.00 is above your release limit of $1.00" in page
            form = {**decision_form(c, charge), "action": "approve", "note": "fine"}
            refused = c.post(f"/approvals/{charge}/decide", data=form)
            assert refused.status_code == 403
            assert alert(refused).startswith("$270.00 is above your release limit of $1.00")
            page = html.unescape(c.get(f"/approvals/{unread}").text)
            assert "shows no amount that your release limit of $1.00 could be compared " \
                   "with" in page
            form = {**decision_form(c, unread), "action": "approve", "note": "fine"}
            refused = c.post(f"/approvals/{unread}/decide", data=form)
            assert refused.status_code == 403
            assert "ask an approver without a release limit" in alert(refused)
        with box.client("sam") as c:                          # no release limit
            form = {**decision_form(c, unread), "action": "approve", "note": "checked"}
            assert c.post(f"/approvals/{unread}/decide", data=form).status_code == 303
    finally:
        box.stop()
    assert box.run("n1").status == "awaiting_approval"
    assert box.decisions("n1") == []
    assert box.decisions("n2") == [("approved", "sam", "checked")]
    assert [r[:3] for r in box.refusals("n1")] == [("nadia", "approve", "limit")]
    assert [r[:3] for r in box.refusals("n2")] == [("nadia", "approve", "limit")]
