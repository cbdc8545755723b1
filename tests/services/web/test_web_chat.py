"""The chat endpoint of ``fsm serve`` over real HTTP on loopback: a customer's front end
reads the conversation and replies with the run's token; every refused request is a 4xx
naming the problem, and changes nothing."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_server import Inbox, make_inbox

from fsm import Engine, SQLiteStore
from fsm.records.conversation import REPLY_MAX
from workflows.refund import Shop

SUPPORT = str(Path(__file__).resolve().parents[2] / "support")


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    where = tmp_path_factory.mktemp("chat")
    b = make_inbox(where)
    b.env = {"PYTHONPATH": os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
             "CHAT_LEDGER": str(where / "ledger.jsonl")}
    b.serve()
    yield b
    b.stop()


def ledger(box: Inbox) -> list[dict[str, Any]]:
    path = Path(box.env["CHAT_LEDGER"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def start(box: Inbox, run_id: str, workflow: str = "WORKFLOW") -> str:
    """A run of the chat desk that asks its customer for the order; its reply token."""
    import chat_desk

    spec = getattr(chat_desk, workflow)
    with SQLiteStore(str(box.db)) as store:
        engine = Engine(spec, store, chat_desk.clerk)
        chat = engine.start_conversation(
            "I want to cancel an order", user="asha", run_id=run_id,
            meta={"workflow_ref": f"chat_desk:{workflow}", "policy": "chat_desk:clerk"})
    assert chat.run.status == "awaiting_customer"
    return chat.token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def say(c: httpx.Client, run_id: str, token: str | None, text: Any, **more: Any) -> Any:
    headers = bearer(token) if token is not None else {}
    return c.post(f"/chat/{run_id}/replies", json={"text": text, **more}, headers=headers)


def state(box: Inbox, run_id: str) -> tuple[int, int, str]:
    """(replies kept, run version, status): what a refused request must leave as it was."""
    with SQLiteStore(str(box.db)) as store:
        run = store.load_run(run_id)
        return len(store.replies(run_id)), run.version, run.status


def test_a_front_end_talks_with_the_run_through_its_token(box: Inbox) -> None:
    token = start(box, "c-ok")
    with box.client() as c:
        seen = c.get("/chat/c-ok", headers=bearer(token))
        assert seen.status_code == 200, seen.text
        data = seen.json()
        assert data["waiting"] and data["status"] == "awaiting_customer"
        assert [m["by"] for m in data["messages"]] == ["customer", "agent"]
        assert data["asked"]["message"].startswith("Which order would you like to cancel?")
        answered = say(c, "c-ok", token, "It is A-1001", asked=data["asked"]["hash"])
        assert answered.status_code == 202, answered.text
        after = answered.json()
        assert (after["reply"], after["read"], after["state"]) == (1, True, "confirming")
        proposal = after["asked"]
        assert proposal["confirm"] == {"tool": "cancel_order",
                                       "args": {"order_id": "A-1001",
                                                "reason": "no longer needed"}}
        assert ledger(box) == []
        done = say(c, "c-ok", token, "yes", asked=proposal["hash"])
        assert done.status_code == 202, done.text
        assert done.json()["status"] == "done" and not done.json()["waiting"]
    assert [e["order_id"] for e in ledger(box)] == ["A-1001"]
    assert box.query("SELECT seq, body FROM replies WHERE run_id = 'c-ok' ORDER BY seq") == [
        (1, "It is A-1001"), (2, "yes")]


def test_the_run_page_shows_the_conversation(box: Inbox) -> None:
    start(box, "c-page")
    with box.client("audrey") as c:
        page = c.get("/runs/c-page")
    assert page.status_code == 200
    assert "Conversation with the customer" in page.text
    assert "Waiting for the customer's reply" in page.text
    assert "Which order would you like to cancel?" in page.text
    assert "A reply token was given out when the run started" in page.text


@pytest.mark.parametrize("headers, body, raw, status, code", [
    ({}, {"text": "A-1001"}, None, 401, "no_token"),
    ({"Authorization": "Basic dXNlcjpwdw=="}, {"text": "A-1001"}, None, 401, "no_token"),
    ("wrong", {"text": "A-1001"}, None, 403, "token"),
    ("other-run", {"text": "A-1001"}, None, 403, "token"),
    ("ok", {"text": ""}, None, 400, "empty"),
    ("ok", {"text": "  \n "}, None, 400, "empty"),
    ("ok", {"text": "\u200b\u2060\ufeff"}, None, 400, "empty"),
    ("ok", {"text": "x" * (REPLY_MAX + 1)}, None, 413, "too_long"),
    ("ok", {"text": "yes\u0000"}, None, 400, "nul"),
    ("ok", None, b'{"text": "caf\xe9"}', 400, "not_text"),
    ("ok", None, b'{"text": "yes"', 400, "body"),
    ("ok", {"say": "yes"}, None, 400, "body"),
    ("ok", {"text": 5}, None, 400, "body"),
    ("ok", {"text": "yes", "asked": "0" * 64}, None, 409, "stale"),
    ("ok", None, b"x" * 60_000, 413, "too_long"),
], ids=["no-token", "not-bearer", "wrong-token", "another-runs-token", "empty", "blank",
        "zero-width", "too-long", "nul", "not-utf8", "not-json", "no-text",
        "text-not-a-string", "stale", "huge-body"])
def test_a_refused_reply_is_a_4xx_naming_the_problem_and_changes_nothing(
        box: Inbox, headers: Any, body: Any, raw: bytes | None, status: int,
        code: str) -> None:
    run_id = f"c-bad-{code}-{status}-{len(str(body))}-{len(raw or b'')}-{len(str(headers))}"
    token = start(box, run_id)
    other = start(box, run_id + "-other")
    if headers == "ok":
        headers = bearer(token)
    elif headers == "wrong":
        headers = bearer(token[:-2] + "xx")
    elif headers == "other-run":
        headers = bearer(other)
    before = state(box, run_id)
    with box.client() as c:
        if raw is not None:
            resp = c.post(f"/chat/{run_id}/replies", content=raw,
                          headers={**headers, "Content-Type": "application/json"})
        else:
            resp = c.post(f"/chat/{run_id}/replies", json=body, headers=headers)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == code and resp.json()["message"]
    assert state(box, run_id) == before
    refused = box.query("SELECT action, code FROM web_refusals WHERE run_id = ?", run_id)
    assert refused == [("reply", code)]


def test_requests_that_reach_no_run_are_refused(box: Inbox) -> None:
    token = start(box, "c-media")
    with box.client() as c:
        unknown = say(c, "no-such-run", token, "hello")
        assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_run"
        read = c.get("/chat/no-such-run", headers=bearer(token))
        assert read.status_code == 404
        plain = c.post("/chat/c-media/replies", content=b"A-1001",
                       headers={**bearer(token), "Content-Type": "text/plain"})
        assert plain.status_code == 415 and plain.json()["error"] == "media"
        nobody = c.get("/chat/c-media")
        assert nobody.status_code == 401 and nobody.headers["www-authenticate"] == "Bearer"
        assert "messages" not in nobody.json()  # nothing of the conversation is shown
    assert state(box, "c-media")[0] == 0


def test_replies_to_finished_waiting_for_a_person_and_silent_runs_are_refused(
        box: Inbox) -> None:
    token = start(box, "c-fin")
    approved = start(box, "c-person", "APPROVED")
    with box.client() as c:
        assert say(c, "c-fin", token, "A-1001").status_code == 202
        assert say(c, "c-fin", token, "no, thanks").json()["status"] == "done"
        late = say(c, "c-fin", token, "bye")
        assert late.status_code == 409 and late.json()["error"] == "finished"
        assert "has finished (done)" in late.json()["message"]
        assert say(c, "c-person", approved, "A-1001").status_code == 202
        waiting = say(c, "c-person", approved, "yes")
        assert waiting.json()["status"] == "awaiting_approval"
        person = say(c, "c-person", approved, "any news?")
        assert person.status_code == 409 and person.json()["error"] == "not_waiting"
        assert "waits for a person's decision" in person.json()["message"]
    box.start_run("B-2001", "h-refund")  # a refund run: no conversation, no token
    with box.client() as c:
        refund = say(c, "h-refund", token, "hello?")
        assert refund.status_code == 403
    assert state(box, "c-fin")[0] == 2 and state(box, "c-person")[0] == 2


def test_two_replies_sent_at_once_both_arrive(box: Inbox) -> None:
    token = start(box, "c-two")
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def send(text: str) -> None:
        with box.client() as c:
            barrier.wait()
            codes.append(say(c, "c-two", token, text).status_code)

    threads = [threading.Thread(target=send, args=(t,)) for t in ("A-1001", "the kettle")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [202, 202]
    rows = box.query("SELECT seq, body FROM replies WHERE run_id = 'c-two' ORDER BY seq")
    assert sorted(body for _, body in rows) == ["A-1001", "the kettle"]
    assert [seq for seq, _ in rows] == [1, 2]


def test_the_shop_of_the_inbox_is_untouched_by_conversations(box: Inbox) -> None:
    with Shop(str(box.db)) as shop:
        assert shop.order("B-2001") is not None


def test_bad_token_replies_are_rate_limited_and_counted_not_kept_one_row_each(
        tmp_path: Path) -> None:
    """300 replies with made-up tokens: a handful of rows in ``web_refusals``, the rest
    refused with 429 and counted; the run's own token still gets its reply through."""
    b = make_inbox(tmp_path)
    b.env = {"PYTHONPATH": os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
             "CHAT_LEDGER": str(tmp_path / "ledger.jsonl")}
    token = start(b, "c-flood")
    b.serve()
    try:
        with b.client() as c:
            codes = [say(c, "c-flood", f"made-up-{i}", "yes").status_code for i in range(300)]
            answered = say(c, "c-flood", token, "It is A-1001")
            assert answered.status_code == 202, answered.text
    finally:
        b.stop()
    rows = b.query("SELECT code FROM web_refusals WHERE run_id = 'c-flood'")
    assert 1 <= len(rows) <= 5 and {r[0] for r in rows} == {"token"}
    assert codes.count(403) == len(rows) and codes.count(429) == 300 - len(rows)
    assert b.query("SELECT COUNT(*) FROM web_refusals")[0][0] == len(rows)
    assert state(b, "c-flood")[0] == 1
