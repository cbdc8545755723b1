"""Retention: deleting finished runs' rows in short batches, keeping a tombstone of each.

A run is pruned only when it has finished (:data:`PRUNABLE`), was last written before
the cut-off, holds no live lease, has no handover still open, and has no fork that is not
pruned: a fork's audit checks its link to its parent's log, so a parent goes only after
its forks (a later batch of the same prune takes it when they went in an earlier one;
:attr:`Pruned.kept` names the parents forks kept). Each batch is one short
transaction: it picks its runs again (on PostgreSQL it skips rows another transaction
holds, ``FOR UPDATE SKIP LOCKED``), writes their tombstones and deletes their rows from
every table of :data:`RUN_TABLES`, so workers wait at most one batch. A tombstone keeps
the run's id, workflow, definition, final status, head hash and number of log events,
and when and by whom it was pruned: ``fsm audit`` reports it, and an evidence bundle
exported before the prune is checked against it.

Artifacts (large tool results) are kept by content hash and may be shared by runs: a
prune leaves them. On SQLite the freed pages are reused by new rows; ``VACUUM`` gives
them back to the file system.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fsm.records import Handover
from fsm.store.database import Role
from fsm.store.desk import (
    HANDOVER_COLUMNS,
    OPEN,
    PRUNABLE,
    TOMBSTONE_COLUMNS,
    Cut,
    ForkEdge,
    Queue,
    Tombstone,
    handover_from,
    queue_where,
)
from fsm.store.roles import Desk

__all__ = ["PRUNABLE", "RUN_TABLES", "Cut", "Pruned", "SQLDesk", "kept_for_forks", "prune"]

#: Every fsm table that holds rows of a run (by ``run_id``), deleted with the run; the
#: ``runs`` row goes last. A table added to the schema with a ``run_id`` column must be
#: named here (a test holds the two equal).
RUN_TABLES = ("messages", "views", "events", "effects", "approvals", "notifications",
              "web_refusals", "handovers", "subjects", "replies", "reply_tokens")


@dataclass
class Pruned:
    """What a prune deleted (or, for a dry run, would delete)."""

    runs: int = 0
    events: int = 0
    batches: int = 0
    seconds: float = 0.0
    #: The runs the cut takes but that are kept, each with its forks that are not pruned.
    kept: dict[str, list[str]] = field(default_factory=dict)


def _where(cut: Cut, mark: str, now: float, t: str = "runs", *,
           forks: bool = True) -> tuple[str, list[Any]]:
    """The WHERE clause of the runs (of table or alias ``t``) the cut takes; with
    ``forks``, only those that no run names as its parent."""
    statuses = [s for s in cut.statuses if s in PRUNABLE]
    sql = (f" WHERE {t}.status IN ({', '.join([mark] * len(statuses))})"
           f" AND {t}.updated_at < {mark}"
           f" AND ({t}.lease_owner IS NULL OR {t}.lease_until < {mark})"
           f" AND NOT EXISTS (SELECT 1 FROM handovers h WHERE h.run_id = {t}.run_id"
           " AND h.closed_at IS NULL)")
    args: list[Any] = [*statuses, cut.before, now]
    if cut.workflow is not None:
        sql += f" AND {t}.workflow = {mark}"
        args.append(cut.workflow)
    if forks:
        sql += f" AND NOT EXISTS (SELECT 1 FROM runs k WHERE k.parent_run_id = {t}.run_id)"
    return sql, args


def kept_for_forks(edges: list[ForkEdge]) -> dict[str, list[str]]:
    """The parents of ``edges`` a prune keeps, each with its forks that stay: a fork the
    cut does not take keeps its parent, and so does a fork that is kept itself."""
    forks: dict[str, list[ForkEdge]] = {}
    for e in edges:
        forks.setdefault(e.parent, []).append(e)

    def staying(parent: str, kept: dict[str, list[str]]) -> list[str]:
        return [e.fork for e in forks[parent] if not e.fork_prunable or e.fork in kept]

    kept: dict[str, list[str]] = {}
    grew = True
    while grew:  # a chain of forks is kept from its live end back to its root
        grew = False
        for parent in forks:
            if parent not in kept and staying(parent, kept):
                kept[parent] = []
                grew = True
    return {parent: staying(parent, kept) for parent in sorted(kept)}


def _definition(snapshot: str) -> str:
    try:
        return str(json.loads(snapshot).get("definition_hash", ""))
    except (ValueError, AttributeError):
        return ""  # a damaged snapshot: the tombstone keeps the rest


class SQLDesk(Role):
    """The desk of both SQL stores, written once: handed-over runs, the subjects of
    requests, and retention (the prune, and the tombstones it leaves)."""

    def handovers(self, queue: Queue = OPEN, *, limit: int = 50,
                  offset: int = 0) -> list[Handover]:
        where, args = queue_where(queue, self.mark)
        rows = self._read(f"SELECT {', '.join(HANDOVER_COLUMNS)} FROM handovers{where} "
                          f"ORDER BY handed_at DESC, handover_id DESC LIMIT {self.mark} "
                          f"OFFSET {self.mark}", (*args, int(limit), int(offset)))
        return [handover_from(tuple(r)) for r in rows]

    def count_handovers(self, queue: Queue = OPEN) -> int:
        where, args = queue_where(queue, self.mark)
        return int(self._read(f"SELECT COUNT(*) FROM handovers{where}", tuple(args))[0][0])

    def handover(self, handover_id: str) -> Handover | None:
        rows = self._read(f"SELECT {', '.join(HANDOVER_COLUMNS)} FROM handovers "
                          f"WHERE handover_id = {self.mark}", (handover_id,))
        return handover_from(tuple(rows[0])) if rows else None

    def run_handovers(self, run_id: str) -> list[Handover]:
        rows = self._read(f"SELECT {', '.join(HANDOVER_COLUMNS)} FROM handovers "
                          f"WHERE run_id = {self.mark} ORDER BY handed_at, handover_id",
                          (run_id,))
        return [handover_from(tuple(r)) for r in rows]

    def subject_runs(self, workflow: str, subject: str) -> list[str]:
        rows = self._read(f"SELECT run_id FROM subjects WHERE workflow = {self.mark} AND "
                          f"subject = {self.mark} ORDER BY at, run_id", (workflow, subject))
        return [str(r[0]) for r in rows]

    def count_prunable(self, cut: Cut, now: float) -> tuple[int, int]:
        """(runs, log events) a prune of ``cut`` would delete now."""
        where, args = _where(cut, self.mark, now)
        row = self._read(f"SELECT COUNT(*), COALESCE(SUM(log_count), 0) FROM runs{where}",
                         tuple(args))[0]
        return int(row[0]), int(row[1])

    def fork_edges(self, cut: Cut, now: float) -> list[ForkEdge]:
        """The runs ``cut`` takes but for their forks, with each of their forks."""
        mark = self.mark
        fork_taken, fork_args = _where(cut, mark, now, "c", forks=False)
        parent_taken, parent_args = _where(cut, mark, now, "p", forks=False)
        rows = self._read(
            "SELECT p.run_id, p.log_count, f.run_id, CASE WHEN EXISTS (SELECT 1 FROM runs c"
            f"{fork_taken} AND c.run_id = f.run_id) THEN 1 ELSE 0 END"
            f" FROM runs p JOIN runs f ON f.parent_run_id = p.run_id{parent_taken}"
            " ORDER BY p.run_id, f.created_at, f.run_id", (*fork_args, *parent_args))
        return [ForkEdge(str(r[0]), int(r[1]), str(r[2]), bool(r[3])) for r in rows]

    def prune_batch(self, cut: Cut, *, now: float, by: str, limit: int) -> list[Tombstone]:
        """Prune up to ``limit`` runs of ``cut`` in one transaction; their tombstones."""
        mark = self.mark
        where, args = _where(cut, mark, now)
        with self.db.tx() as db:
            rows = db.execute(
                # No ORDER BY: the scan stops at the first ``limit`` runs that qualify,
                # instead of sorting every finished run for each batch.
                "SELECT run_id, workflow, status, snapshot, log_head, log_count, created_at, "
                f"updated_at FROM runs{where} LIMIT {mark}{self.dialect.skip_locked}",
                (*args, int(limit))).fetchall()
            if not rows:
                return []
            stones = [Tombstone(run_id=r[0], workflow=r[1], definition_hash=_definition(r[3]),
                                status=r[2], head=r[4], log_count=r[5], created_at=r[6],
                                finished_at=r[7], pruned_at=now, pruned_by=by) for r in rows]
            marks = ", ".join([mark] * len(TOMBSTONE_COLUMNS))
            db.cursor().executemany(
                f"INSERT INTO tombstones ({', '.join(TOMBSTONE_COLUMNS)}) VALUES ({marks})",
                [tuple(getattr(t, c) for c in TOMBSTONE_COLUMNS) for t in stones])
            ids = tuple(t.run_id for t in stones)
            some = ", ".join([mark] * len(ids))
            for table in (*RUN_TABLES, "runs"):
                db.execute(f"DELETE FROM {table} WHERE run_id IN ({some})", ids)
        return stones


def _batches(store: Desk, cut: Cut, now: float, by: str, size: int,
             pause: float) -> Iterator[list[Tombstone]]:
    while True:
        stones = store.prune_batch(cut, now=now, by=by, limit=size)
        if not stones:
            return
        yield stones
        if pause:
            time.sleep(pause)  # let waiting writers in between batches


def prune(store: Desk, *, before: float, workflow: str | None = None,
          statuses: tuple[str, ...] = PRUNABLE, dry_run: bool = False, by: str, now: float,
          batch: int = 500, pause: float = 0.01) -> Pruned:
    """Prune the finished runs ``before`` a time (see the module); ``dry_run`` counts."""
    cut = Cut(before=before, workflow=workflow, statuses=statuses)
    started = time.perf_counter()
    if dry_run:
        runs, events = store.count_prunable(cut, now)
        edges = store.fork_edges(cut, now)
        kept = kept_for_forks(edges)
        # Parents whose forks all go too go after them, in a later batch.
        after = {e.parent: e.parent_events for e in edges if e.parent not in kept}
        return Pruned(runs=runs + len(after), events=events + sum(after.values()),
                      seconds=time.perf_counter() - started, kept=kept)
    done = Pruned()
    for stones in _batches(store, cut, now, by, batch, pause):
        done.runs += len(stones)
        done.events += sum(t.log_count for t in stones)
        done.batches += 1
    done.kept = kept_for_forks(store.fork_edges(cut, now))
    done.seconds = time.perf_counter() - started
    return done
