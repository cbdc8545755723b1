"""The columns of the tables every SQL store keeps, in the order stores write them, and
what both SQL stores read and ask alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fsm.errors import ApprovalAlreadyDecided, RowDamaged, StoreError
from fsm.records import (
    GENESIS,
    Approval,
    ApprovalDecision,
    DefinitionRecord,
    RunState,
    StepCommit,
    canonical,
)
from fsm.records.conversation import Reply
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


def definition_from(row: Sequence[Any]) -> DefinitionRecord:
    """A definitions row (:data:`DEFINITION_COLUMNS`, the body as JSON text)."""
    h, workflow, version, body, at = tuple(row)
    return DefinitionRecord(definition_hash=h, workflow=workflow, version=version,
                            body=json.loads(body), recorded_at=at)


def definition_row(record: DefinitionRecord) -> tuple[Any, ...]:
    return (record.definition_hash, record.workflow, record.version,
            canonical(record.body), record.recorded_at)
