"""The notification outbox delivered to a local HTTP receiver: signed as Standard Webhooks
sign, retried with backoff and jitter through every kind of failure, deduplicated by id."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import struct
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
from fsm.web.webhooks import new_secret, verify

SECRET, OTHER = new_secret(), new_secret()


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


def signed(headers: dict[str, str], body: bytes, secret: str, now: float | None = None) -> bool:
    return verify(secret, headers, body, now=time.time() if now is None else now) is None


def test_a_pause_is_delivered_signed_and_retried_with_the_same_key(
        tmp_path: Path, receiver: Receiver) -> None:
    box = make_inbox(tmp_path)
    box.start_run("B-2001", "n1")
    aid = box.approval_id("n1")
    store = SQLiteStore(str(box.db))
    now = [time.time()]
    try:
        notifier = Notifier(store, urls=[receiver.url], secret=SECRET,
                            public_url="https://inbox.example", clock=lambda: now[0],
                            base_delay=30)
        assert notifier.deliver_due() == 1
        (row,) = store.notifications(run_id="n1")
        assert (row.status, row.attempts) == ("pending", 1) and "HTTP Error 500" in str(
            row.last_error)
        assert now[0] + 15 <= row.next_attempt_at <= now[0] + 30  # 30 s, less a random half
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
    stamps = []
    for headers, body in receiver.received:
        assert headers["webhook-id"] == f"{aid}:waiting"  # the same on the retry
        stamps.append(int(headers["webhook-timestamp"]))
        at = float(headers["webhook-timestamp"])
        assert signed(headers, body, SECRET, at) and not signed(headers, body, OTHER, at)
    assert stamps[1] - stamps[0] >= 31  # each attempt is signed at its own time


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
        notifier = Notifier(store, urls=[dead.url], secret=SECRET, clock=lambda: now[0],
                            base_delay=1, max_attempts=3)
        for _ in range(5):
            notifier.deliver_due()
            now[0] += 10
        rows = store.notifications(run_id="n2")
        # The pause, its expiry, and the handover the expiry led to (it waits at the desk).
        assert sorted(n.kind for n in rows) == ["expired", "waiting", "waiting"]
        assert [(n.status, n.attempts) for n in rows] == [("failed", 3)] * 3
    finally:
        store.close()
        dead.close()
    assert sorted({b["kind"] for b in dead.bodies()}) == ["expired", "waiting"]
    assert [b["reason"] for b in dead.bodies() if "handover_id" in b][:1] == [
        "expired: nobody decided in time"]
    assert len(dead.received) == 9


def test_fsm_serve_delivers_in_the_background_and_the_inbox_shows_the_state(
        tmp_path: Path, receiver: Receiver) -> None:
    box: Inbox = make_inbox(tmp_path)
    box.start_run("B-2001", "n3")
    aid = box.approval_id("n3")
    box.serve(FSM_NOTIFY_URL=receiver.url, FSM_NOTIFY_SECRET=SECRET,
              FSM_NOTIFY_BACKOFF="0.2")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(receiver.received) < 2:
            time.sleep(0.1)
        assert len(receiver.received) == 2           # a 500, then delivered
        headers, body = receiver.received[-1]
        assert signed(headers, body, SECRET)
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


# -- a receiver that fails in every way a network can ------------------------------------------

class Flaky:
    """A webhook receiver on one loopback port whose ``mode`` says how it fails: ``down``
    (nothing listens: refused), ``garbage`` (an answer that is not HTTP), ``reset`` (the
    connection is reset), ``hang`` (never answers: a timeout), ``ok`` (verifies the
    signature, answers 204 and keeps the delivery)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.mode = "down"
        self.delivered: list[tuple[dict[str, str], bytes]] = []
        self.refused: list[str] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._hung: list[socket.socket] = []

    def switch(self, mode: str) -> None:
        self.mode = mode
        if mode == "down":
            self._close_listener()
        elif self._listener is None:
            self._listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
            self._listener.settimeout(0.1)
            self._thread = threading.Thread(target=self._serve, args=(self._listener,),
                                            daemon=True)
            self._thread.start()

    def _serve(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        mode = self.mode
        if mode == "hang":
            self._hung.append(conn)  # held open, never answered
            return
        with conn:
            conn.settimeout(5)
            head, body = _read_request(conn)
            if mode == "garbage":
                conn.sendall(b"this is not HTTP at all\r\n\r\n")
            elif mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                problem = verify(SECRET, head, body, now=time.time())
                if problem is None:
                    self.delivered.append((head, body))
                else:
                    self.refused.append(problem)
                status = b"204 No Content" if problem is None else b"401 Unauthorized"
                conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._thread is not None:
            self._thread.join()
        for conn in self._hung:
            conn.close()
        self._hung.clear()

    def close(self) -> None:
        self._close_listener()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_request(conn: socket.socket) -> tuple[dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    raw, _, body = data.partition(b"\r\n\r\n")
    head = {}
    for line in raw.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        head[name.strip().lower()] = value.strip()
    while len(body) < int(head.get("content-length", "0")):
        body += conn.recv(65536)
    return head, body


def test_the_loop_survives_every_kind_of_failure_and_delivers_everything_once_it_recovers(
        tmp_path: Path) -> None:
    box = make_inbox(tmp_path)
    for run_id, order in (("w1", "B-2001"), ("w2", "B-2002")):
        box.start_run(order, run_id)
    flaky = Flaky()
    store = SQLiteStore(str(box.db))
    said: list[str] = []
    notifier = Notifier(store, urls=[flaky.url], secret=SECRET, base_delay=0.02,
                        max_delay=0.1, max_attempts=10_000, timeout=0.3, log=said.append)
    thread, stop = notifier.start(interval=0.02)
    try:
        for mode, error in (("down", "Connection refused"), ("garbage", "BadStatusLine"),
                            ("reset", "Connection reset"), ("hang", "timed out")):
            flaky.switch(mode)
            box.start_run("B-2003", f"w-{mode}")  # a pause while the receiver fails
            wait_until(f"an attempt to fail with {error!r}", lambda error=error: all(
                error in (n.last_error or "") for n in store.notifications(run_id="w1")))
            assert thread.is_alive()
        attempts = {n.key: n.attempts for n in _all(store)}
        assert all(n.status == "pending" for n in _all(store))
        flaky.switch("ok")
        wait_until("every pending notification to be delivered", lambda: all(
            n.status == "delivered" for n in _all(store)))
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)
        flaky.close()
        store.close()
    keys = {n.key for n in _all_from(box)}
    assert len(keys) == 6 and {h["webhook-id"] for h, _ in flaky.delivered} == keys
    assert flaky.refused == []
    assert all(attempts[k] >= 4 for k in attempts if k.startswith(box.approval_id("w1")))
    assert said == []  # failed attempts are rows, not log lines


def _all(store: SQLiteStore) -> list[Any]:
    return [n for r in store.list_runs() for n in store.notifications(run_id=r.run_id)]


def _all_from(box: Inbox) -> list[Any]:
    with SQLiteStore(str(box.db)) as store:
        return _all(store)


def wait_until(what: str, cond: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


def test_the_backoff_doubles_takes_off_a_random_half_and_honours_retry_after(
        tmp_path: Path) -> None:
    import random

    with SQLiteStore(str(tmp_path / "b.db")) as store:
        notifier = Notifier(store, urls=[], secret=SECRET, base_delay=2, max_delay=60,
                            rng=random.Random(7))
        for attempts, full in ((1, 2), (2, 4), (3, 8), (6, 60), (40, 60), (10**6, 60)):
            delays = [notifier.backoff(attempts) for _ in range(200)]
            assert all(full / 2 <= d <= full for d in delays)
            assert len(set(delays)) > 150  # spread out, not one moment for everyone
        assert notifier.backoff(1, asked=30) == 30
        assert notifier.backoff(1, asked=10**6) == 60


def test_a_captured_delivery_cannot_be_replayed_later_nor_changed(tmp_path: Path) -> None:
    receiver = Receiver()
    box = make_inbox(tmp_path)
    box.start_run("B-2001", "r1")
    try:
        with SQLiteStore(str(box.db)) as store:
            assert Notifier(store, urls=[receiver.url], secret=f"{SECRET} {OTHER}").deliver_due()
    finally:
        receiver.close()
    (headers, body), = receiver.received
    at = int(headers["webhook-timestamp"])
    assert abs(at - time.time()) < 60
    assert headers["webhook-signature"].count("v1,") == 2  # both secrets sign while rotating
    assert verify(SECRET, headers, body, now=at + 299) is None
    assert verify(OTHER, headers, body, now=at) is None
    later = verify(SECRET, headers, body, now=at + 600)
    assert later is not None and "replayed" in later
    assert "no v1 signature" in str(verify(SECRET, headers, body.replace(b"r1", b"r2"), now=at))
    assert "no v1 signature" in str(verify(
        SECRET, {**headers, "webhook-timestamp": str(at + 600)}, body, now=at + 600))
    assert "no v1 signature" in str(verify(new_secret(), headers, body, now=at))
    assert "missing" in str(verify(SECRET, {}, body, now=at))


@pytest.mark.parametrize("secret, says", [
    pytest.param("plain-secret", "does not start with whsec_", id="no-prefix"),
    pytest.param("whsec_%%%", "must be base64", id="not-base64"),
    pytest.param("whsec_c2hvcnQ=", "24 to 64 random bytes, and this one holds 5", id="short"),
])
def test_serve_refuses_a_secret_not_in_the_standard_form(tmp_path: Path, secret: str,
                                                         says: str) -> None:
    env = {**os.environ, "FSM_NOTIFY_URL": "http://127.0.0.1:9/hook", "FSM_NOTIFY_SECRET": secret}
    proc = subprocess.run([sys.executable, "-m", "fsm", "serve", "--db", str(tmp_path / "x.db"),
                           "--port", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: FSM_NOTIFY_SECRET: ") and says in line
    assert secret not in line.removeprefix("error: FSM_NOTIFY_SECRET: ")
    assert "python -m fsm.web.webhooks" in line


def test_a_new_secret_is_printed_in_the_standard_form() -> None:
    out = subprocess.run([sys.executable, "-m", "fsm.web.webhooks"], capture_output=True,
                         text=True, timeout=60, check=True).stdout.strip()
    from fsm.web.webhooks import secret_key

    assert out.startswith("whsec_") and len(secret_key(out)) == 32


def test_a_damaged_notification_row_is_said_once_and_the_others_are_delivered(
        tmp_path: Path) -> None:
    receiver = Receiver()
    box = make_inbox(tmp_path)
    box.start_run("B-2001", "d1")
    box.start_run("B-2002", "d2")
    con = sqlite3.connect(box.db)
    with con:
        con.execute("UPDATE notifications SET created_at = 'yesterday' WHERE run_id = 'd1'")
    con.close()
    said: list[str] = []
    try:
        with SQLiteStore(str(box.db)) as store:
            notifier = Notifier(store, urls=[receiver.url], secret=SECRET, log=said.append)
            for _ in range(3):
                notifier.deliver_due()
            assert [n.status for n in store.notifications(run_id="d2")] == ["delivered"]
    finally:
        receiver.close()
    assert [b["run_id"] for b in receiver.bodies()] == ["d2"]
    (line,) = said
    assert "a row of run 'd1' in table 'notifications' is damaged" in line
