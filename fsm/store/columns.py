"""The columns of the tables every SQL store keeps, in the order stores write them, and
what both SQL stores read and ask alike."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fsm.records import Approval, RunState

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
