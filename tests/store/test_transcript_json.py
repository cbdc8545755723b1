"""Typed transcript messages keep the stored JSON: a database written before the messages
were typed reads back the same, audits clean, and the same runs written today store the
same bytes.

``data/transcripts.sql`` is the dump of what ``tests/support/make_transcripts.py`` wrote with the
code of the day before (every stored shape: a refund approved lower, one declined, a
model that errs first, a conversation with its customer).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from make_transcripts import write
from pydantic import ValidationError

from fsm import SQLiteStore
from fsm.auditor.audit import audit
from fsm.records import canonical, transcript
from fsm.records.transcript import (
    ApprovalNote,
    AssistantText,
    CustomerAnswer,
    CustomerReply,
    FinalAnswer,
    OtherMessage,
    RuntimeNote,
    Summary,
    ToolCall,
    ToolError,
    ToolResult,
    UserMessage,
)

DATA = Path(__file__).parent / "data"
RUNS = ("chat", "declined", "lowered", "messy")


@pytest.fixture
def old_db(tmp_path: Path) -> str:
    """The database written by the code before the messages were typed."""
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.executescript((DATA / "transcripts.sql").read_text())
    db.close()
    # Later schema migrations only add: a store that writes upgrades the file, so that
    # the read-only store (which refuses an older schema) opens it.
    SQLiteStore(path).close()
    return path


def rows(path: str, table: str, order: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
    finally:
        db.close()


def test_every_stored_shape_reads_back_as_its_type_and_the_same_json(old_db: str) -> None:
    store = SQLiteStore(old_db, readonly=True)
    seen: set[type] = set()
    for run_id in RUNS:
        stored = store.messages(run_id)
        texts = [r[2] for r in rows(old_db, "messages", "run_id, idx") if r[0] == run_id]
        typed = transcript.read_all(stored)
        for text, message, read in zip(texts, stored, typed, strict=True):
            assert read.body() == message
            assert canonical(read.body()) == text  # byte for byte: the row hashes hold
            checked = transcript.validate(message)
            assert type(checked) is type(read) and checked.body() == message
            seen.add(type(read))
    assert seen == {UserMessage, RuntimeNote, ApprovalNote, CustomerReply, ToolCall,
                    FinalAnswer, CustomerAnswer, AssistantText, ToolResult, ToolError}
    store.close()


def test_the_old_database_audits_clean_and_its_views_render(old_db: str) -> None:
    from fsm.runtime.view import view_at
    from workflows.refund import Shop, build

    store = SQLiteStore(old_db)
    for run_id in RUNS:
        report = audit(store, run_id)
        assert report.ok, (run_id, report.problems)
    spec = build(Shop(old_db))
    view = view_at(spec, store, "messy", 3)
    assert view is not None
    assert [type(m).__name__ for m in view.transcript] == [
        "UserMessage", "ToolCall", "ToolError", "FinalAnswer", "RuntimeNote"]
    store.close()


def test_the_same_runs_written_today_store_the_same_rows(old_db: str, tmp_path: Path) -> None:
    new = str(tmp_path / "new.db")
    write(new)
    assert rows(new, "messages", "run_id, idx") == rows(old_db, "messages", "run_id, idx")
    # The log's events hash the rows their commit wrote: the hashes of the messages (and
    # of the views) are the same, event for event (a snapshot's hash is not: it keeps the
    # seconds a run was active, which no two runs spend alike).
    for run_id in RUNS:
        assert covered(new, run_id, "messages") == covered(old_db, run_id, "messages")
        assert covered(new, run_id, "view") == covered(old_db, run_id, "view")
    assert rows(new, "views", "run_id, step") == rows(old_db, "views", "run_id, step")


def covered(path: str, run_id: str, what: str) -> list[object]:
    """What each event of the run records of the rows its commit wrote (``what``)."""
    details = [json.loads(r[13] or "{}") for r in rows(path, "events", "run_id, seq")
               if r[0] == run_id]
    found = [d["rows"][what] for d in details if what in d.get("rows", {})]
    assert found, f"no event of {run_id} covers its {what}"
    return found


@pytest.mark.parametrize("message, kind", [
    pytest.param({"role": "user", "content": "hi"}, UserMessage, id="user"),
    pytest.param({"role": "user", "content": "no", "runtime": True}, RuntimeNote, id="runtime"),
    pytest.param({"role": "user", "content": "ok", "approved": {"n": 1}}, ApprovalNote,
                 id="approval"),
    pytest.param({"role": "user", "content": "yes", "from": "customer", "reply": 2,
                  "event": "confirmed"}, CustomerReply, id="customer"),
    pytest.param({"role": "user", "content": "s", "summary_of": [1, 5]}, Summary,
                 id="summary"),
    pytest.param({"role": "assistant", "tool": "t", "args": {}, "text": "so"}, ToolCall,
                 id="call"),
    pytest.param({"role": "assistant", "final": "done"}, FinalAnswer, id="final"),
    pytest.param({"role": "assistant", "content": "ok?", "to": "customer"}, CustomerAnswer,
                 id="to-customer"),
    pytest.param({"role": "assistant", "content": ""}, AssistantText, id="text"),
    pytest.param({"role": "tool", "tool": "t", "result": None, "step": 3}, ToolResult,
                 id="result-with-extra-key"),
    pytest.param({"role": "tool", "tool": "t", "error": "bad"}, ToolError, id="error"),
    pytest.param({"role": "system", "content": "be brief"}, OtherMessage, id="other"),
])
def test_each_shape_is_told_by_its_keys(message: dict[str, object], kind: type) -> None:
    read = transcript.read(message)
    assert type(read) is kind and type(transcript.validate(message)) is kind
    assert read.body() == message == transcript.validate(message).body()
    assert json.loads(canonical(read.body())) == message


def test_the_framework_builds_the_same_json_it_validates() -> None:
    assert ToolResult.make(tool="t", result=None).body() == \
        ToolResult(tool="t").body() == {"role": "tool", "tool": "t", "result": None}
    assert CustomerReply.make(content="y", reply=1).body() == CustomerReply(
        content="y", reply=1).body() == {"role": "user", "content": "y", "from": "customer",
                                          "reply": 1}
    assert RuntimeNote(content="c").body() == {"role": "user", "content": "c",
                                               "runtime": True}


def test_a_message_of_a_known_shape_with_wrong_values_is_refused_with_its_field() -> None:
    with pytest.raises(ValidationError) as caught:
        transcript.validate({"role": "assistant", "tool": "t", "args": "not a dict"})
    assert "call.args" in str(caught.value)


@pytest.mark.parametrize("kind, values", [
    (UserMessage, {"content": "hi"}), (RuntimeNote, {"content": "no"}),
    (RuntimeNote, {"content": "ok", "approved": {"n": 1}}),
    (ApprovalNote, {"content": "ok", "approved": {"n": 1}}),
    (CustomerReply, {"content": "yes", "reply": 2, "event": "confirmed"}),
    (Summary, {"content": "s", "summary_of": [1, 4]}),
    (ToolCall, {"tool": "t", "args": {"a": 1}}),
    (ToolCall, {"tool": "t", "args": {}, "text": "so"}),
    (FinalAnswer, {"final": "done"}), (CustomerAnswer, {"content": "ok?"}),
    (AssistantText, {"content": ""}), (ToolResult, {"tool": "t"}),
    (ToolResult, {"tool": "t", "result": [1]}), (ToolError, {"tool": "t", "error": "bad"}),
], ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_the_json_the_step_writes_is_the_typed_messages(kind: type, values: dict[str, object]
                                                        ) -> None:
    body = kind.make(**values).body()  # type: ignore[attr-defined]
    assert body == kind(**values).body()
    assert type(transcript.read(body)) is kind and transcript.read(body).body() == body
