"""The desk's tables, with their SQL written once for both SQL stores: handed-over runs
(``handovers``), what requests are about (``subjects``), and what is left of pruned runs
(``tombstones``).

A commit that hands a run over writes its ``handovers`` row and a notification row in
the same transaction (as a pause does); taking and closing it rewrite the row with the
commit that logs them. The log is the record: the audit compares each row with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from fsm.records import Handover, StepCommit
from fsm.store.people import notification_key

HANDOVER_COLUMNS = (
    "handover_id", "run_id", "workflow", "customer", "request", "state", "handed_at", "cause",
    "reason", "taken_by", "taken_at", "outcome", "note", "closed_by", "closed_at",
)
TOMBSTONE_COLUMNS = (
    "run_id", "workflow", "definition_hash", "status", "head", "log_count", "created_at",
    "finished_at", "pruned_at", "pruned_by",
)


#: The statuses a run never leaves, which a prune may delete.
PRUNABLE = ("done", "failed", "budget_exhausted", "handed_over")


@dataclass(frozen=True)
class Cut:
    """Which runs a prune takes: finished ``before`` a time, of a workflow, so."""

    before: float
    workflow: str | None = None
    statuses: tuple[str, ...] = PRUNABLE


@dataclass(frozen=True)
class ForkEdge:
    """A run a prune would take but for a fork of it, and that fork."""

    parent: str
    #: How many log events the parent has (what pruning it would delete).
    parent_events: int
    fork: str
    #: The fork is one the prune would take too (but for forks of its own).
    fork_prunable: bool


class Tombstone(BaseModel):
    """What is kept of a pruned run: enough to name it and to check an evidence bundle
    exported before the prune (its head hash and the number of its log events)."""

    run_id: str
    workflow: str
    definition_hash: str
    #: The run's final status.
    status: str
    #: The hash of the run's last log event, and how many events its log had.
    head: str
    log_count: int
    created_at: float
    #: When the run was last written (it finished then).
    finished_at: float
    pruned_at: float
    pruned_by: str


@dataclass(frozen=True)
class Queue:
    """Which handovers a listing shows."""

    #: Only those not closed yet.
    open_only: bool = True
    workflow: str | None = None
    cause: str | None = None
    #: ``None``: anyone's; ``""``: nobody has taken them; a name: taken by that person.
    taken_by: str | None = None


#: The open handovers, anyone's.
OPEN = Queue()


def handover_values(h: Handover) -> tuple[Any, ...]:
    d = h.model_dump()
    d["customer"] = d.pop("user")
    return tuple(d[c] for c in HANDOVER_COLUMNS)


def handover_from(row: Sequence[Any]) -> Handover:
    d = dict(zip(HANDOVER_COLUMNS, row, strict=True))
    d["user"] = d.pop("customer")
    return Handover.model_validate(d)


def desk_writes(c: StepCommit, mark: str) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that write ``c``'s desk rows in its own transaction: its handover
    row (inserted, or rewritten when taken or closed) with the notification of a new
    one, and the subject of its request."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    h = c.handover
    if h is not None:
        marks = ", ".join([mark] * len(HANDOVER_COLUMNS))
        updates = ", ".join(f"{col} = excluded.{col}" for col in HANDOVER_COLUMNS[9:])
        out.append((f"INSERT INTO handovers ({', '.join(HANDOVER_COLUMNS)}) VALUES ({marks}) "
                    f"ON CONFLICT (handover_id) DO UPDATE SET {updates}", handover_values(h)))
        if h.taken_at is None and h.closed_at is None:
            # Someone must be told that a run waits at the desk (the outbox, as a pause).
            out.append(("INSERT INTO notifications (key, run_id, approval_id, kind, "
                        f"created_at, next_attempt_at) VALUES ({mark}, {mark}, {mark}, "
                        f"'waiting', {mark}, {mark}) ON CONFLICT DO NOTHING",
                        (notification_key(h.handover_id, "waiting"), h.run_id,
                         h.handover_id, h.handed_at, h.handed_at)))
    if c.subject is not None:
        out.append((f"INSERT INTO subjects (workflow, subject, run_id, at) VALUES ({mark}, "
                    f"{mark}, {mark}, {mark}) ON CONFLICT DO NOTHING",
                    (c.run.workflow, c.subject, c.run.run_id, c.run.updated_at)))
    return out


def queue_where(q: Queue, mark: str) -> tuple[str, list[Any]]:
    where, args = [], []
    if q.open_only:
        where.append("closed_at IS NULL")
    for column, value in (("workflow", q.workflow), ("cause", q.cause)):
        if value is not None:
            where.append(f"{column} = {mark}")
            args.append(value)
    if q.taken_by == "":
        where.append("taken_by IS NULL")
    elif q.taken_by is not None:
        where.append(f"taken_by = {mark}")
        args.append(q.taken_by)
    return (" WHERE " + " AND ".join(where)) if where else "", args
