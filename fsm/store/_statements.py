"""The statements both SQL stores execute, written once and built per dialect.

:class:`Statements` holds every write statement of the shared tables, spelled with a
:class:`~fsm.store._dialect.Dialect`, and :func:`commit_writes` lists what one step's
commit writes, **in the one order both stores write it**:

1. the run row (its version checked, and its lease when the writer is fenced), then its
   definition when the commit moves it;
2. the log events, chained from the head the run row keeps;
3. the transcript messages and the view;
4. the effects the step finished;
5. the approval it requests, then the decision it records (once only);
6. the customer replies it read (once only), then a new run's reply token;
7. artifacts;
8. the outbox's notifications, then the desk's rows (a handover and its notification,
   the subject of a request).

The run row comes first, so a commit whose version or lease is stale stops before it
writes anything else, and every writer of a run takes the run row's lock before any
other lock of that run (the order that keeps two writers from deadlocking).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from fsm.records import ApprovalDecision, ChainedEvent, RunState, StepCommit, canonical
from fsm.store._columns import (
    APPROVAL_COLUMNS,
    EVENT_COLUMNS,
    decided_before,
    decision_update,
    insert_reply,
    outbox_insert,
    read_reply,
    reply_not_unread,
)
from fsm.store._dialect import Dialect, jsonb_copy
from fsm.store.desk import desk_writes

__all__ = ["Statements", "Write", "commit_writes", "statements"]


#: One statement of a commit: ``(sql, args, many, expect_one)``. ``many``: ``args`` is a
#: list of argument tuples (``executemany``); ``expect_one``: for a statement that must
#: change exactly one row, what makes the error to raise when it changes none (given the
#: transaction's connection, which it may read), else ``None``. Plain tuples: a step
#: builds several, and a named tuple costs several times as much to make.
Write = tuple[str, Any, bool, "Callable[[Any], Exception] | None"]


def _one(sql: str, args: Any) -> Write:
    return (sql, args, False, None)


def _many(sql: str, rows: Any) -> Write:
    return (sql, rows, True, None)


#: A PostgreSQL database as its server names it, whatever URL reached it.
DATABASE_IDENTITY = "SELECT current_setting('port'), current_database(), current_schema()"
#: The signature of one signed run, to check the key a database is opened with (any one
#: will do: the keyring keeps every key that signed; no sort, so opening a database of
#: many runs reads no more than the first signed row).
SIGNED_RUN = "SELECT log_sig FROM runs WHERE log_sig IS NOT NULL LIMIT 1"


class Statements:
    """Every shared write statement in one dialect (build it with :func:`statements`)."""

    def __init__(self, d: Dialect) -> None:
        self.dialect = d
        m = d.mark
        self.insert_event = (f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
                             f"VALUES ({d.marks(len(EVENT_COLUMNS))})")
        self.run_doc = d.copy_of("runs", "snapshot")
        self.update_run = {(status, fenced): self._update_run(status, fenced)
                           for status in (True, False) for fenced in (True, False)}
        self.move_definition = f"UPDATE runs SET definition_hash = {m} WHERE run_id = {m}"
        self.insert_run = ("INSERT INTO runs (run_id, workflow, status, version, snapshot, "
                           "created_at, updated_at, definition_hash, parent_run_id) "
                           f"VALUES ({m}, {m}, {m}, 0, '{{}}', {m}, {m}, {m}, {m}) "
                           "ON CONFLICT DO NOTHING")
        self.fence_read = ("SELECT version, log_count, log_head, lease_owner, status, log_sig "
                           f"FROM runs WHERE run_id = {m}{d.lock}")
        self.upsert_message = (f"INSERT INTO messages (run_id, idx, body) VALUES ({m}, {m}, "
                               f"{m}) ON CONFLICT (run_id, idx) DO UPDATE SET body = "
                               "excluded.body")
        self.upsert_view = (f"INSERT INTO views (run_id, step, body) VALUES ({m}, {m}, {m}) "
                            "ON CONFLICT (run_id, step) DO UPDATE SET body = excluded.body")
        self.result_doc = d.copy_of("effects", "result")
        self.effect_done = ("UPDATE effects SET status = 'DONE', result = " + m
                            + (f", {self.result_doc} = {d.document_mark}" if self.result_doc
                               else "")
                            + f", error = {m}, finished_at = {m} WHERE key = {m}")
        self.args_doc = d.copy_of("effects", "args")
        self.insert_effect = (
            "INSERT INTO effects (key, run_id, step, tool, args"
            + (f", {self.args_doc}" if self.args_doc else "")
            + ", status, started_at, claim) VALUES ("
            + d.marks(5) + (f", {d.document_mark}" if self.args_doc else "")
            + f", 'STARTED', {m}, {m}) ON CONFLICT (key) DO NOTHING")
        self.approval_doc = d.copy_of("approvals", "args")
        self.insert_approval = (
            f"INSERT INTO approvals ({', '.join(APPROVAL_COLUMNS)}"
            + (f", {self.approval_doc}" if self.approval_doc else "")
            + f") VALUES ({d.marks(len(APPROVAL_COLUMNS))}"
            + (f", {d.document_mark}" if self.approval_doc else "") + ")")
        self.read_reply = read_reply(m)
        self.insert_reply = insert_reply(m)
        self.insert_token = (f"INSERT INTO reply_tokens (run_id, token_hash, issued_at) "
                             f"VALUES ({m}, {m}, {m})")
        self.insert_artifact = (f"INSERT INTO artifacts (sha256, content, size) VALUES ({m}, "
                                f"{m}, {m}) ON CONFLICT DO NOTHING")
        self.decided = f"SELECT decision, reviewer FROM approvals WHERE approval_id = {m}"
        self.claimed_run = (f"UPDATE runs SET version = {m}, log_count = {m}, log_head = {m}, "
                            f"log_sig = {m} WHERE run_id = {m} AND version = {m}")
        self.definition_doc = d.copy_of("definitions", "body")
        self.insert_definition = (
            "INSERT INTO definitions (definition_hash, workflow, version, body, recorded_at"
            + (f", {self.definition_doc}" if self.definition_doc else "")
            + f") VALUES ({d.marks(5)}"
            + (f", {d.document_mark}" if self.definition_doc else "")
            + ") ON CONFLICT DO NOTHING")

    def _update_run(self, status: bool, fenced: bool) -> str:
        # A status written again unchanged still rewrites each index that holds it, which
        # costs a step more than the rest of the row: an unchanged status is left alone.
        m = self.dialect.mark
        doc = f", {self.run_doc} = {self.dialect.document_mark}" if self.run_doc else ""
        return ("UPDATE runs SET " + (f"status = {m}, " if status else "")
                + f"version = {m}, snapshot = {m}{doc}, updated_at = {m}, log_count = {m}, "
                f"log_head = {m}, log_sig = {m} WHERE run_id = {m} AND version = {m}"
                + (f" AND lease_owner = {m}" if fenced else ""))

    def documented(self, column: str | None, text: str) -> tuple[str, ...]:
        """``(jsonb copy of text,)`` when the dialect keeps one in ``column``, else ``()``."""
        return (jsonb_copy(text),) if column else ()


_BUILT: dict[str, Statements] = {}


def statements(d: Dialect) -> Statements:
    """The statements of dialect ``d``, built once."""
    built = _BUILT.get(d.name)
    if built is None or built.dialect is not d:
        built = _BUILT[d.name] = Statements(d)
    return built


class Head(NamedTuple):
    """What a commit needs of the run row as it was: version, log count and head, status,
    and the head's signature."""

    version: int
    log_count: int
    log_head: str
    status: str
    log_sig: str | None


def commit_writes(st: Statements, c: StepCommit, new: RunState, events: list[ChainedEvent],
                  head: Head, owner: str | None, sig: str | None,
                  stale: Callable[[Any], Exception]) -> list[Write]:
    """The writes of commit ``c`` in their one order (see the module). ``new``: the run
    as it is written; ``events``: the commit's events chained after ``head``; ``sig``: the
    signature of the new head; ``stale``: the error when the run row is no longer at
    ``c.expected_version`` (or ``owner`` lost its lease)."""
    out = [_run_write(st, c, new, events, head, owner, sig, stale)]
    if c.moves_definition:
        out.append(_one(st.move_definition, (new.definition_hash, new.run_id)))
    _log_and_view(st, c, new, events, out)
    _approvals(st, c, out)
    _conversation(st, c, new, out)
    _attached(st, c, out)
    return out


def _run_write(st: Statements, c: StepCommit, new: RunState, events: list[ChainedEvent],
               head: Head, owner: str | None, sig: str | None,
               stale: Callable[[Any], Exception]) -> Write:
    """The run row's update, fenced by its version (and ``owner``'s lease)."""
    count = head.log_count + len(events)
    last = events[-1].hash if events else head.log_head
    changed = new.status != head.status
    snapshot = c.snapshot
    return (st.update_run[changed, owner is not None], (
        *((new.status,) if changed else ()), new.version, snapshot,
        *((jsonb_copy(snapshot),) if st.run_doc else ()), new.updated_at, count, last, sig,
        new.run_id, c.expected_version, *(() if owner is None else (owner,))), False, stale)


def _log_and_view(st: Statements, c: StepCommit, new: RunState, events: list[ChainedEvent],
                  out: list[Write]) -> None:
    """The step's events, messages, view and finished effects."""
    if events:
        out.append(_many(st.insert_event, [e.row(EVENT_COLUMNS) for e in events]))
    if c.messages:
        # A row already at one of these places was written by no step (the run row counts
        # the messages its steps wrote, and nothing reads past that count): the step's
        # message takes its place, and the run stays writable.
        base = new.message_count - len(c.messages)
        out.append(_many(st.upsert_message, [(new.run_id, base + i, body) for i, body
                                             in enumerate(c.message_bodies)]))
    if c.view is not None:
        out.append(_one(st.upsert_view, (new.run_id, c.view.step, c.view_body)))
    for key, (result, error) in c.effects_done.items():
        text = canonical(result)
        out.append(_one(st.effect_done, (text, *st.documented(st.result_doc, text), error,
                                         new.updated_at, key)))


def _attached(st: Statements, c: StepCommit, out: list[Write]) -> None:
    """The step's artifacts, its notifications to send, and its rows of the desk."""
    for sha, content in c.artifacts.items():
        out.append(_one(st.insert_artifact, (sha, content, len(content))))
    if c.new_approval is not None or c.decision is not None:
        sql, rows = outbox_insert(c, st.dialect.mark)
        if rows:
            out.append(_many(sql, rows))
    if c.handover is not None or c.subject is not None:
        out.extend(_one(sql, args) for sql, args in desk_writes(c, st.dialect.mark))


def _approvals(st: Statements, c: StepCommit, out: list[Write]) -> None:
    if c.new_approval is not None:
        a = c.new_approval.model_dump(mode="json")
        a["args"] = canonical(a["args"])
        out.append(_one(st.insert_approval, (*(a[k] for k in APPROVAL_COLUMNS),
                                             *st.documented(st.approval_doc, a["args"]))))
    d = c.decision
    if d is not None:
        sql, args = decision_update(d, st.dialect.mark)
        out.append((sql, args, False, _decided(st, c.run.run_id, d)))


def _decided(st: Statements, run_id: str, d: ApprovalDecision) -> Callable[[Any], Exception]:
    def error(db: Any) -> Exception:
        row = db.execute(st.decided, (d.approval_id,)).fetchone()
        return decided_before(run_id, d.approval_id, row)
    return error


def _unread(run_id: str, seq: int) -> Callable[[Any], Exception]:
    return lambda _db: reply_not_unread(run_id, seq)


def _conversation(st: Statements, c: StepCommit, new: RunState, out: list[Write]) -> None:
    """Mark the replies the step read; keep the hash of a new run's reply token."""
    for seq in c.replies_read:
        out.append((st.read_reply, (new.step, new.run_id, seq), False,
                    _unread(new.run_id, seq)))
    if c.token_hash is not None:
        out.append(_one(st.insert_token, (new.run_id, c.token_hash, new.updated_at)))
