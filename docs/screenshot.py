"""The approval page's picture in the docs, taken from the real page.

``python docs/screenshot.py -o docs/approval-page.png`` (``make screenshot``) makes a
fresh SQLite database, adds an approver, starts a refund of the demo shop that waits for
a person (``fsm run refund``), serves it with ``fsm serve`` on a free loopback port, signs
in with Debian's Chromium driven by Playwright (never a downloaded browser) and saves
the approval page as the approver sees it. Nothing but loopback is reached.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
APPROVER, PASSWORD = "priya", "priya-password"
GOAL = "Order A-1002: the headphones stopped working"
VIEWPORT = {"width": 1280, "height": 900}


def fsm(db: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          input=stdin, capture_output=True, text=True, timeout=120,
                          env=_env(), check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: fsm {' '.join(args)} exited {done.returncode}: "
                         f"{done.stderr.strip()}")
    return done.stdout


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "OPENAI_"))}
    env["FSM_WEB_SECRET"] = "screenshot"
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(db: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "fsm", "serve", "--db", str(db),
                                "--port", str(port)], env=_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"error: fsm serve exited {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as r:
                if r.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.1)
    process.terminate()
    raise SystemExit("error: fsm serve did not answer within 30 s")


def _asks(db: Path) -> str:
    """What the waiting run asks, in the workflow's words (the inbox's link text)."""
    import json

    return str(json.loads(fsm(db, "approvals", "--json"))[0]["asks"])


def take(url: str, summary: str, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from fsm.cli.system.doctor import chromium_path

    chromium = chromium_path()
    if not Path(chromium).exists():
        raise SystemExit(f"error: no Chromium at {chromium}: run make system (Debian's "
                         "chromium), or set FSM_CHROMIUM (see make doctor)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.goto(f"{url}/login?next=/inbox")
            page.fill("input[name=name]", APPROVER)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.get_by_role("link", name=summary).click()
            expect(page.locator("h1.summary")).to_have_text(summary, timeout=20_000)
            page.screenshot(path=str(out), full_page=False)
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "inbox.db"
        fsm(db, "users", "add", APPROVER, "--role", "approver", "--limit", "15000",
            "--workflow", "refund",
            "--password-stdin", stdin=PASSWORD + "\n")
        fsm(db, "run", "refund", GOAL, "--user", "ravi", "--run-id", "r-headphones")
        process, url = serve(db)
        try:
            take(url, _asks(db), args.output)
        finally:
            process.terminate()
            process.wait(timeout=10)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
