"""The desk over real HTTP: pages that read as words, duplicate requests, the handover
queue."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_server import Inbox, make_inbox

from fsm import Engine, SQLiteStore
from fsm.auditor.audit import audit
from fsm.testing import ScriptedPolicy
from fsm.web.notify import Notifier
from workflows.refund import Shop, build

META = {"workflow_ref": "refund", "policy": "default"}


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    b = make_inbox(tmp_path_factory.mktemp("desk"))
    b.serve()
    yield b
    b.stop()


def scripted(box: Inbox, run_id: str, actions: list[dict[str, object]],
             goal: str = "Order B-2001: the headphones stopped working",
             user: str = "ravi") -> None:
    with SQLiteStore(str(box.db)) as store, Shop(str(box.db)) as shop:
        Engine(build(shop), store, ScriptedPolicy(actions)).start(
            goal, user=user, run_id=run_id, meta=META)


def text_of(page: str) -> str:
    """The page's text, tags removed, as a person reads it."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page)))


def test_the_run_page_tells_the_log_as_sentences_with_the_hashes_folded(box: Inbox) -> None:
    scripted(box, "s-words", [
        {"tool": "get_order", "args": {"order_id": "B-2001"}},
        {"tool": "advance", "args": {"event": "details_complete"}},
        {"tool": "refund_item", "args": {"order_id": "B-2001", "item_id": "headphones-2",
                                         "amount_paise": 180_000}},
        {"final": "stop"},
    ])
    with box.client("audrey") as c:
        page = c.get("/runs/s-words").text
    said = text_of(page)
    assert ("the model called refund_item for ₹1,800; refused: tool 'refund_item' is not "
            "allowed in state 'verifying' (allowed: get_order, get_policy)") in said
    assert "details_complete moved the run from collecting to verifying" in said
    assert "the run started in collecting for ravi" in said
    assert "<code>refund_item</code> for ₹1,800" in html.unescape(page)
    with SQLiteStore(str(box.db)) as store:
        events = store.events("s-words")
    items = re.findall(r'<li class="event [^"]*" data-seq="(\d+)".*?</li>', page, re.S)
    assert items == [str(e.seq) for e in events]
    for e in events:  # every hash is on the page, inside a closed <details> element
        (row,) = re.findall(rf'data-seq="{e.seq}".*?<details class="row">(.*?)</details>',
                            page, re.S)
        assert e.hash in row and e.prev_hash in row
    assert not re.search(r"<details[^>]*\bopen\b", page)


def handover_of(box: Inbox, run_id: str) -> str:
    (hid,) = [r[0] for r in box.query("SELECT handover_id FROM handovers WHERE run_id = ?",
                                      run_id)]
    return str(hid)


def act(c: httpx.Client, hid: str, **fields: str) -> httpx.Response:
    page = c.get(f"/handovers/{hid}")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None, page.text
    return c.post(f"/handovers/{hid}/act", data={"csrf": token.group(1), **fields})


def test_the_handover_queue_take_and_close_over_http(box: Inbox) -> None:
    box.start_run("A-1003", "s-lamp")         # not eligible: cannot verify
    hid = handover_of(box, "s-lamp")
    with box.client("sam") as sam, box.client("priya") as priya, \
            box.client("audrey") as audrey:
        queue = sam.get("/handovers")
        (row,) = re.findall(r'<tr data-run="s-lamp".*?</tr>', queue.text, re.S)
        said = text_of(row)
        assert "cannot verify" in said and "Order A-1003: it stopped working" in said
        assert "nobody" in said and re.search(r"\d+ min", said)
        waiting = int(re.findall(r'data-queue="handovers">(\d+)<', queue.text)[0])
        assert waiting >= 1
        assert act(audrey, hid, action="take").status_code == 403
        assert act(sam, hid, action="take").status_code == 303
        assert "sam" in text_of(re.findall(r'<tr data-run="s-lamp".*?</tr>',
                                           priya.get("/handovers").text, re.S)[0])
        refused = act(priya, hid, action="close", outcome="resolved", note="mine now")
        assert refused.status_code == 409 and "was taken by sam" in html.unescape(refused.text)
        assert act(sam, hid, action="close", outcome="resolved", note=" ").status_code == 400
        resume = act(sam, hid, action="close", outcome="resumed", note="again")
        assert resume.status_code == 409 and "does not let a run" in html.unescape(resume.text)
        done = act(sam, hid, action="close", outcome="resolved",
                   note="phoned the customer; a new lamp is on its way")
        assert done.status_code == 303
        page = text_of(sam.get(f"/handovers/{hid}").text)
        assert "resolved by sam" in page and "a new lamp is on its way" in page
        after = int(re.findall(r'data-queue="handovers">(\d+)<', sam.get("/inbox").text)[0])
    assert after == waiting - 1
    assert box.query("SELECT outcome, closed_by FROM handovers WHERE run_id = 's-lamp'") == [
        ("resolved", "sam")]
    assert box.query("SELECT kind, reviewer FROM events WHERE run_id = 's-lamp' AND kind IN "
                     "('take', 'close') ORDER BY seq") == [("take", "sam"), ("close", "sam")]
    with SQLiteStore(str(box.db)) as store:
        assert audit(store, "s-lamp").ok
        (note,) = store.notifications(run_id="s-lamp")
        body, _ = Notifier(store, urls=[], public_url="http://desk").payload(note)
    assert body["inbox_url"] == f"http://desk/handovers/{hid}"
    assert body["reason"] == "cannot verify" and body["kind"] == "waiting"


def test_a_handover_taken_by_someone_away_is_taken_over_with_a_note(box: Inbox) -> None:
    box.start_run("A-1003", "s-away")
    hid = handover_of(box, "s-away")
    with box.client("sam") as sam, box.client("priya") as priya:
        assert act(sam, hid, action="take").status_code == 303
        page = text_of(priya.get(f"/handovers/{hid}").text)
        assert "sam took this run; they close it." in page
        assert "take it over: say why" in page and "Take it over from sam" in page
        bare = act(priya, hid, action="take")
        assert bare.status_code == 409 and "take it over with a note saying why" in \
            html.unescape(bare.text)
        assert act(priya, hid, action="take", note="sam is away this week").status_code == 303
        after = text_of(priya.get(f"/handovers/{hid}").text)
        assert "priya took the handed-over run over from sam: “sam is away this week”" in after
        assert act(priya, hid, action="close", outcome="resolved",
                   note="sent a new lamp").status_code == 303
    assert box.query("SELECT taken_by, closed_by FROM handovers WHERE run_id = 's-away'") == [
        ("priya", "priya")]
    with SQLiteStore(str(box.db)) as store:
        assert audit(store, "s-away").ok


def test_other_requests_about_the_same_order_are_shown_before_the_decision(
        box: Inbox) -> None:
    from web_server import decision_form

    box.start_run("B-2002", "d-first")
    first = box.approval_id("d-first")
    with box.client("priya") as c:
        assert c.post(f"/approvals/{first}/decide", data={
            **decision_form(c, first), "action": "approve", "note": "ok"}).status_code == 303
    assert box.payments("d-first") == [("B-2002", 900_000)]
    box.start_run("B-2002", "d-second")
    box.start_run("B-2002", "d-third")
    box.start_run("B-2003", "d-alone")
    second = box.approval_id("d-second")
    (paid_at,) = box.query("SELECT finished_at FROM effects WHERE run_id = 'd-first' AND "
                           "tool = 'refund_item'")[0]
    day = time.strftime("%Y-%m-%d", time.gmtime(paid_at))
    with box.client("priya") as c:
        page = c.get(f"/approvals/{second}").text
        inbox = c.get("/inbox").text
    said = text_of(page)
    assert f"order B-2002 was refunded ₹9,000 on {day} in run d-first" in said
    assert "order B-2002: run d-third also asks “refund ₹9,000 for the camera of order " \
           "B-2002”" in said
    assert page.index('class="duplicates"') < page.index('class="decision"')
    (row,) = re.findall(r'<tr data-run="d-second".*?</tr>', inbox, re.S)
    assert "(also requested in run d-first, d-third)" in text_of(row)
    (alone,) = re.findall(r'<tr data-run="d-alone".*?</tr>', inbox, re.S)
    assert "refund ₹25,000" in text_of(alone) and "also requested" not in text_of(alone)


def test_a_handover_of_a_workflow_the_server_cannot_load_says_why(tmp_path: Path) -> None:
    """Taking it is refused naming the workflow and the reason the server could not load
    it (as the approval page does), and nothing changes."""
    lost = make_inbox(tmp_path)
    engine, store, shop = lost.engine()
    try:  # started as a module the server cannot import (the tests' own path)
        run = engine.start("Order A-1003: it stopped working", user="ravi", run_id="s-lost",
                           meta={"workflow_ref": "web_server:NOWHERE", "policy": "default"})
    finally:
        store.close()
        shop.close()
    assert run.status == "handed_over"
    lost.serve()
    try:
        hid = handover_of(lost, "s-lost")
        with lost.client("sam") as sam:
            refused = act(sam, hid, action="take")
        said = html.unescape(refused.text)
        assert refused.status_code == 409, said
        assert "workflow 'refund' cannot be loaded by this server (cannot import " \
               "'web_server:NOWHERE'" in said and "nothing was changed" in said
        assert lost.query("SELECT taken_by FROM handovers WHERE run_id = 's-lost'") == [(None,)]
        assert lost.run("s-lost").version == run.version
    finally:
        lost.stop()
