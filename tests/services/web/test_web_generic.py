"""A workflow with no inbox hooks: the inbox shows the exact call, only an approver without
a release limit may approve it (no limit can read its amount), and an approval runs the call
once. The framework itself speaks no workflow's words."""

from __future__ import annotations

import html
import os
from pathlib import Path

from paths import SUPPORT
from web_server import WIRE, decision_form, make_inbox, wire_policy

from fsm import Engine, SQLiteStore


def test_a_paused_tool_call_is_shown_exactly_and_approved_once(tmp_path: Path) -> None:
    box = make_inbox(tmp_path)
    log = tmp_path / "wires.log"
    os.environ["WIRE_LOG"] = str(log)
    store = SQLiteStore(str(box.db))
    try:
        run = Engine(WIRE, store, wire_policy).start(
            "pay ACME", user="omar", run_id="wire1",
            meta={"workflow_ref": "web_server:WIRE", "policy": "web_server:wire_policy"})
    finally:
        store.close()
        del os.environ["WIRE_LOG"]
    assert run.status == "awaiting_approval" and run.pending is not None
    aid = run.pending.approval_id
    path = os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])
    box.serve(PYTHONPATH=path, WIRE_LOG=str(log))
    try:
        with box.client("kiran") as c:            # a limit, and this call shows no amount
            inbox = html.unescape(c.get("/inbox").text)
            assert 'send_wire {"cents":50000,"to":"ACME Ltd"}' in inbox
            page = html.unescape(c.get(f"/approvals/{aid}").text)
            assert "run the call <code>send_wire</code>" in page
            assert '{"args":{"cents":50000,"to":"ACME Ltd"},"events":[],"kind":"call",' \
                   '"tool":"send_wire"}' in page
            assert "shows no amount that your release limit of 100000 could be compared" in page
            form = {**decision_form(c, aid), "action": "approve", "note": "invoice 77 matches"}
            assert c.post(f"/approvals/{aid}/decide", data=form).status_code == 403
        with box.client("sam") as c:              # no limit: the limit fails closed
            page = html.unescape(c.get(f"/approvals/{aid}").text)
            assert "release limit of" not in page
            form = {**decision_form(c, aid), "action": "approve", "note": "invoice 77 matches"}
            assert c.post(f"/approvals/{aid}/decide", data=form).status_code == 303
            assert c.post(f"/approvals/{aid}/decide", data=form).status_code == 409  # replayed
    finally:
        box.stop()
    assert box.run("wire1").status == "done"
    assert log.read_text() == "wire1:1 ACME Ltd 50000\n"
