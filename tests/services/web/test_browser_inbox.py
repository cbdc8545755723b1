"""The inbox in a real headless Chromium (Debian's, driven by Playwright; never downloaded).

Screenshots of each page are kept in ``test-artifacts/browser/`` (git-ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import ROOT
from playwright.sync_api import Browser, Page, expect, sync_playwright
from web_server import ACCOUNTS, Inbox, make_inbox

from fsm.cli.system.doctor import chromium_path

CHROMIUM = chromium_path()  # /usr/bin/chromium, or FSM_CHROMIUM
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
# The machine running the tests may be busy: give pages time before an assertion fails.
expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    b = make_inbox(tmp_path_factory.mktemp("browser"))
    b.serve()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}: make system installs " \
        "Debian's, or set FSM_CHROMIUM (see make doctor)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def signed_in(browser: Browser, box: Inbox, name: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{box.url}/inbox")
    expect(page).to_have_url(re.compile(r"/login\?next=/inbox$"))
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", ACCOUNTS[name][2])
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{box.url}/inbox")
    return page


def shot(page: Page, name: str, *, full: bool = True) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full)


def open_request(page: Page, box: Inbox, summary: str) -> None:
    page.goto(f"{box.url}/inbox")
    page.get_by_role("link", name=summary).click()
    expect(page.locator("h1.summary")).to_have_text(summary)


def test_an_approver_finds_the_large_refund_checks_it_approves_and_it_is_paid_once(
        box: Inbox, browser: Browser) -> None:
    run = box.start_run("B-2001", "b-approve")
    page = signed_in(browser, box, "priya")
    summary = "refund ₹12,000 for the headphones of order B-2001"
    row = page.locator('tr[data-run="b-approve"]')
    expect(row).to_contain_text(summary)
    expect(row).to_contain_text("ravi")
    expect(row.locator("td.left")).to_have_text(re.compile(r"^2 d 23 h$"))
    shot(page, "inbox")
    open_request(page, box, summary)
    expect(page.locator("td.amount")).to_have_text("₹12,000")
    args = page.locator("pre.args").inner_text()
    assert '"amount_paise": 1200000' in args and '"item_id": "headphones-2"' in args
    expect(page.locator("td.version")).to_have_text(str(run.version))
    approval = box.query("SELECT args_hash FROM approvals WHERE run_id = 'b-approve'")[0][0]
    expect(page.locator("code.hash")).to_have_text(approval)
    shot(page, "approval", full=False)
    shot(page, "approval-full")
    page.fill("textarea[name=note]", "receipt and photos checked")
    page.click("button.approve")
    expect(page.locator("p.decided")).to_contain_text("approved by priya")
    expect(page.locator("b.status")).to_have_text("done")
    shot(page, "approved")
    assert box.payments("b-approve") == [("B-2001", 1_200_000)]
    page.goto(f"{box.url}/runs/b-approve")
    expect(page.locator("td.path")).to_have_text(
        "collecting → verifying → deciding → awaiting_approval → refunding → replying → done")
    expect(page.locator("td.reviewer")).to_have_text("priya")
    expect(page.locator("td.note")).to_have_text("receipt and photos checked")
    page.context.close()


def test_a_denial_reaches_the_customer(box: Inbox, browser: Browser) -> None:
    box.start_run("B-2002", "b-deny")
    page = signed_in(browser, box, "priya")
    open_request(page, box, "refund ₹9,000 for the camera of order B-2002")
    page.fill("textarea[name=note]", "the camera was dropped")
    page.click("button.deny")
    expect(page.locator("p.decided")).to_contain_text("denied by priya")
    reply = "We are sorry: after review we cannot refund the camera."
    expect(page.locator("ol.transcript")).to_contain_text(reply)
    shot(page, "denied")
    assert box.payments("b-deny") == []
    sent = box.query("SELECT customer, text FROM shop_outbox WHERE idempotency_key LIKE 'b-deny:%'")
    assert len(sent) == 1 and sent[0][0] == "meena" and sent[0][1].startswith(reply)
    page.context.close()


def test_an_approver_over_their_limit_is_refused(box: Inbox, browser: Browser) -> None:
    run = box.start_run("B-2002", "b-limit")
    page = signed_in(browser, box, "kiran")
    page.goto(f"{box.url}/approvals/{box.approval_id('b-limit')}")
    expect(page.locator("p.limit")).to_contain_text("above your release limit of ₹1,000")
    # A lower amount within the limit could be approved, so Approve stays; the amount asked
    # is refused by the server.
    expect(page.locator("p.limit")).to_contain_text("or approve a lower amount within your "
                                                    "limit")
    page.fill("textarea[name=note]", "looks fine")
    page.click("button.approve")
    expect(page.get_by_role("alert")).to_contain_text("₹9,000 is above your release limit")
    shot(page, "refused-limit")
    assert box.run("b-limit").version == run.version and box.payments("b-limit") == []
    page.context.close()


def test_an_auditor_sees_no_buttons(box: Inbox, browser: Browser) -> None:
    box.start_run("B-2003", "b-auditor")
    page = signed_in(browser, box, "audrey")
    open_request(page, box, "refund ₹25,000 for the phone of order B-2003")
    expect(page.locator("p.readonly")).to_be_visible()
    expect(page.locator("button.approve")).to_have_count(0)
    expect(page.locator("button.deny")).to_have_count(0)
    expect(page.locator("form.decide")).to_have_count(0)
    shot(page, "auditor")
    page.goto(f"{box.url}/runs/b-auditor")
    expect(page.locator("td.audit")).to_contain_text("passed")
    expect(page.locator(".diagram svg")).to_have_count(1)
    page.context.close()


def test_a_stale_page_is_refused_after_the_run_moved_on(box: Inbox, browser: Browser) -> None:
    box.start_run("B-2002", "b-stale")
    page = signed_in(browser, box, "priya")
    page.goto(f"{box.url}/approvals/{box.approval_id('b-stale')}")
    engine, store, shop = box.engine()
    try:   # meanwhile somebody denies it from the command line
        engine.decide("b-stale", False, "operator", "customer withdrew the claim")
    finally:
        store.close()
        shop.close()
    page.fill("textarea[name=note]", "approving from an old page")
    page.click("button.approve")
    expect(page.get_by_role("alert")).to_contain_text("already denied by operator")
    shot(page, "refused-stale")
    assert box.payments("b-stale") == []
    page.goto(f"{box.url}/runs/b-stale")
    expect(page.locator("table.refusals td.code")).to_have_text("decided")
    page.context.close()


def test_two_reviewers_in_two_browsers_at_once_exactly_one_wins(
        box: Inbox, browser: Browser) -> None:
    box.start_run("B-2002", "b-race")
    aid = box.approval_id("b-race")
    pages = [signed_in(browser, box, "priya"), signed_in(browser, box, "sam")]
    for p, name in zip(pages, ["priya", "sam"], strict=True):
        p.goto(f"{box.url}/approvals/{aid}")
        p.fill("textarea[name=note]", f"{name} checked it")
    # Sam's click is queued in his browser; Priya clicks at once: both are in flight together.
    pages[1].evaluate("setTimeout(() => document.querySelector('button.approve').click(), 0)")
    pages[0].click("button.approve")
    for p in pages:
        p.wait_for_load_state()
        expect(p.locator("p.decided, [role=alert]").first).to_be_visible()
    won = [p for p in pages if p.locator("p.ok[role=status]").count() == 1]
    lost = [p for p in pages if p.get_by_role("alert").count() == 1]
    assert len(won) == 1 and len(lost) == 1
    assert box.query("SELECT COUNT(*) FROM events WHERE run_id = 'b-race' AND kind = 'decision'"
                     ) == [(1,)]
    assert box.payments("b-race") == [("B-2002", 900_000)]
    for p in pages:
        p.context.close()
