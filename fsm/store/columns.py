"""The columns of the tables every SQL store keeps, in the order stores write them, and
what both SQL stores read and ask alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from fsm.errors import ApprovalAlreadyDecided, RowDamaged, RunNotFound, StoreError
from fsm.records import (
    GENESIS,
    Approval,
    ApprovalDecision,
    DefinitionCount,
    DefinitionRecord,
    RunState,
    StepCommit,
    canonical,
)
from fsm.records.conversation import Reply
from fsm.store.dialect import Database
from fsm.store.people import Refusal, notification_key, outbox_rows, refusal_link

EVENT_COLUMNS = (
    "run_id", "seq", "step", "time", "kind", "state_before", "state_after", "tool", "event",
    "reason", "cost_micros", "tokens", "reviewer", "detail", "prev_hash", "hash",
)
APPROVAL_COLUMNS = (
    "approval_id", "run_id", "step", "tool", "args", "args_hash", "run_version",
    "requested_at", "expires_at", "decision", "reviewer", "note", "decided_at",
    "approved_args",
)
EFFECT_COLUMNS = ("key", "run_id", "step", "tool", "args", "status", "result", "error",
                  "started_at", "finished_at", "claim")
ACCOUNT_COLUMNS = ("name", "role", "password_hash", "release_limit", "disabled", "created_at",
                   "updated_at")
REFUSAL_COLUMNS = ("refusal_id", "run_id", "approval_id", "account", "action", "code",
                   "reason", "at", "remote", "hash")
DEFINITION_COLUMNS = ("definition_hash", "workflow", "version", "body", "recorded_at")
NOTIFICATION_COLUMNS = ("key", "run_id", "approval_id", "kind", "created_at", "status",
                        "attempts", "next_attempt_at", "last_error", "delivered_at")
REPLY_COLUMNS = ("run_id", "seq", "body", "received_at", "run_version", "asked_hash",
                 "read_step")


# -- rows that cannot be read -----------------------------------------------------------

_T = TypeVar("_T")


def damaged(where: str, table: str, run_id: str | None, exc: BaseException, *,
            key: str | None = None) -> RowDamaged:
    """The error for a row of ``table`` that cannot be read (``where``: the database, as
    messages name it), with what the reader said, on one line."""
    whose = f"run {run_id!r}" if run_id is not None else "a run"
    text = str(exc).splitlines()
    first = text[0] if text and text[0] else type(exc).__name__
    return RowDamaged(
        f"database {where}: a row of {whose} in table {table!r} is damaged and cannot be "
        f"read ({type(exc).__name__}: {first}); restore the database from a backup",
        then=", or inspect it with fsm audit", table=table, run_id=run_id, key=key)


#: What a reader of a row's JSON or its record raises when the row is not what fsm wrote
#: (JSONDecodeError and pydantic's ValidationError are ValueErrors).
UNREADABLE = (ValueError, TypeError, KeyError, RecursionError)


# -- what both SQL stores read and ask the same way (``mark`` is the placeholder) ------

def run_from(snapshot: str, version: int) -> RunState:
    """A runs row (its snapshot text and version) as the run."""
    data = json.loads(snapshot)
    data["version"] = version
    return RunState.model_validate(data)


def approval_from(values: Mapping[str, Any]) -> Approval:
    """An approvals row (:data:`APPROVAL_COLUMNS`, the arguments as JSON text)."""
    d = {k: values[k] for k in APPROVAL_COLUMNS}
    d["args"] = json.loads(d["args"])
    if d["approved_args"] is not None:
        d["approved_args"] = json.loads(d["approved_args"])
    return Approval.model_validate(d)


def runs_where(status: str | None, workflow: str | None, mark: str) -> tuple[str, list[Any]]:
    """The ``WHERE`` of a runs query by status and workflow, and its arguments."""
    where, args = [], []
    if status is not None:
        where.append(f"status = {mark}")
        args.append(status)
    if workflow is not None:
        where.append(f"workflow = {mark}")
        args.append(workflow)
    return (" WHERE " + " AND ".join(where)) if where else "", args


def waiting_query(workflow: str | None, mark: str, *, count: bool = False
                  ) -> tuple[str, list[Any]]:
    """Undecided approvals of waiting runs, newest request first: the approval's columns,
    then the run's snapshot and version (``count``: only how many; no LIMIT)."""
    cols = ", ".join(f"a.{c}" for c in APPROVAL_COLUMNS)
    sql = ("SELECT " + ("COUNT(*)" if count else f"{cols}, r.snapshot, r.version") +
           " FROM approvals a JOIN runs r ON r.run_id = a.run_id "
           "WHERE a.decision IS NULL AND r.status = 'awaiting_approval'")
    args: list[Any] = []
    if workflow is not None:
        sql += f" AND r.workflow = {mark}"
        args.append(workflow)
    if not count:
        sql += (" ORDER BY a.requested_at DESC, a.approval_id DESC "
                f"LIMIT {mark} OFFSET {mark}")
    return sql, args


def decision_update(d: ApprovalDecision, mark: str) -> tuple[str, tuple[Any, ...]]:
    """The UPDATE that records ``d`` on its approval row, unless the row was decided
    before (then it changes no row: see :func:`decided_before`)."""
    sql = (f"UPDATE approvals SET decision = {mark}, reviewer = {mark}, note = {mark}, "
           f"decided_at = {mark}, approved_args = {mark} "
           f"WHERE approval_id = {mark} AND decision IS NULL")
    return sql, (d.decision, d.reviewer, d.note, d.time,
                 None if d.args is None else canonical(d.args), d.approval_id)


def decided_before(run_id: str, approval_id: str, row: Any) -> ApprovalAlreadyDecided:
    """The error for a decision on a decided approval (``row``: its decision and reviewer,
    ``None`` when the row is gone)."""
    return ApprovalAlreadyDecided(
        f"approval {approval_id} of run {run_id!r} was already "
        f"{row[0] if row else 'removed'} by {row[1] if row else '?'}", run_id=run_id,
    )


def outbox_insert(c: StepCommit, mark: str) -> tuple[str, list[tuple[Any, ...]]]:
    """The notifications ``c`` writes in its own transaction (the outbox): someone is told
    the run waits, or stopped waiting. The INSERT and its rows (none: nothing to tell)."""
    new_id = c.new_approval.approval_id if c.new_approval is not None else None
    at = c.run.updated_at
    rows = [(notification_key(aid, kind), c.run.run_id, aid, kind, at, at)
            for aid, kind in outbox_rows(new_id, c.decision)]
    sql = ("INSERT INTO notifications (key, run_id, approval_id, kind, created_at, "
           f"next_attempt_at) VALUES ({mark}, {mark}, {mark}, {mark}, {mark}, {mark}) "
           "ON CONFLICT DO NOTHING")
    return sql, rows


def reply_from(values: Sequence[Any]) -> Reply:
    """A replies row (:data:`REPLY_COLUMNS`) as the reply."""
    d = dict(zip(REPLY_COLUMNS, values, strict=True))
    d["text"] = d.pop("body")
    return Reply.model_validate(d)


def reply_row(reply: Reply, seq: int) -> tuple[Any, ...]:
    """The values of :data:`REPLY_COLUMNS` for ``reply`` kept as the run's ``seq``-th."""
    return (reply.run_id, seq, reply.text, reply.received_at, reply.run_version,
            reply.asked_hash, None)


def insert_reply(mark: str) -> str:
    return (f"INSERT INTO replies ({', '.join(REPLY_COLUMNS)}) "
            f"VALUES ({', '.join([mark] * len(REPLY_COLUMNS))})")


def read_reply(mark: str) -> str:
    """The UPDATE that marks one reply read by a step; it changes no row when the reply was
    read before (or is missing): see :func:`reply_not_unread`."""
    return (f"UPDATE replies SET read_step = {mark} WHERE run_id = {mark} AND seq = {mark} "
            "AND read_step IS NULL")


def reply_not_unread(run_id: str, seq: int) -> StoreError:
    return StoreError(f"reply {seq} of run {run_id!r} is missing or was read already; "
                      "nothing of this step was saved")


_Model = TypeVar("_Model", bound=BaseModel)


def refusal_insert(refusal: Refusal, head: Sequence[Any] | None, mark: str) -> tuple[
        str, tuple[Any, ...], tuple[str, tuple[Any, ...]] | None]:
    """The INSERT of a refused attempt chained after ``head`` (the run row's refusal count
    and head, ``None`` when the run has no row), and the UPDATE that moves the run row's
    head to it (``None``: no run row)."""
    count, prev = (int(head[0]), str(head[1])) if head is not None else (0, GENESIS)
    chained = refusal_link(prev, refusal)
    sql = ("INSERT INTO web_refusals (run_id, approval_id, account, action, code, reason, at, "
           f"remote, hash) VALUES ({', '.join([mark] * 9)})")
    args = (refusal.run_id, refusal.approval_id, refusal.account, refusal.action, refusal.code,
            refusal.reason, refusal.at, refusal.remote, chained)
    update = None if head is None else (
        f"UPDATE runs SET refusal_count = {mark}, refusal_head = {mark} WHERE run_id = {mark}",
        (count + 1, chained, refusal.run_id))
    return sql, args, update


class SQLReads(Database):
    """The reads both SQL stores make with the same SQL (over the store's
    :class:`~fsm.store.dialect.Database`)."""

    if TYPE_CHECKING:  # the store's own (fsm.store.base.Store.not_found)
        def not_found(self, run_id: str) -> RunNotFound: ...

    def _damaged(self, table: str, run_id: str | None, exc: BaseException, *,
                 key: str | None = None) -> RowDamaged:
        return damaged(self._where(), table, run_id, exc, key=key)

    def _row(self, model: type[_Model], table: str, values: Mapping[str, Any], *,
             key: str | None = None) -> _Model:
        """``values`` as the record ``model``, or the row is damaged."""
        try:
            return model.model_validate(dict(values))
        except UNREADABLE as exc:
            raise self._damaged(table, values.get("run_id"), exc, key=key) from None

    def _approval(self, values: Mapping[str, Any]) -> Approval:
        """An approvals row (:data:`APPROVAL_COLUMNS`), or the row is damaged."""
        try:
            return approval_from(values)
        except UNREADABLE as exc:
            raise self._damaged("approvals", values.get("run_id"), exc,
                                key=values.get("approval_id")) from None

    def _exists(self, run_id: str) -> None:
        """Raise ``RunNotFound`` unless the run exists: asked only when a read of its
        rows found none, so a read of an existing run costs one query."""
        if not self._read(f"SELECT 1 FROM runs WHERE run_id = {self.MARK}", (run_id,)):
            raise self.not_found(run_id)

    def artifact(self, sha256: str) -> str | None:
        rows = self._read(f"SELECT content FROM artifacts WHERE sha256 = {self.MARK}",
                          (sha256,))
        return str(rows[0][0]) if rows else None

    def _has_account(self, name: str) -> bool:
        return bool(self._read(f"SELECT 1 FROM accounts WHERE name = {self.MARK}", (name,)))

    def _run_row(self, columns: str, run_id: str) -> Any:
        """``columns`` of the run's row, or :class:`RunNotFound`."""
        rows = self._read(f"SELECT {columns} FROM runs WHERE run_id = {self.MARK}", (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        return rows[0]

    def snapshot_text(self, run_id: str) -> str:
        return str(self._run_row("snapshot", run_id)[0])

    def run_columns(self, run_id: str) -> tuple[str, str]:
        row = self._run_row("status, workflow", run_id)
        return str(row[0]), str(row[1])

    def log_head(self, run_id: str) -> tuple[int, str]:
        row = self._run_row("log_count, log_head", run_id)
        return int(row[0]), str(row[1])

    def signed_head(self, run_id: str) -> tuple[int, str, str | None]:
        row = self._run_row("log_count, log_head, log_sig", run_id)
        return int(row[0]), str(row[1]), (None if row[2] is None else str(row[2]))

    def refusal_head(self, run_id: str) -> tuple[int, str] | None:
        row = self._run_row("refusal_count, refusal_head", run_id)
        return int(row[0]), str(row[1])

    def count_waiting(self, workflow: str | None = None) -> int:
        sql, args = waiting_query(workflow, self.MARK, count=True)
        return int(self._read(sql, tuple(args))[0][0])

    def count_runs(self, status: str | None = None, workflow: str | None = None) -> int:
        where, args = runs_where(status, workflow, self.MARK)
        return int(self._read(f"SELECT COUNT(*) FROM runs{where}", tuple(args))[0][0])

    def workflow_names(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT workflow FROM runs ORDER BY workflow")]

    def approval(self, approval_id: str) -> Approval | None:
        rows = self._read(f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals "
                          f"WHERE approval_id = {self.MARK}", (approval_id,))
        return self._approval(dict(zip(APPROVAL_COLUMNS, rows[0], strict=True))) if rows else None

    # -- definitions ------------------------------------------------------------------

    #: How a store lists definitions in the order it first saw them.
    DEFINITION_ORDER = "recorded_at, definition_hash"

    def definition(self, definition_hash: str) -> DefinitionRecord | None:
        rows = self._read(f"SELECT {', '.join(DEFINITION_COLUMNS)} FROM definitions "
                          f"WHERE definition_hash = {self.MARK}", (definition_hash,))
        return definition_from(rows[0]) if rows else None

    def definitions(self, workflow: str | None = None) -> list[DefinitionRecord]:
        sql = f"SELECT {', '.join(DEFINITION_COLUMNS)} FROM definitions"
        args: tuple[Any, ...] = ()
        if workflow is not None:
            sql += f" WHERE workflow = {self.MARK}"
            args = (workflow,)
        return [definition_from(r) for r in
                self._read(f"{sql} ORDER BY {self.DEFINITION_ORDER}", args)]

    def definition_counts(self, workflow: str | None = None,
                          status: str | None = None) -> list[DefinitionCount]:
        where, args = runs_where(status, workflow, self.MARK)
        rows = self._read("SELECT workflow, definition_hash, status, COUNT(*), MIN(run_id) "
                          f"FROM runs{where} GROUP BY workflow, definition_hash, status "
                          "ORDER BY workflow, definition_hash, status", tuple(args))
        return [DefinitionCount(str(w), str(h), str(st), int(n), str(sample))
                for w, h, st, n, sample in rows]

    def definition_column(self, run_id: str) -> str:
        return str(self._run_row("definition_hash", run_id)[0])

    def forks_of(self, run_id: str) -> list[str]:
        return [str(r[0]) for r in self._read(
            f"SELECT run_id FROM runs WHERE parent_run_id = {self.MARK} ORDER BY created_at, "
            "run_id", (run_id,))]


    def replies(self, run_id: str, *, unread_only: bool = False) -> list[Reply]:
        sql = (f"SELECT {', '.join(REPLY_COLUMNS)} FROM replies WHERE run_id = {self.MARK}"
               + (" AND read_step IS NULL" if unread_only else "") + " ORDER BY seq")
        return [reply_from(tuple(r)) for r in self._read(sql, (run_id,))]

    def reply_token(self, run_id: str) -> str | None:
        rows = self._read(f"SELECT token_hash FROM reply_tokens WHERE run_id = {self.MARK}",
                          (run_id,))
        return str(rows[0][0]) if rows else None

def definition_from(row: Sequence[Any]) -> DefinitionRecord:
    """A definitions row (:data:`DEFINITION_COLUMNS`, the body as JSON text)."""
    h, workflow, version, body, at = tuple(row)
    return DefinitionRecord(definition_hash=h, workflow=workflow, version=version,
                            body=json.loads(body), recorded_at=at)


def definition_row(record: DefinitionRecord) -> tuple[Any, ...]:
    return (record.definition_hash, record.workflow, record.version,
            canonical(record.body), record.recorded_at)
