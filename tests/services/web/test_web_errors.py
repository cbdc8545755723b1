"""The inbox when it cannot do what it is asked: a run whose recorded policy or workflow
this server cannot import is shown without a decision form and a decision on it is refused
before anything is written, with a page that says why; and every error response (refused,
not found, not allowed, a server error) carries the same security headers as any page."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_server import Inbox, alert, decision_form, make_inbox

from fsm.web.auth import HEADERS
from workflows.refund.clerk import clerk


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    b = make_inbox(tmp_path_factory.mktemp("errors"))
    # Started here with the clerk; recorded as started with what this server cannot import.
    for run_id, meta in (
            ("e-policy", {"workflow_ref": "refund", "policy": "nosuch_module:policy"}),
            ("e-workflow", {"workflow_ref": "nosuch_flows:SPEC", "policy": "default"}),
            ("e-ok", {"workflow_ref": "refund", "policy": "default"})):
        engine, store, shop = b.engine()
        try:
            engine.policy = clerk
            engine.start("Order B-2002: it stopped working", user="meena", run_id=run_id,
                         meta=meta)
        finally:
            store.close()
            shop.close()
    b.log = b.db.parent / "serve.log"
    b.serve()
    yield b
    b.stop()


def secured(response: httpx.Response) -> None:
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (response.status_code, name)


@pytest.mark.parametrize("run_id, why", [
    pytest.param("e-policy", "cannot build the policy run 'e-policy' recorded (cannot import "
                 "'nosuch_module:policy'", id="policy"),
    # The workflow is known by its name here, but the module the run names is not: its
    # default policy (the one it recorded) lives there.
    pytest.param("e-workflow", "cannot build the policy run 'e-workflow' recorded "
                 "(cannot import 'nosuch_flows", id="workflow"),
])
def test_a_run_this_server_cannot_drive_is_shown_without_a_form_and_not_decided(
        box: Inbox, run_id: str, why: str) -> None:
    run = box.run(run_id)
    aid = box.approval_id(run_id)
    with box.client("priya") as c:
        page = c.get(f"/approvals/{aid}")
        assert page.status_code == 200
        secured(page)
        assert f"/approvals/{aid}/decide" not in page.text  # no decision form
        assert "This request cannot be decided here" in page.text and why in alert(page)
        # The fields a form would carry (as from a page of a server that could drive it).
        (args_hash,) = box.query("SELECT args_hash FROM approvals WHERE approval_id = ?", aid)[0]
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)  # the sign-out form's
        assert csrf is not None
        refused = c.post(f"/approvals/{aid}/decide", data={
            "csrf": csrf.group(1), "args_hash": args_hash, "run_version": str(run.version),
            "action": "approve", "note": "checked"})
    assert refused.status_code == 409
    secured(refused)
    assert why in alert(refused) and alert(refused).endswith("nothing was decided")
    box.untouched(run_id, run.version)
    assert [r[2] for r in box.refusals(run_id)] == ["unloadable"]


def test_a_run_the_server_can_drive_is_decided_as_before(box: Inbox) -> None:
    aid = box.approval_id("e-ok")
    with box.client("priya") as c:
        form = decision_form(c, aid)
        done = c.post(f"/approvals/{aid}/decide",
                      data={**form, "action": "deny", "note": "not eligible"})
    assert done.status_code == 303
    assert box.decisions("e-ok") == [("denied", "priya", "not eligible")]


def test_every_error_response_carries_the_security_headers(box: Inbox) -> None:
    con = sqlite3.connect(box.db)
    with con:
        con.execute("UPDATE runs SET snapshot = '[1,2]' WHERE run_id = 'e-workflow'")
    con.close()
    with box.client("priya") as c:
        broken = c.get("/runs/e-workflow")      # a row the server cannot read: 500
        missing = c.get("/no-such-page")         # 404
        wrong = c.put("/inbox")                   # 405
        bad = c.post("/approvals/x/decide", data={"note": "a\x00b"})  # 400
    assert broken.status_code == 500 and "Server error" in broken.text
    assert "Traceback" not in broken.text and "snapshot" not in broken.text
    assert (missing.status_code, wrong.status_code) == (404, 405)
    assert 400 <= bad.status_code < 500
    for response in (broken, missing, wrong, bad):
        secured(response)
    deadline = time.monotonic() + 30  # the log has the error, once the server wrote it
    while "RowDamaged" not in Path(str(box.log)).read_text():
        assert time.monotonic() < deadline, Path(str(box.log)).read_text()[-2000:]
        time.sleep(0.05)


def test_the_inbox_lists_every_readable_request_and_names_the_others(tmp_path: Path) -> None:
    b = make_inbox(tmp_path)
    for run_id, order in (("i-ok", "B-2001"), ("i-bad", "B-2002")):
        b.start_run(order, run_id)
    b.start_run("A-1001", "i-done")  # a small refund: paid, finished
    con = sqlite3.connect(b.db)
    with con:
        con.execute("UPDATE approvals SET args = '[1,2]' WHERE run_id = 'i-bad'")
        con.execute("INSERT INTO approvals (approval_id, run_id, step, tool, args, args_hash, "
                    "run_version, requested_at, expires_at) SELECT 'forged', 'i-ok', step, "
                    "tool, args, args_hash, run_version, requested_at + 1, expires_at "
                    "FROM approvals WHERE run_id = 'i-ok'")
    con.close()
    b.serve()
    try:
        with b.client("priya") as c:
            page = c.get("/inbox")
    finally:
        b.stop()
    assert page.status_code == 200
    secured(page)
    listed = re.findall(r'<tr data-run="([^"]+)"', page.text)
    assert listed == ["i-ok"]
    skipped = re.findall(r'class="error skipped" role="alert">([^<]*)<', page.text)
    assert len(skipped) == 2
    assert any("approval forged is pending, but run i-ok does not wait on it" in s
               for s in skipped)
    assert any("a row of run &#39;i-bad&#39; in table &#39;approvals&#39; is damaged" in s
               for s in skipped)
