"""The inbox against hostile clients and damaged rows, over real HTTP on loopback.

Every bad request gets a 4xx with one line saying what was wrong, no traceback in the
server's log, and leaves the run exactly as it was. A changed approval row is shown as
changed and never decided, from the inbox or the command line.
"""

from __future__ import annotations

import html
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from web_server import (
    WIRE,
    Client,
    Inbox,
    alert,
    approve_amount,
    decision_form,
    launch,
    login,
    make_inbox,
    stopped,
    understood,
    wire_policy,
)

from fsm import Engine, SQLiteStore, open_store
from fsm.auditor.audit import audit
from fsm.store.lease import new_owner
from fsm.web.accounts import add_account
from workflows.refund import Shop, build, clerk
from workflows.refund.shop import PostgresShop


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    b = make_inbox(tmp_path_factory.mktemp("hostile"))
    b.log = b.db.parent / "serve.log"
    b.serve()
    yield b
    b.stop()


def sign_out_token(page: httpx.Response) -> str:
    return page.text.split('name="csrf" value="')[1].split('"')[0]


def hidden_fields(box: Inbox, c: httpx.Client, run_id: str) -> dict[str, str]:
    """What a forged form would carry: the session's token, the row's hash and version."""
    ((args_hash, version),) = box.query(
        "SELECT args_hash, run_version FROM approvals WHERE run_id = ?", run_id)
    return {"csrf": sign_out_token(c.get("/inbox")), "args_hash": args_hash,
            "run_version": str(version)}


def change_args(box: Inbox, run_id: str, args: str) -> None:
    """Change the arguments of a run's approval row, as someone with the database could."""
    con = sqlite3.connect(box.db)
    try:
        con.execute("UPDATE approvals SET args = ? WHERE run_id = ?", (args, run_id))
        con.commit()
    finally:
        con.close()


def no_traceback(box: Inbox) -> None:
    assert box.log is not None
    log = box.log.read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


# -- a changed approval row ------------------------------------------------------------------

def test_a_changed_approval_row_is_shown_as_such_and_decided_by_nobody(box: Inbox) -> None:
    run = box.start_run("B-2003", "t-rowed")        # ₹25,000; kiran may release ₹1,000
    aid = box.approval_id("t-rowed")
    change_args(box, "t-rowed", '{"amount_paise":1000,"item_id":"phone-1"}')
    with box.client("kiran") as c:
        row = c.get("/inbox").text.split('data-run="t-rowed"')[1].split("</tr>")[0]
        page = c.get(f"/approvals/{aid}")
        forged = c.post(f"/approvals/{aid}/decide", data={
            **hidden_fields(box, c, "t-rowed"), "action": "approve", "note": "small one"})
    assert "₹25,000" in row and "₹10 " not in row and "does not match" in row
    text = html.unescape(page.text)
    assert page.status_code == 200 and 'name="args_hash"' not in text
    assert "do not match the request the run waits on" in text
    assert "= the hash the approval is bound to" not in text
    assert '<td class="amount">₹25,000</td>' in text and "above your release limit" not in text
    assert forged.status_code == 409
    assert "do not match the request the run waits on" in alert(forged)
    assert "nothing was decided" in alert(forged)
    box.untouched("t-rowed", run.version)
    assert box.refusals("t-rowed") == [("kiran", "approve", "mismatch", "127.0.0.1")]
    cli = subprocess.run([sys.executable, "-m", "fsm", "approve", "t-rowed", "--reviewer",
                          "sam", "--note", "ok", "--db", str(box.db)],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode != 0 and cli.stdout == ""
    (line,) = cli.stderr.strip().splitlines()
    assert "do not match the request the run waits on" in line
    assert "nothing was decided" in line
    box.untouched("t-rowed", run.version)


def test_a_decided_approval_page_checks_the_hash_as_it_was_requested(box: Inbox) -> None:
    box.start_run("B-2002", "t-done")
    aid = box.approval_id("t-done")
    with box.client("priya") as c:
        assert c.post(f"/approvals/{aid}/decide", data={
            **decision_form(c, aid), "action": "approve", "note": "ok"}).status_code == 303
        valid = html.unescape(c.get(f"/approvals/{aid}").text)
        change_args(box, "t-done", '{"amount_paise":1,"item_id":"camera-1"}')
        changed = html.unescape(c.get(f"/approvals/{aid}").text)
    assert box.run("t-done").status == "done"
    assert "= the hash the approval is bound to" in valid and "does not match" not in valid
    # a waiting state's request: the events offered come from the log's pause
    assert '"events":["approved","declined","expired"],"kind":"event"' in valid
    assert "= the hash the approval is bound to" not in changed
    assert "the row was changed after it was written" in changed


# -- sign-in, sessions, addresses ------------------------------------------------------------

def test_sign_ins_sent_at_once_are_throttled_one_by_one(tmp_path: Path) -> None:
    b = make_inbox(tmp_path)
    b.serve()
    try:
        clients = [b.client() for _ in range(10)]
        tokens = [re.search(r'name="csrf" value="([^"]+)"', c.get("/login").text)
                  for c in clients]
        barrier = threading.Barrier(len(clients))
        codes: list[int] = []

        def attempt(c: httpx.Client, token: str) -> None:
            barrier.wait()
            codes.append(c.post("/login", data={"name": "kiran", "password": "wrong one",
                                                "csrf": token}).status_code)

        threads = [threading.Thread(target=attempt, args=(c, t.group(1)))
                   for c, t in zip(clients, tokens, strict=True) if t is not None]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with b.client() as c:
            late = login(c, "kiran", "kiran-password")
        for c in clients:
            c.close()
    finally:
        b.stop()
    assert sorted(codes) == [401] * 5 + [429] * 5
    assert late.status_code == 429 and "too many failed sign-ins" in alert(late)


def test_a_forwarded_for_header_names_no_address(box: Inbox) -> None:
    run = box.start_run("B-2002", "t-xff")
    aid = box.approval_id("t-xff")
    with box.client() as c:
        refused = c.post(f"/approvals/{aid}/decide", data={"action": "approve"},
                         headers={"X-Forwarded-For": "198.51.100.9",
                                  "Forwarded": "for=198.51.100.9"})
    assert refused.status_code == 401
    box.untouched("t-xff", run.version)
    assert box.refusals("t-xff") == [(None, "approve", "session", "127.0.0.1")]


def test_signing_out_ends_every_session_of_the_account(box: Inbox) -> None:
    run = box.start_run("B-2002", "t-out")
    aid = box.approval_id("t-out")
    with box.client("sam") as first, box.client("sam") as second:
        form = decision_form(second, aid)
        page = first.get("/inbox")
        out = first.post("/logout", data={"csrf": sign_out_token(page)})
        assert out.status_code == 303
        assert second.get("/inbox").status_code == 303
        late = second.post(f"/approvals/{aid}/decide",
                           data={**form, "action": "approve", "note": "after sign-out"})
    assert late.status_code == 401 and "not signed in" in alert(late)
    cookie = out.headers["set-cookie"].lower()      # deleted as it was set
    assert "max-age=0" in cookie and "samesite=strict" in cookie and "httponly" in cookie
    box.untouched("t-out", run.version)
    with box.client("sam") as again:            # signing in again works
        assert again.get("/inbox").status_code == 200


# -- bad text ------------------------------------------------------------------------------

@dataclass
class Served:
    """A server on one store, an approval waiting on it, and priya's password."""

    url: str
    db: str
    run_id: str
    approval_id: str

    def decided(self) -> list[object]:
        with open_store(self.db) as store:
            return [a.decision for a in store.approvals(self.run_id, pending_only=False)
                    if a.decision is not None]

    def audit_ok(self) -> bool:
        with open_store(self.db) as store:
            return audit(store, self.run_id).ok


def _serve_pg(pg_url: str) -> Iterator[Served]:
    with open_store(pg_url) as store, PostgresShop(pg_url) as shop:
        add_account(store, "priya", "approver", "priya-password", 1_500_000)
        shop.seed_demo()
        run = Engine(build(shop), store, clerk).start(
            "Order A-1002: the headphones stopped working", user="ravi", run_id="t-pg",
            meta={"workflow_ref": "refund", "policy": "default"})
    assert run.pending is not None and run.pending.approval_id is not None
    process, url = launch(pg_url)
    try:
        yield Served(url, pg_url, "t-pg", run.pending.approval_id)
    finally:
        err = stopped(process)
        assert "Traceback" not in err, err
        assert "database postgresql://" in err and "object at 0x" not in err


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    if request.param == "postgres":
        yield from _serve_pg(request.getfixturevalue("pg_url"))
        return
    b = make_inbox(tmp_path)
    b.log = tmp_path / "serve.log"
    b.start_run("B-2002", "t-nul")
    b.serve()
    try:
        yield Served(b.url, str(b.db), "t-nul", b.approval_id("t-nul"))
    finally:
        b.stop()
        no_traceback(b)
        assert f"(database {b.db})" in b.log.read_text()


def test_page_numbers_past_the_last_page_show_the_last(served: Served) -> None:
    with Client(base_url=served.url, timeout=30) as c:
        login(c, "priya", "priya-password")
        for path in ("/inbox?page=99999999999999999999999", "/runs?page=400000000000000000",
                     "/inbox?page=400000000000000000"):
            page = c.get(path)
            assert page.status_code == 200, (path, page.text[-500:])
            assert "page 1 of 1 (1 in all)" in page.text


def test_text_with_a_nul_or_a_file_is_refused_and_nothing_is_decided(served: Served) -> None:
    aid = served.approval_id
    with Client(base_url=served.url, timeout=30) as c:
        nobody = c.post("/approvals/%00/decide", data={"action": "approve"})
        assert nobody.status_code == 400 and "NUL character" in alert(nobody)
        login(c, "priya", "priya-password")
        for path in ("/approvals/%00", "/runs/%00", "/inbox?workflow=%00", "/runs?status=%00",
                     "/runs?workflow=a%00"):
            page = c.get(path)
            assert page.status_code == 400 and "NUL character" in alert(page), path
        form = decision_form(c, aid)
        bad = [{**form, "action": "approve", "note": "nul\x00note"},
               {**form, "action": "ap\x00prove", "note": "ok"}]
        for data in bad:
            refused = c.post(f"/approvals/{aid}/decide", data=data)
            assert refused.status_code == 400 and "NUL character" in alert(refused)
            assert "nothing was decided" in alert(refused)
        upload = c.post(f"/approvals/{aid}/decide", data={**form, "action": "deny"},
                        files={"note": ("reason.txt", b"the real reason")})
        assert upload.status_code == 400 and "is a file upload" in alert(upload)
        unbounded = c.post(f"/approvals/{aid}/decide", content=b"action=deny",
                           headers={"content-type": "multipart/form-data"})
        assert unbounded.status_code == 400 and "not a form that can be read" in alert(unbounded)
        assert served.decided() == []
        with Client(base_url=served.url, timeout=30) as other:
            name = login(other, "pri\x00ya", "priya-password")
        assert name.status_code == 400 and "NUL character" in alert(name)
        done = c.post(f"/approvals/{aid}/decide",
                      data={**form, "action": "deny", "note": "a clean retry"})
        assert done.status_code == 303, done.text
    assert served.decided() == ["denied"] and served.audit_ok()


def test_a_client_that_leaves_mid_body_leaves_no_traceback(box: Inbox) -> None:
    run = box.start_run("B-2002", "t-gone")
    aid = box.approval_id("t-gone")
    port = int(box.url.rsplit(":", 1)[1])
    for path in (f"/approvals/{aid}/decide", "/login", "/logout"):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      "application/x-www-form-urlencoded\r\nContent-Length: 999\r\n\r\n"
                      "action=approve".encode())
            time.sleep(0.2)
    with box.client() as c:     # the server has seen every disconnect once it answers
        time.sleep(0.3)
        assert c.get("/healthz").status_code == 200
    box.untouched("t-gone", run.version)
    no_traceback(box)


def test_refused_attempts_keep_short_rows_for_real_approvals_only(box: Inbox) -> None:
    run = box.start_run("B-2002", "t-flood")
    aid = box.approval_id("t-flood")
    before = box.query("SELECT count(*) FROM web_refusals")[0][0]
    with box.client() as c:
        flood = c.post(f"/approvals/{aid}/decide", data={"action": "A" * 900_000})
        unknown = c.post(f"/approvals/{'Z' * 60_000}/decide", data={"action": "approve"})
        signed_out = c.post(f"/approvals/{aid}/decide", data={"action": "approve"})
    assert flood.status_code == 400 and "at most 16 are allowed" in alert(flood)
    assert len(flood.text) < 10_000
    assert unknown.status_code == 401 and len(unknown.text) < 10_000
    assert signed_out.status_code == 401
    assert box.query("SELECT count(*) FROM web_refusals")[0][0] == before + 1
    assert box.refusals("t-flood") == [(None, "approve", "session", "127.0.0.1")]
    box.untouched("t-flood", run.version)


# -- what pages show -------------------------------------------------------------------------

def test_a_lowered_approval_shows_what_was_approved_and_what_was_asked(box: Inbox) -> None:
    with Shop(str(box.db)) as shop:
        shop.add_order("B-2011", "ravi", "tv-1", "tv", 1_000_000, 3)
    box.start_run("B-2011", "t-low")
    aid = box.approval_id("t-low")
    with box.client("priya") as c:
        confirm, done = approve_amount(c, aid, "1,000")
        assert understood(confirm) == "₹1,000"
        assert done.status_code == 303
        page = html.unescape(c.get(f"/approvals/{aid}").text)
        run_page = html.unescape(c.get("/runs/t-low").text)
    assert box.payments("t-low") == [("B-2011", 100_000)]
    assert '<b class="granted-amount">₹1,000</b>, asked ₹10,000' in page
    assert "refund ₹10,000 for the tv of order B-2011" in run_page
    assert "approved: refund ₹1,000 for the tv of order B-2011" in run_page


@pytest.mark.parametrize("run_id", ["%72%31", "a/b", "q?decided=1", "h#x"])
def test_a_run_link_opens_exactly_that_run(box: Inbox, run_id: str) -> None:
    if "r1" not in [r[0] for r in box.query("SELECT run_id FROM runs")]:
        box.start_run("B-2001", "r1")
    box.start_run("B-2002", run_id)
    aid = box.approval_id(run_id)
    with box.client("priya") as c:
        page = c.get(f"/approvals/{aid}")
        (href,) = re.findall(r'Run <a href="([^"]+)"', page.text)
        opened = c.get(html.unescape(href))
        inbox = c.get("/inbox").text
    assert opened.status_code == 200
    assert f"<h1>Run {html.escape(run_id)}</h1>" in opened.text
    assert f'href="{href}"' in inbox


def test_the_recorded_banner_is_only_for_the_reviewer_who_decided(box: Inbox) -> None:
    box.start_run("B-2002", "t-banner")
    aid = box.approval_id("t-banner")
    banner = "Your decision was recorded."
    with box.client("priya") as p, box.client("sam") as s:
        assert banner not in p.get(f"/approvals/{aid}?decided=1").text
        done = p.post(f"/approvals/{aid}/decide", data={
            **decision_form(p, aid), "action": "approve", "note": "ok"})
        assert banner in p.get(done.headers["location"]).text
        assert banner not in s.get(f"/approvals/{aid}?decided=1").text


def test_a_decision_while_another_is_being_recorded_says_nothing_was_decided(
        box: Inbox) -> None:
    run = box.start_run("B-2002", "t-busy")
    aid = box.approval_id("t-busy")
    store = SQLiteStore(str(box.db))
    owner = new_owner()
    try:
        with box.client("priya") as c:
            form = decision_form(c, aid)
            store.acquire("t-busy", owner, time.time())
            try:
                busy = c.post(f"/approvals/{aid}/decide",
                              data={**form, "action": "approve", "note": "ok"})
            finally:
                store.release("t-busy", owner)
    finally:
        store.close()
    assert busy.status_code == 409
    assert alert(busy) == ("another decision of this run is being recorded right now; "
                           "nothing was decided by you; reload the page")
    box.untouched("t-busy", run.version)


ACCEPTED = ("one amount in ₹ (rupees), e.g. 1,200 or 1200.50, with at most 2 decimals")


@pytest.mark.parametrize(("amount", "expected"), [
    ("99999999999999999999999999", "the form field 'amount' is too large"),
    ("26,000", "the form field 'amount' may only lower the amount"),
    ("25,000.01", "the form field 'amount' may only lower the amount"),
    ("-5", f"the form field 'amount' must be {ACCEPTED}"),
    ("1,200.5.3", f"the form field 'amount' must be {ACCEPTED}"),
    ("1e3", f"the form field 'amount' must be {ACCEPTED}"),
    ("1200.505", "the form field 'amount' has 3 decimals"),
    ("$1200", "the form field 'amount' is in ₹ (rupees), not in another currency ($)"),
    ("€ 12", "not in another currency (€)"),
    ("0", "the form field 'amount' may only lower the amount"),
    ("9" * 5000, "at most 40 are allowed"),
])
def test_an_amount_out_of_range_is_a_400_before_any_limit(box: Inbox, amount: str,
                                                          expected: str) -> None:
    run_id = f"t-amount-{len(amount)}-{amount[:2]}"
    run = box.start_run("B-2003", run_id)       # ₹25,000; kiran may release ₹1,000
    aid = box.approval_id(run_id)
    with box.client("kiran") as c:
        refused = c.post(f"/approvals/{aid}/decide", data={
            **decision_form(c, aid), "action": "approve", "note": "ok", "amount": amount})
    message = alert(refused)
    assert refused.status_code == 400 and expected in message, message
    assert "release limit" not in message and "{" not in message and len(message) < 400
    assert "nothing was decided" in message and "confirm" not in refused.text
    box.untouched(run_id, run.version)


def test_long_notes_and_ids_are_refused_or_cut_short(box: Inbox) -> None:
    run = box.start_run("B-2002", "t-long")
    aid = box.approval_id("t-long")
    with box.client("priya") as c:
        long_note = c.post(f"/approvals/{aid}/decide", data={
            **decision_form(c, aid), "action": "approve", "note": "n" * 4001})
        page = c.get(f"/approvals/{aid}")
        missing = c.get(f"/approvals/{'x' * 20_000}")
        no_run = c.get(f"/runs/{'y' * 20_000}")
    assert long_note.status_code == 400 and "at most 4000 are allowed" in alert(long_note)
    assert 'maxlength="4000"' in page.text
    assert missing.status_code == 404 and len(missing.text) < 10_000
    assert no_run.status_code == 404 and len(no_run.text) < 10_000
    box.untouched("t-long", run.version)


def test_no_decision_form_when_the_workflow_cannot_be_loaded(box: Inbox) -> None:
    store = SQLiteStore(str(box.db))
    try:   # the server's path has no tests/: it cannot import web_server
        run = Engine(WIRE, store, wire_policy).start(
            "pay ACME", user="omar", run_id="t-lost",
            meta={"workflow_ref": "web_server:WIRE", "policy": "web_server:wire_policy"})
    finally:
        store.close()
    assert run.pending is not None and run.pending.approval_id is not None
    aid = run.pending.approval_id
    with box.client("priya") as c:
        page = html.unescape(c.get(f"/approvals/{aid}").text)
    assert 'name="args_hash"' not in page
    assert "workflow 'wire' cannot be loaded by this server" in page
    assert box.run("t-lost").status == "awaiting_approval" and box.decisions("t-lost") == []
    # The signed-in person and the server's log both say why.
    why = "cannot import 'web_server:WIRE': no module named 'web_server' in the current " \
          "directory, then PYTHONPATH, then the installed packages"
    assert why in page
    assert box.log is not None
    logged = [line for line in box.log.read_text().splitlines() if "t-lost" in line]
    assert len(logged) == 1 and logged[0].startswith("WARNING fsm.web: workflow wire (run "
                                                     "t-lost started it as web_server:WIRE)")
    assert why in logged[0]


def test_a_lower_amount_above_the_limit_is_refused_before_the_confirm_step(
        box: Inbox) -> None:
    run = box.start_run("B-2003", "t-lower-limit")       # ₹25,000; kiran may release ₹1,000
    aid = box.approval_id("t-lower-limit")
    with box.client("kiran") as c:
        refused = c.post(f"/approvals/{aid}/decide", data={
            **decision_form(c, aid), "action": "approve", "note": "ok", "amount": "2,000"})
        assert refused.status_code == 403 and "confirm" not in refused.text
        assert "₹2,000 is above your release limit of ₹1,000" in alert(refused)
        confirm, done = approve_amount(c, aid, "1,000")
    assert understood(confirm) == "₹1,000" and done.status_code == 303
    assert box.payments("t-lower-limit") == [("B-2003", 100_000)]
    assert run.version < box.run("t-lower-limit").version
