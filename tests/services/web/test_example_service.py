"""The example service (``examples/refund_service``), served by uvicorn on loopback and
spoken to over real HTTP: a customer's conversation starts a run, their reply goes on
with it, and its events stream as they are committed; bad requests get one line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_server import free_port, stopped

from fsm import SQLiteStore
from fsm.auditor.audit import audit
from workflows.refund.conversation import ASK_ORDER
from workflows.refund.shop import Shop

APP = Path(__file__).resolve().parents[3] / "examples" / "refund_service" / "app.py"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    db = str(tmp_path / "runs.db")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, str(APP), "--db", db, "--port", str(port),
                                "--latency", "0.05"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120  # bounds a failure only
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the service exited: {stopped(process)}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"the service did not answer: {stopped(process)}")
        time.sleep(0.1)
    yield url, db
    said = stopped(process)
    assert "Traceback" not in said, said


def _events(url: str, run_id: str, *, follow: bool = True, after: int | None = None
            ) -> list[dict[str, Any]]:
    """Read the run's event stream to its end: each event's id, kind and data."""
    headers = {"last-event-id": str(after)} if after is not None else {}
    out: list[dict[str, Any]] = []
    with httpx.stream("GET", f"{url}/runs/{run_id}/events?follow={int(follow)}",
                      headers=headers, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event: dict[str, Any] = {}
        for line in response.iter_lines():
            if not line:
                if event:
                    out.append(event)
                event = {}
                continue
            field, _, value = line.partition(": ")
            event[field] = json.loads(value) if field == "data" else value
    return out


def test_a_conversation_over_http_pays_once_and_its_events_stream_as_they_land(
        service: tuple[str, str]) -> None:
    url, db = service
    started = httpx.post(f"{url}/runs", json={
        "message": "My kettle arrived broken, please refund it", "customer": "asha"},
        timeout=120)
    assert started.status_code == 201, started.text
    run = started.json()
    assert (run["status"], run["asks"]) == ("awaiting_customer", ASK_ORDER)
    streamed: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: streamed.extend(_events(url, run["run_id"])))
    reader.start()
    replied = httpx.post(f"{url}/runs/{run['run_id']}/replies", json={"text": "A-1001"},
                         headers={"authorization": f"Bearer {run['token']}"}, timeout=120)
    assert replied.status_code == 200, replied.text
    assert (replied.json()["status"], replied.json()["state"]) == ("done", "done")
    reader.join(120)
    assert not reader.is_alive()  # the stream ended once the run stopped
    store = SQLiteStore(db)
    logged = store.events(run["run_id"])
    assert [int(e["id"]) for e in streamed] == [e.seq for e in logged]
    assert [e["event"] for e in streamed] == [e.kind for e in logged]
    assert streamed[0]["event"] == "start" and streamed[-1]["event"] == "stop"
    assert streamed[-1]["data"]["state_after"] == "done"
    assert [(p["order_id"], p["amount_paise"]) for p in Shop(db).ledger()] == [
        ("A-1001", 35_000)]
    assert audit(store, run["run_id"]).ok
    # Last-Event-ID resumes after the event named, and follow=0 ends once the log is read.
    tail = _events(url, run["run_id"], follow=False, after=int(streamed[-3]["id"]))
    assert [e["id"] for e in tail] == [e["id"] for e in streamed[-2:]]


def test_many_conversations_at_once_each_wait_for_their_customer(
        service: tuple[str, str]) -> None:
    url, _ = service

    def start(i: int) -> httpx.Response:
        return httpx.post(f"{url}/runs", json={"message": "refund please",
                                               "customer": f"c{i}"}, timeout=120)

    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(start, range(12)))
    assert [a.status_code for a in answers] == [201] * 12
    assert {a.json()["status"] for a in answers} == {"awaiting_customer"}
    assert len({a.json()["run_id"] for a in answers}) == 12


@pytest.mark.parametrize("body, line", [
    (b"not json", 'the body must be a JSON object, such as {"message": "..."}'),
    (b"[1]", "the body must be a JSON object, not list"),
    (b'{"message": "hi", "amount": 5}', "unknown field 'amount'; allowed: message, customer"),
    (b'{"message": "  "}', "'message' is required (non-empty text)"),
    (b'{"message": 5}', "'message' must be text of at most 4000 characters"),
])
def test_a_bad_start_gets_one_line_and_starts_nothing(service: tuple[str, str], body: bytes,
                                                      line: str) -> None:
    url, db = service
    answer = httpx.post(f"{url}/runs", content=body, timeout=60)
    assert (answer.status_code, answer.json()) == (400, {"error": line})
    assert SQLiteStore(db).list_runs() == []


def test_a_reply_without_the_run_s_token_is_refused_and_nothing_is_kept(
        service: tuple[str, str]) -> None:
    url, db = service
    run = httpx.post(f"{url}/runs", json={"message": "refund please", "customer": "asha"},
                     timeout=120).json()
    path = f"{url}/runs/{run['run_id']}/replies"
    missing = httpx.post(path, json={"text": "A-1001"}, timeout=60)
    assert (missing.status_code, missing.json()["error"]) == (
        403, "send the run's reply token: Authorization: Bearer TOKEN")
    wrong = httpx.post(path, json={"text": "A-1001"},
                       headers={"authorization": "Bearer nope"}, timeout=60)
    assert wrong.status_code == 403 and "the reply token is wrong" in wrong.json()["error"]
    unknown = httpx.post(f"{url}/runs/nope/replies", json={"text": "A-1001"},
                         headers={"authorization": f"Bearer {run['token']}"}, timeout=60)
    assert unknown.status_code == 404 and "'nope' not found" in unknown.json()["error"]
    assert SQLiteStore(db).replies(run["run_id"]) == []
    assert httpx.get(f"{url}/runs/{run['run_id']}", timeout=60).json()["status"] == \
        "awaiting_customer"
    bad_id = httpx.get(f"{url}/runs/{run['run_id']}/events",
                       headers={"last-event-id": "x"}, timeout=60)
    assert (bad_id.status_code, bad_id.json()["error"]) == (
        400, "Last-Event-ID must be an event's sequence number, not 'x'")
    assert httpx.get(f"{url}/runs/nope/events", timeout=60).status_code == 404
