"""The desk in a real headless Chromium (Debian's, driven by Playwright): the handover
queue, amounts typed in rupees, the duplicate warning, the diagram's title."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import ROOT
from playwright.sync_api import Browser, Page, expect, sync_playwright
from web_server import ACCOUNTS, Inbox, make_inbox

from fsm.cli.system.doctor import chromium_path
from workflows.refund import Shop

CHROMIUM = chromium_path()  # /usr/bin/chromium, or FSM_CHROMIUM
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    b = make_inbox(tmp_path_factory.mktemp("browser-desk"))
    with Shop(str(b.db)) as shop:
        shop.add_order("B-2101", "ravi", "speaker-1", "speaker", 1_800_000, 3)
        shop.add_order("B-2102", "ravi", "tablet-1", "tablet", 2_400_000, 3)
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
    page.goto(f"{box.url}/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", ACCOUNTS[name][2])
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{box.url}/inbox")
    return page


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_person_takes_a_handed_over_run_and_closes_it_with_a_note(
        box: Inbox, browser: Browser) -> None:
    box.start_run("A-1003", "w-lamp")
    sam, priya = signed_in(browser, box, "sam"), signed_in(browser, box, "priya")
    expect(sam.locator('[data-queue="handovers"]')).to_have_text(re.compile(r"^[1-9]\d*$"))
    sam.click("header.top >> text=Handovers")
    row = sam.locator('tr[data-run="w-lamp"]')
    expect(row.locator("td.reason")).to_have_text("cannot verify")
    expect(row.locator("td.request")).to_have_text("Order A-1003: it stopped working")
    expect(row.locator("td.customer")).to_have_text("ravi")
    expect(row.locator("td.age")).to_have_text(re.compile(r"^\d+ min$"))
    expect(row.locator("td.taken-by")).to_have_text("nobody")
    row.locator("td.reason a").click()
    sam.click("button.take")
    expect(sam.locator("td.taken-by")).to_contain_text("sam")
    shot(sam, "handover-taken")
    priya.goto(f"{box.url}/handovers")
    expect(priya.locator('tr[data-run="w-lamp"] td.taken-by')).to_have_text("sam")
    priya.locator('tr[data-run="w-lamp"] td.reason a').click()
    expect(priya.locator("form.desk")).to_have_count(0)
    expect(priya.locator("main")).to_contain_text("sam took this run; they close it.")
    sam.check("input[name=outcome][value=resolved]")
    expect(sam.locator("input[name=outcome][value=resumed]")).to_have_count(0)
    sam.fill("textarea[name=note]", "phoned ravi; a new lamp is on its way")
    sam.click("button.close")
    expect(sam.locator("td.closed")).to_contain_text("resolved by sam")
    expect(sam.locator("td.closed .note")).to_have_text("phoned ravi; a new lamp is on its way")
    expect(sam.locator("ol.story li.close .sentence")).to_have_text(
        "sam resolved it outside fsm: “phoned ravi; a new lamp is on its way”")
    shot(sam, "handover-closed")
    sam.goto(f"{box.url}/handovers")
    expect(sam.locator('tr[data-run="w-lamp"]')).to_have_count(0)
    assert box.query("SELECT outcome, note, closed_by FROM handovers WHERE run_id = 'w-lamp'"
                     ) == [("resolved", "phoned ravi; a new lamp is on its way", "sam")]
    for p in (sam, priya):
        p.context.close()


def test_rupees_typed_are_approved_as_rupees_after_the_amount_is_confirmed(
        box: Inbox, browser: Browser) -> None:
    box.start_run("B-2101", "w-rupees")       # ₹18,000 asked
    page = signed_in(browser, box, "priya")
    page.goto(f"{box.url}/approvals/{box.approval_id('w-rupees')}")
    page.fill("textarea[name=note]", "the speaker was used for a month")
    page.fill("input[name=amount]", "₹1,200")
    page.click("button.approve")
    expect(page.locator("b.understood-amount")).to_have_text("₹1,200")
    expect(page.locator("p.understood")).to_contain_text("(120,000 paise) instead of the "
                                                         "₹18,000 asked")
    shot(page, "amount-confirm")
    assert box.run("w-rupees").status == "awaiting_approval" and box.payments("w-rupees") == []
    page.click("button.approve")
    expect(page.locator("b.granted-amount")).to_have_text("₹1,200")
    assert box.payments("w-rupees") == [("B-2101", 120_000)]
    page.context.close()


def test_the_second_request_for_an_order_warns_of_the_first(box: Inbox,
                                                             browser: Browser) -> None:
    box.start_run("B-2102", "w-first")
    box.start_run("B-2102", "w-again")
    page = signed_in(browser, box, "sam")       # no release limit
    expect(page.locator('tr[data-run="w-again"] .duplicate-mark')).to_have_text(
        "(also requested in run w-first)")
    page.goto(f"{box.url}/approvals/{box.approval_id('w-first')}")
    page.fill("textarea[name=note]", "checked")
    page.click("button.approve")
    expect(page.locator("p.decided")).to_contain_text("approved by sam")
    page.goto(f"{box.url}/approvals/{box.approval_id('w-again')}")
    warning = page.locator("section.duplicates")
    expect(warning).to_contain_text("order B-2102 was refunded ₹24,000 on")
    expect(warning).to_contain_text("in run w-first")
    box_top = warning.bounding_box()
    form_top = page.locator("section.decision").bounding_box()
    assert box_top is not None and form_top is not None and box_top["y"] < form_top["y"]
    shot(page, "duplicate-warning")
    page.context.close()


def test_the_diagram_is_titled_with_the_run_id(box: Inbox, browser: Browser) -> None:
    box.start_run("B-2001", "w-title-run-1")
    page = signed_in(browser, box, "audrey")
    page.goto(f"{box.url}/runs/w-title-run-1")
    expect(page.locator(".diagram svg")).to_contain_text("workflow refund — run w-title-run-1")
    expect(page.locator(".diagram svg")).not_to_contain_text("RUN")
    page.context.close()
