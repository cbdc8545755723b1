"""The columns of the tables every SQL store keeps, in the order stores write them, and
what both SQL stores read and ask alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fsm.errors import ApprovalAlreadyDecided, RunNotFound
from fsm.records import Approval, ApprovalDecision, RunState, StepCommit, canonical
from fsm.store.people import notification_key, outbox_rows

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
                  "started_at", "finished_at")
ACCOUNT_COLUMNS = ("name", "role", "password_hash", "release_limit", "disabled", "created_at",
                   "updated_at")
REFUSAL_COLUMNS = ("refusal_id", "run_id", "approval_id", "account", "action", "code",
                   "reason", "at", "remote")
NOTIFICATION_COLUMNS = ("key", "run_id", "approval_id", "kind", "created_at", "status",
                        "attempts", "next_attempt_at", "last_error", "delivered_at")


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


class SQLReads:
    """The reads both SQL stores make with the same SQL: a store gives its ``_read`` and
    its placeholder (``MARK``)."""

    MARK: str

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> Sequence[Any]:
        raise NotImplementedError

    def _exists(self, run_id: str) -> None:
        """Raise ``RunNotFound`` unless the run exists: asked only when a read of its
        rows found none, so a read of an existing run costs one query."""
        if not self._read(f"SELECT 1 FROM runs WHERE run_id = {self.MARK}", (run_id,)):
            raise RunNotFound(run_id)

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
        return approval_from(dict(zip(APPROVAL_COLUMNS, rows[0], strict=True))) if rows else None
