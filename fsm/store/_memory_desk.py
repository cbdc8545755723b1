"""The desk's rows of the in-memory store: handovers, subjects, tombstones."""

from __future__ import annotations

import threading
from typing import Any

from fsm.records import Approval, Effect, Event, Handover, RunState, StepCommit, ViewRecord
from fsm.store.desk import OPEN, PRUNABLE, Cut, ForkEdge, Queue, Tombstone
from fsm.store.people import Notification, Refusal, notification_key


class MemoryDesk:
    """Handovers, the subjects index and tombstones, kept in dicts (under ``_lock``)."""

    _lock: threading.RLock
    _notifications: dict[str, Notification]
    _runs: dict[str, RunState]
    _messages: dict[str, list[dict[str, Any]]]
    _views: dict[str, dict[int, ViewRecord]]
    _events: dict[str, list[Event]]
    _effects: dict[str, Effect]
    _approvals: dict[str, Approval]
    _leases: dict[str, Any]
    _refusals: list[Refusal]
    _replies: dict[str, Any]
    _tokens: dict[str, str]

    def _init_desk(self) -> None:
        self._handovers: dict[str, Handover] = {}
        #: (workflow, subject) → run id → when it was first indexed.
        self._subjects: dict[tuple[str, str], dict[str, float]] = {}
        self._tombstones: dict[str, Tombstone] = {}

    def _desk(self, c: StepCommit) -> None:
        """Write ``c``'s desk rows (with its other rows, under the store's lock)."""
        h = c.handover
        if h is not None:
            self._handovers[h.handover_id] = h.model_copy()
            if h.taken_at is None and h.closed_at is None:
                key = notification_key(h.handover_id, "waiting")
                self._notifications.setdefault(key, Notification(
                    key=key, run_id=h.run_id, approval_id=h.handover_id, kind="waiting",
                    created_at=h.handed_at, next_attempt_at=h.handed_at))
        if c.subject is not None:
            runs = self._subjects.setdefault((c.run.workflow, c.subject), {})
            runs.setdefault(c.run.run_id, c.run.updated_at)

    def _queued(self, queue: Queue) -> list[Handover]:
        rows = [h for h in self._handovers.values()
                if (not queue.open_only or h.closed_at is None)
                and queue.workflow in (None, h.workflow) and queue.cause in (None, h.cause)
                and (queue.taken_by is None or (h.taken_by or "") == queue.taken_by)]
        return sorted(rows, key=lambda h: (h.handed_at, h.handover_id), reverse=True)

    def handovers(self, queue: Queue = OPEN, *, limit: int = 50,
                  offset: int = 0) -> list[Handover]:
        with self._lock:
            return [h.model_copy() for h in self._queued(queue)[offset:offset + limit]]

    def count_handovers(self, queue: Queue = OPEN) -> int:
        with self._lock:
            return len(self._queued(queue))

    def handover(self, handover_id: str) -> Handover | None:
        with self._lock:
            h = self._handovers.get(handover_id)
            return h.model_copy() if h else None

    def run_handovers(self, run_id: str) -> list[Handover]:
        with self._lock:
            rows = [h for h in self._handovers.values() if h.run_id == run_id]
            return [h.model_copy() for h in sorted(rows, key=lambda h: (h.handed_at,
                                                                         h.handover_id))]

    def subject_runs(self, workflow: str, subject: str) -> list[str]:
        with self._lock:
            runs = self._subjects.get((workflow, subject), {})
            return [r for r, _ in sorted(runs.items(), key=lambda kv: (kv[1], kv[0]))]

    def tombstone(self, run_id: str) -> Tombstone | None:
        with self._lock:
            t = self._tombstones.get(run_id)
            return t.model_copy() if t else None

    # -- retention ------------------------------------------------------------------

    def _prunable(self, cut: Cut, now: float, *, forks: bool = True) -> list[RunState]:
        open_runs = {h.run_id for h in self._handovers.values() if h.closed_at is None}
        parents = {r.forked_from.run_id for r in self._runs.values()
                   if forks and r.forked_from is not None}
        rows = []
        for run in self._runs.values():
            lease = self._leases.get(run.run_id)
            if (run.status in cut.statuses and run.status in PRUNABLE
                    and run.updated_at < cut.before and cut.workflow in (None, run.workflow)
                    and run.run_id not in open_runs and run.run_id not in parents
                    and (lease is None or (lease.until is not None and lease.until < now))):
                rows.append(run)
        return sorted(rows, key=lambda r: (r.updated_at, r.run_id))

    def fork_edges(self, cut: Cut, now: float) -> list[ForkEdge]:
        with self._lock:
            takes = {r.run_id for r in self._prunable(cut, now, forks=False)}
            forks = sorted(((r.forked_from.run_id, r) for r in self._runs.values()
                            if r.forked_from is not None and r.forked_from.run_id in takes),
                           key=lambda pr: (pr[0], pr[1].created_at, pr[1].run_id))
            return [ForkEdge(parent, len(self._events[parent]), r.run_id, r.run_id in takes)
                    for parent, r in forks]

    def count_prunable(self, cut: Cut, now: float) -> tuple[int, int]:
        with self._lock:
            runs = self._prunable(cut, now)
            return len(runs), sum(len(self._events[r.run_id]) for r in runs)

    def prune_batch(self, cut: Cut, *, now: float, by: str, limit: int) -> list[Tombstone]:
        with self._lock:
            stones = []
            for run in self._prunable(cut, now)[:limit]:
                log = self._events[run.run_id]
                stone = Tombstone(run_id=run.run_id, workflow=run.workflow,
                                  definition_hash=run.definition_hash, status=run.status,
                                  head=log[-1].hash if log else "0" * 64, log_count=len(log),
                                  created_at=run.created_at, finished_at=run.updated_at,
                                  pruned_at=now, pruned_by=by)
                self._forget(run.run_id)
                self._tombstones[run.run_id] = stone
                stones.append(stone)
            return [t.model_copy() for t in stones]

    def _forget(self, run_id: str) -> None:
        for rows in (self._runs, self._messages, self._views, self._events, self._leases,
                     self._replies, self._tokens):
            rows.pop(run_id, None)
        for keyed in (self._effects, self._approvals, self._notifications, self._handovers):
            for key in [k for k, v in keyed.items() if v.run_id == run_id]:
                del keyed[key]
        self._refusals[:] = [r for r in self._refusals if r.run_id != run_id]
        for runs in self._subjects.values():
            runs.pop(run_id, None)
