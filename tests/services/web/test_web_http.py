"""The inbox over real HTTP: ``fsm serve`` on a loopback port, every refusal, every header.

Each refused attempt must leave the run exactly as it was (nothing decided, nothing paid)
and a row an auditor reads: who, what, why, when, from where.
"""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from web_server import (
    Inbox,
    alert,
    approve_amount,
    decision_form,
    login,
    make_inbox,
    understood,
)

from fsm.records import canonical, fingerprint
from workflows.refund import Shop


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    b = make_inbox(tmp_path_factory.mktemp("http"))
    b.serve()
    yield b
    b.stop()


def test_an_approver_approves_and_the_refund_is_paid_once(box: Inbox) -> None:
    run = box.start_run("B-2001", "h-ok")
    aid = box.approval_id("h-ok")
    with box.client("priya") as c:
        inbox = c.get("/inbox")
        assert "refund ₹12,000 for the headphones of order B-2001" in inbox.text
        page = c.get(f"/approvals/{aid}")
        subject = run.pending.subject()  # type: ignore[union-attr]
        assert canonical(subject).replace('"', "&#34;") in page.text
        assert fingerprint(subject) in page.text
        form = decision_form(c, aid)
        done = c.post(f"/approvals/{aid}/decide",
                      data={**form, "action": "approve", "note": "receipt checked"})
        assert done.status_code == 303 and done.headers["location"] == f"/approvals/{aid}?decided=1"
    assert box.run("h-ok").status == "done"
    assert box.payments("h-ok") == [("B-2001", 1_200_000)]
    assert box.decisions("h-ok") == [("approved", "priya", "receipt checked")]
    log = box.query("SELECT reviewer FROM events WHERE run_id = 'h-ok' AND kind = 'decision'")
    assert log == [("priya",)]


@pytest.mark.parametrize("token", ["", "forged-token"], ids=["missing", "wrong"])
def test_a_post_without_the_right_csrf_token_is_403_and_decides_nothing(
        box: Inbox, token: str) -> None:
    run_id = f"h-csrf-{token or 'none'}"
    run = box.start_run("B-2002", run_id)
    aid = box.approval_id(run_id)
    with box.client("priya") as c:
        form = {**decision_form(c, aid), "csrf": token, "action": "approve", "note": "ok"}
        if not token:
            del form["csrf"]
        refused = c.post(f"/approvals/{aid}/decide", data=form)
    assert refused.status_code == 403 and "security token" in alert(refused)
    box.untouched(run_id, run.version)
    assert box.refusals(run_id) == [("priya", "approve", "csrf", "127.0.0.1")]


def test_a_post_without_a_session_is_refused(box: Inbox) -> None:
    run = box.start_run("B-2002", "h-nosession")
    aid = box.approval_id("h-nosession")
    with box.client("priya") as c:
        form = decision_form(c, aid)
    with box.client() as anonymous:
        refused = anonymous.post(f"/approvals/{aid}/decide",
                                 data={**form, "action": "approve", "note": "ok"})
        page = anonymous.get(f"/approvals/{aid}")
    assert refused.status_code == 401 and "not signed in" in alert(refused)
    assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")
    box.untouched("h-nosession", run.version)
    assert box.refusals("h-nosession") == [(None, "approve", "session", "127.0.0.1")]


def test_an_auditor_sees_no_form_and_a_forged_post_is_refused(box: Inbox) -> None:
    run = box.start_run("B-2002", "h-auditor")
    aid = box.approval_id("h-auditor")
    with box.client("priya") as p:
        form = decision_form(p, aid)
    with box.client("audrey") as c:
        page = c.get(f"/approvals/{aid}")
        assert page.status_code == 200 and "you can read this request, not decide it" in page.text
        assert "<button" not in page.text.replace('<button type="submit">Sign out', "")
        token = page.text.split('name="csrf" value="')[1].split('"')[0]  # the sign-out form's
        refused = c.post(f"/approvals/{aid}/decide",
                         data={**form, "csrf": token, "action": "approve", "note": "ok"})
    assert refused.status_code == 403 and "auditors read" in alert(refused)
    box.untouched("h-auditor", run.version)
    assert box.refusals("h-auditor") == [("audrey", "approve", "role", "127.0.0.1")]


def test_nobody_approves_a_run_they_requested(box: Inbox) -> None:
    run = box.start_run("B-2001", "h-self")   # ravi's own order
    aid = box.approval_id("h-self")
    with box.client("ravi") as c:
        refused = c.post(f"/approvals/{aid}/decide",
                         data={**decision_form(c, aid), "action": "approve", "note": "mine"})
    assert refused.status_code == 403 and "started this run and cannot decide" in alert(refused)
    box.untouched("h-self", run.version)
    assert box.refusals("h-self") == [("ravi", "approve", "self", "127.0.0.1")]


def test_an_approver_cannot_release_more_than_their_limit(box: Inbox) -> None:
    run = box.start_run("B-2002", "h-limit")   # ₹9,000; kiran may release ₹1,000
    aid = box.approval_id("h-limit")
    with box.client("kiran") as c:
        page = c.get(f"/approvals/{aid}")
        assert "above your release limit of ₹1,000" in page.text
        refused = c.post(f"/approvals/{aid}/decide",
                         data={**decision_form(c, aid), "action": "approve", "note": "ok"})
    assert refused.status_code == 403
    assert alert(refused).startswith("₹9,000 is above your release limit of ₹1,000")
    box.untouched("h-limit", run.version)
    assert box.refusals("h-limit") == [("kiran", "approve", "limit", "127.0.0.1")]


def test_a_double_submit_from_two_tabs_decides_once(box: Inbox) -> None:
    box.start_run("B-2002", "h-double")
    aid = box.approval_id("h-double")
    with box.client("priya") as c:
        tab1, tab2 = decision_form(c, aid), decision_form(c, aid)
        first = c.post(f"/approvals/{aid}/decide",
                       data={**tab1, "action": "approve", "note": "tab one"})
        second = c.post(f"/approvals/{aid}/decide",
                        data={**tab2, "action": "approve", "note": "tab two"})
    assert first.status_code == 303
    assert second.status_code == 409 and "already approved by priya" in alert(second)
    assert box.decisions("h-double") == [("approved", "priya", "tab one")]
    assert box.payments("h-double") == [("B-2002", 900_000)]
    assert box.refusals("h-double") == [("priya", "approve", "decided", "127.0.0.1")]


def test_two_reviewers_at_once_exactly_one_wins(box: Inbox) -> None:
    box.start_run("B-2003", "h-race")
    aid = box.approval_id("h-race")
    clients = [box.client("priya"), box.client("sam")]
    forms = [decision_form(c, aid) for c in clients]
    barrier = threading.Barrier(2)
    results: dict[str, httpx.Response] = {}

    def post(i: int, name: str, action: str) -> None:
        barrier.wait()
        results[name] = clients[i].post(f"/approvals/{aid}/decide",
                                        data={**forms[i], "action": action, "note": name})

    threads = [threading.Thread(target=post, args=(0, "priya", "deny")),
               threading.Thread(target=post, args=(1, "sam", "approve"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    codes = sorted(r.status_code for r in results.values())
    assert codes == [303, 409], {k: (v.status_code, alert(v)) for k, v in results.items()}
    (winner,) = [k for k, v in results.items() if v.status_code == 303]
    verdict = "approved" if winner == "sam" else "denied"
    assert box.decisions("h-race") == [(verdict, winner, winner)]
    assert box.payments("h-race") == ([("B-2003", 2_500_000)] if winner == "sam" else [])
    (loser,) = box.refusals("h-race")
    # Refused as decided, as busy (the winner's commit under way) or as stale (its page is
    # older than the winner's commit): nothing of the loser's was decided in any case.
    assert loser[0] != winner and loser[2] in ("decided", "busy", "stale")


def test_an_expired_approval_is_refused_and_the_expiry_applied(box: Inbox) -> None:
    box.start_run("B-2002", "h-expired", ago=73 * 3600)
    aid = box.approval_id("h-expired")
    with box.client("priya") as c:
        assert "expired" in c.get("/inbox").text.split('data-run="h-expired"')[1][:2000]
        refused = c.post(f"/approvals/{aid}/decide",
                         data={**decision_form(c, aid), "action": "approve", "note": "late"})
    assert refused.status_code == 409 and "expired at" in alert(refused)
    run = box.run("h-expired")
    assert (run.status, run.state) == ("handed_over", "handed_over")
    assert box.decisions("h-expired") == [("expired", None, None)]
    assert box.payments("h-expired") == []
    assert box.refusals("h-expired") == [("priya", "approve", "expired", "127.0.0.1")]


def test_a_page_from_before_the_run_moved_on_is_refused(box: Inbox) -> None:
    box.start_run("B-2002", "h-stale")
    aid = box.approval_id("h-stale")
    with box.client("priya") as c:
        old = decision_form(c, aid)
        tampered = c.post(f"/approvals/{aid}/decide", data={
            **old, "args_hash": "0" * 64, "action": "approve", "note": "edited page"})
        assert tampered.status_code == 409 and "reload it" in alert(tampered)
        engine, store, shop = box.engine()
        try:   # decided meanwhile elsewhere (as fsm deny does)
            engine.decide("h-stale", False, "operator", "duplicate claim")
        finally:
            store.close()
            shop.close()
        late = c.post(f"/approvals/{aid}/decide",
                      data={**old, "action": "approve", "note": "from an old page"})
    assert late.status_code == 409 and "already denied by operator" in alert(late)
    assert box.decisions("h-stale") == [("denied", "operator", "duplicate claim")]
    assert [r[2] for r in box.refusals("h-stale")] == ["stale", "decided"]


@pytest.mark.parametrize("note", [
    pytest.param("  ", id="spaces"),
    pytest.param("\u200b", id="zero-width-space"),
    pytest.param("\u200b \u2060\ufeff\u00ad\u200d", id="invisible-and-spaces"),
])
def test_a_decision_needs_a_note(box: Inbox, note: str) -> None:
    run_id = f"h-note-{len(note)}"
    run = box.start_run("B-2002", run_id)
    aid = box.approval_id(run_id)
    with box.client("priya") as c:
        refused = c.post(f"/approvals/{aid}/decide",
                         data={**decision_form(c, aid), "action": "deny", "note": note})
    assert refused.status_code == 400 and "needs a note" in alert(refused)
    box.untouched(run_id, run.version)


def test_the_auditor_reads_refusals_and_the_audit_verdict_on_the_run_page(box: Inbox) -> None:
    box.start_run("B-2001", "h-audit")
    aid = box.approval_id("h-audit")
    with box.client("ravi") as c:
        c.post(f"/approvals/{aid}/decide",
               data={**decision_form(c, aid), "action": "approve", "note": "mine"})
    with box.client("audrey") as c:
        page = c.get("/runs/h-audit")
        runs = c.get("/runs?status=awaiting_approval")
    assert page.status_code == 200
    assert '<td class="code">self</td>' in page.text and "<td>ravi</td>" in page.text
    assert "<h2>Refused attempts</h2>" in page.text
    assert '<span class="ok">passed</span>' in page.text
    head = box.query("SELECT log_head FROM runs WHERE run_id = 'h-audit'")[0][0]
    assert f'<code class="head">{head}</code>' in page.text
    assert "<svg" in page.text and "collecting → verifying → deciding → awaiting_approval" \
        in page.text
    assert 'data-run="h-audit"' in runs.text


def test_pages_carry_the_security_headers_and_the_session_cookie_is_strict(box: Inbox) -> None:
    with box.client() as c:
        form = c.get("/login")
        for name in ("content-security-policy", "x-content-type-options", "x-frame-options"):
            assert name in form.headers
        assert "frame-ancestors 'none'" in form.headers["content-security-policy"]
        assert form.headers["x-content-type-options"] == "nosniff"
        signed = login(c, "priya", "priya-password")
    cookie = signed.headers["set-cookie"].lower()
    assert signed.status_code == 303 and "fsm_session=" in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=28800" in cookie
    assert "secure" not in cookie.replace("fsm_session", "")  # plain http on loopback


@pytest.mark.parametrize("target", ["//evil.example/x", "/\\evil.example", "https://evil.example"])
def test_signing_in_never_redirects_off_the_site(box: Inbox, target: str) -> None:
    with box.client() as c:
        form = c.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token is not None
        signed = c.post("/login", data={"name": "priya", "password": "priya-password",
                                        "csrf": token.group(1), "next": target})
    assert signed.status_code == 303 and signed.headers["location"] == "/inbox"


def test_sign_in_is_throttled_and_a_disabled_account_cannot_sign_in(tmp_path: Path) -> None:
    b = make_inbox(tmp_path)
    b.serve()
    try:
        with b.client() as c:
            for _ in range(5):
                assert login(c, "kiran", "wrong password").status_code == 401
            blocked = login(c, "kiran", "kiran-password")
            assert blocked.status_code == 429 and "too many failed sign-ins" in alert(blocked)
            assert login(c, "priya", "priya-password").status_code == 303
            assert c.get("/inbox").status_code == 200
            from fsm import SQLiteStore
            from fsm.web.accounts import set_disabled

            store = SQLiteStore(str(b.db))
            try:
                set_disabled(store, "priya")
            finally:
                store.close()
            assert c.get("/inbox").status_code == 303   # the session stopped working
            assert login(c, "priya", "priya-password").status_code == 401
    finally:
        b.stop()


def test_sessions_expire_and_are_secure_behind_https(tmp_path: Path) -> None:
    b = make_inbox(tmp_path)
    b.serve("--public-url", "https://inbox.example", FSM_SESSION_SECONDS="5")
    try:
        with b.client() as c:
            # httpx keeps Secure cookies for https only: carry them by hand over loopback.
            form = c.get("/login")
            (pre,) = form.headers.get_list("set-cookie")
            assert "; secure" in pre.lower()
            token = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert token is not None
            signed = c.post("/login", headers={"cookie": pre.split(";")[0]}, data={
                "name": "priya", "password": "priya-password", "csrf": token.group(1)})
            (session,) = [h for h in signed.headers.get_list("set-cookie")
                          if h.startswith("fsm_session=")]
            assert "; secure" in session.lower() and "samesite=strict" in session.lower()
            cookie = session.split(";")[0]
            assert c.get("/inbox", headers={"cookie": cookie}).status_code == 200
            signed_at = time.monotonic()
            while (expired := c.get("/inbox", headers={"cookie": cookie})).status_code == 200:
                assert time.monotonic() - signed_at < 60, "the session never expired"
                time.sleep(0.25)
            assert expired.status_code == 303 and expired.headers["location"].startswith("/login")
    finally:
        b.stop()


def test_the_inbox_pages_newest_first_and_filters_by_workflow(tmp_path: Path) -> None:
    b = make_inbox(tmp_path)
    for i in range(27):
        b.start_run("B-2002", f"p{i:02d}", ago=(27 - i) * 60.0)
    b.serve()
    try:
        with b.client("priya") as c:
            first = c.get("/inbox")
            second = c.get("/inbox?page=2")
            other = c.get("/inbox?workflow=another")
            runs = c.get("/runs?status=awaiting_approval&page=2")
    finally:
        b.stop()
    order = re.findall(r'<tr data-run="(p\d\d)"', first.text)
    assert order == [f"p{i:02d}" for i in range(26, 1, -1)]        # newest first, 25 a page
    assert re.findall(r'<tr data-run="(p\d\d)"', second.text) == ["p01", "p00"]
    assert "page 1 of 2 (27 in all)" in first.text and 'href="?page=2"' in first.text
    assert "Nothing waits for a decision." in other.text
    assert re.findall(r'<tr data-run="(p\d\d)"', runs.text) == ["p01", "p00"]


def test_an_approver_approves_a_lower_amount_and_exactly_that_is_paid(box: Inbox) -> None:
    with Shop(str(box.db)) as shop:  # an order of its own: the module's runs share the shop
        shop.add_order("B-2009", "ravi", "camera-9", "camera", 900_000, 3)
    box.start_run("B-2009", "h-lower")
    aid = box.approval_id("h-lower")
    with box.client("priya") as c:
        page = c.get(f"/approvals/{aid}")
        assert 'name="amount"' in page.text and "one amount in ₹ (rupees)" in page.text
        assert "paise" not in html.unescape(page.text).split('name="amount"')[0][-400:]
        form = decision_form(c, aid)
        higher = c.post(f"/approvals/{aid}/decide", data={
            **form, "action": "approve", "note": "more", "amount": "9,500"})
        assert higher.status_code == 400 and "may only lower" in alert(higher)
        assert box.run("h-lower").status == "awaiting_approval" and box.payments("h-lower") == []
        confirm, done = approve_amount(c, aid, "6,000", "partly used")
        assert understood(confirm) == "₹6,000" and "600,000 paise" in confirm.text
        assert done.status_code == 303, done.text
    assert box.run("h-lower").status == "done"
    assert box.payments("h-lower") == [("B-2009", 600_000)]
    assert box.query("SELECT approved_args FROM approvals WHERE run_id = 'h-lower'") == [
        ('{"amount_paise":600000,"item_id":"camera-9"}',)]


def test_the_run_page_shows_a_forks_parent_and_a_parents_forks(box: Inbox) -> None:
    box.start_run("B-2001", "h-parent")
    engine, store, shop = box.engine()
    try:
        engine.fork("h-parent", at=3, new_run_id="h-fork")
    finally:
        engine.close()
        store.close()
        shop.close()
    with box.client("audrey") as c:
        fork = c.get("/runs/h-fork")
        parent = c.get("/runs/h-parent")
    assert fork.status_code == 200 and parent.status_code == 200
    assert '<td class="forked-from"><a href="/runs/h-parent">h-parent</a> at step 3' in fork.text
    assert '<span class="ok">passed</span>' in fork.text
    assert '<td class="forks"><a href="/runs/h-fork">h-fork</a></td>' in parent.text
