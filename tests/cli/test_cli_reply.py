"""``fsm reply``: a conversation on the command line, and the replies it refuses."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_inproc import Cli, error_line

from fsm.store import SQLiteStore

RUN = ["run", "chat_desk:WORKFLOW", "I want to cancel an order", "--user", "asha",
       "--policy", "chat_desk:clerk", "--run-id", "c1"]


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("CHAT_LEDGER", str(path))
    return path


def cancelled(ledger: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()] \
        if ledger.exists() else []


def kept(tmp_path: Path) -> tuple[int, int]:
    """(replies kept, run version) of run c1."""
    with SQLiteStore(str(tmp_path / "fsm.db")) as store:
        return len(store.replies("c1")), store.load_run("c1").version


def test_a_conversation_on_the_command_line(cli: Cli, ledger: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    started = cli(*RUN)
    assert started.code == 0, started
    lines = started.out.splitlines()
    assert lines[0].startswith("token    ") and "shown only now" in lines[0]
    assert "status   awaiting_customer" in started.out
    assert "waiting  for the customer: Which order would you like to cancel?" in started.out
    listed = cli("runs", "--status", "awaiting_customer", "--json")
    assert [r["run_id"] for r in json.loads(listed.out)] == ["c1"]

    answered = cli("reply", "c1", "It is A-1001")
    assert answered.code == 0, answered
    assert answered.out.startswith("reply    1, read by the run")
    assert "confirm  cancel_order" in answered.out and '"reason":"no longer needed"' in \
        answered.out
    assert cancelled(ledger) == []

    (tmp_path / "yes.txt").write_text("yes\n")
    done = cli("reply", "c1", "@yes.txt", "--json")
    assert done.code == 0, done
    report = json.loads(done.out)
    assert (report["status"], report["reply"], report["read"]) == ("done", 2, True)
    assert [e["order_id"] for e in cancelled(ledger)] == ["A-1001"]

    history = cli("history", "c1")
    assert "reply 1: It is A-1001" in history.out and "reply 2: yes" in history.out
    assert "confirmed by reply 2" in history.out
    assert cli("audit", "c1").code == 0


def test_a_reply_from_standard_input(cli: Cli, ledger: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli(*RUN).code == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("A-1001 ✓\n".encode())))
    assert cli("reply", "c1", "-").code == 0
    shown = cli("show", "c1")
    assert '"content": "A-1001 ✓", "from": "customer"' in shown.out
    # The proposal as the workflow renders its call, never the model's words.
    assert 'waiting  for the customer: cancel_order {"order_id":"A-1001"' in shown.out
    assert "I will cancel order A-1001" not in shown.out.split("waiting", 1)[1]
    assert "confirm  cancel_order" in shown.out


def test_only_recording_the_reply_leaves_the_run_to_be_resumed(cli: Cli, ledger: Path) -> None:
    assert cli(*RUN).code == 0
    recorded = cli("reply", "c1", "A-1001", "--no-drive", "--json")
    assert recorded.code == 0
    assert (json.loads(recorded.out)["status"], json.loads(recorded.out)["read"]) == (
        "running", True)
    resumed = cli("resume", "c1")
    assert resumed.code == 0 and "path     talking → confirming" in resumed.out


@pytest.mark.parametrize("text, file_bytes, code, fragment", [
    ("", None, 2, "the reply is empty"),
    (" \n ", None, 2, "the reply is empty"),
    ("@long.txt", b"x" * 4001, 2, "the reply has 4001 characters; at most 4000"),
    ("@nul.txt", b"yes\x00", 2, "contains a NUL character"),
    ("@latin1.txt", "oui, très bien".encode("latin-1"), 2, "is not valid UTF-8"),
    ("@missing.txt", None, 2, "cannot read the reply from 'missing.txt'"),
    ("@empty.txt", b"\n", 2, "the reply is empty"),
    ("yes \udcff", None, 2, "argument 3 is not valid UTF-8"),
], ids=["empty", "blank", "too-long", "nul", "not-utf8-file", "missing-file", "empty-file",
        "not-utf8-argument"])
def test_a_bad_reply_is_one_line_exit_2_and_changes_nothing(
        cli: Cli, ledger: Path, tmp_path: Path, text: str, file_bytes: bytes | None,
        code: int, fragment: str) -> None:
    assert cli(*RUN).code == 0
    before = kept(tmp_path)
    if file_bytes is not None:
        (tmp_path / text[1:]).write_bytes(file_bytes)
    error_line(cli("reply", "c1", text), code, fragment)
    assert kept(tmp_path) == before


def test_replies_to_runs_that_take_none_are_refused(cli: Cli, ledger: Path,
                                                    tmp_path: Path) -> None:
    error_line(cli("reply", "nope", "hello"), 2, "run 'nope' not found; nothing was kept")
    refund = cli("run", "refund", "Order A-1002: headphones dead", "--user", "ravi",
                 "--run-id", "r1")
    assert "awaiting_approval" in refund.out
    error_line(cli("reply", "r1", "hello?"), 2, "workflow 'refund' does not talk with its "
               "customer")
    assert cli(*RUN).code == 0
    assert cli("reply", "c1", "A-1001").code == 0
    assert cli("reply", "c1", "no thanks").code == 0
    error_line(cli("reply", "c1", "bye"), 2, "run 'c1' has finished (done): it takes no more "
               "replies; nothing was kept")
    with SQLiteStore(str(tmp_path / "fsm.db")) as store:
        assert [r.text for r in store.replies("c1")] == ["A-1001", "no thanks"]
        assert store.replies("r1") == []


def test_sweep_lets_an_unanswered_conversation_expire(cli: Cli, ledger: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli(*RUN).code == 0
    early = cli("sweep")
    assert early.out.strip() == "no expired approvals or conversations"
    monkeypatch.setenv("FSM_CLOCK_OFFSET", "3601")
    swept = cli("sweep")
    assert swept.out.strip() == "expired  c1 → closed (handed_over)"
    history = cli("history", "c1")
    assert "unanswered" in history.out and "silent" in history.out


def test_the_refund_conversation_on_the_command_line(cli: Cli, tmp_path: Path) -> None:
    from workflows.refund import Shop

    started = cli("run", "refund_chat", "My kettle arrived broken, I want my money back",
                  "--user", "asha", "--run-id", "k1")
    assert started.code == 0, started
    assert "waiting  for the customer: Which order is it about?" in started.out
    done = cli("reply", "k1", "It is A-1001")
    assert done.code == 0 and "status   done" in done.out
    with Shop(str(tmp_path / "fsm.db")) as shop:
        assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [
            ("A-1001", 35_000)]


def test_a_submitted_conversation_gives_out_its_token(cli: Cli, ledger: Path) -> None:
    submitted = cli("submit", "chat_desk:WORKFLOW", "cancel, please", "--user", "asha",
                    "--policy", "chat_desk:clerk", "--run-id", "s1", "--json")
    assert submitted.code == 0, submitted
    data = json.loads(submitted.out)
    assert data["status"] == "running" and len(data["reply_token"]) >= 40
    plain = cli("submit", "refund", "Order A-1001: broken", "--user", "asha", "--json")
    assert "reply_token" not in json.loads(plain.out)
