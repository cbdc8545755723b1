"""The notification outbox delivered to a local HTTP receiver: signed, retried, deduplicated."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from web_server import Inbox, make_inbox

from fsm import SQLiteStore
from fsm.web.notify import Notifier


class Receiver:
    """A webhook receiver on loopback that fails the first ``failures`` requests."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                failing = len(receiver.received) <= receiver.failures
                self.send_response(500 if failing else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(failures=1)
    yield r
    r.close()


def signed(headers: dict[str, str], body: bytes, secret: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-fsm-signature"], expected)


def test_a_pause_is_delivered_signed_and_retried_with_the_same_key(
        tmp_path: Path, receiver: Receiver) -> None:
    box = make_inbox(tmp_path)
    box.start_run("B-2001", "n1")
    aid = box.approval_id("n1")
    store = SQLiteStore(str(box.db))
    now = [time.time()]
    try:
        notifier = Notifier(store, urls=[receiver.url], secret="hook-secret",
                            public_url="https://inbox.example", clock=lambda: now[0],
                            base_delay=30)
        assert notifier.deliver_due() == 1
        (row,) = store.notifications(run_id="n1")
        assert (row.status, row.attempts) == ("pending", 1) and "HTTP Error 500" in str(
            row.last_error)
        assert row.next_attempt_at == pytest.approx(now[0] + 30)
        assert notifier.deliver_due() == 0          # not due yet: backoff
        now[0] += 31
        assert notifier.deliver_due() == 1
        (row,) = store.notifications(run_id="n1")
        assert (row.status, row.attempts, row.last_error) == ("delivered", 2, None)
        assert notifier.deliver_due() == 0          # delivered rows are not sent again
    finally:
        store.close()
    assert len(receiver.received) == 2
    first, second = receiver.bodies()
    assert first == second
    assert first["key"] == f"{aid}:waiting" and first["kind"] == "waiting"
    assert first["asked"] == "refund ₹12,000 for the headphones of order B-2001"
    assert first["inbox_url"] == f"https://inbox.example/approvals/{aid}"
    assert (first["run_id"], first["approval_id"], first["amount"], first["customer"]) == (
        "n1", aid, 1_200_000, "ravi")
    for headers, body in receiver.received:
        assert headers["x-fsm-key"] == f"{aid}:waiting"
        assert signed(headers, body, "hook-secret") and not signed(headers, body, "other")


def test_delivery_gives_up_after_the_last_attempt_and_an_expiry_is_notified_too(
        tmp_path: Path) -> None:
    dead = Receiver(failures=100)
    box = make_inbox(tmp_path)
    box.start_run("B-2002", "n2", ago=73 * 3600)
    store = SQLiteStore(str(box.db))
    now = [time.time()]
    try:
        engine, s2, shop = box.engine()
        try:
            assert engine.sweep() == ["n2"]
        finally:
            s2.close()
            shop.close()
        notifier = Notifier(store, urls=[dead.url], secret="s", clock=lambda: now[0],
                            base_delay=1, max_attempts=3)
        for _ in range(5):
            notifier.deliver_due()
            now[0] += 10
        rows = {n.kind: n for n in store.notifications(run_id="n2")}
        assert set(rows) == {"waiting", "expired"}
        assert [(n.status, n.attempts) for n in rows.values()] == [("failed", 3)] * 2
    finally:
        store.close()
        dead.close()
    assert sorted({b["kind"] for b in dead.bodies()}) == ["expired", "waiting"]
    assert len(dead.received) == 6


def test_fsm_serve_delivers_in_the_background_and_the_inbox_shows_the_state(
        tmp_path: Path, receiver: Receiver) -> None:
    box: Inbox = make_inbox(tmp_path)
    box.start_run("B-2001", "n3")
    aid = box.approval_id("n3")
    box.serve(FSM_NOTIFY_URL=receiver.url, FSM_NOTIFY_SECRET="serve-secret",
              FSM_NOTIFY_BACKOFF="0.2")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(receiver.received) < 2:
            time.sleep(0.1)
        assert len(receiver.received) == 2           # a 500, then delivered
        headers, body = receiver.received[-1]
        assert signed(headers, body, "serve-secret")
        assert json.loads(body)["inbox_url"] == f"{box.url}/approvals/{aid}"
        while time.monotonic() < deadline and box.query(
                "SELECT status FROM notifications WHERE run_id = 'n3'") != [("delivered",)]:
            time.sleep(0.1)
        with box.client("priya") as c:
            row = c.get("/inbox").text.split(f'data-approval="{aid}"')[1].split("</tr>")[0]
        assert '<td class="delivery">delivered</td>' in row
    finally:
        box.stop()


def test_serve_refuses_webhooks_without_a_secret(tmp_path: Path) -> None:
    env = {**os.environ, "FSM_NOTIFY_URL": "http://127.0.0.1:9/hook"}
    env.pop("FSM_NOTIFY_SECRET", None)
    proc = subprocess.run([sys.executable, "-m", "fsm", "serve", "--db", str(tmp_path / "x.db"),
                           "--port", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("error: FSM_NOTIFY_URL is set but FSM_NOTIFY_SECRET is not: "
                                   "webhooks are signed; set a secret the receivers know")
