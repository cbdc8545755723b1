"""An in-memory store: the reference implementation of the contract, for tests."""

from __future__ import annotations

import copy
import threading
from typing import Any

from fsm.errors import ApprovalAlreadyDecided, ConcurrentUpdate, RunError, RunNotFound
from fsm.records import GENESIS, Approval, Effect, Event, RunState, StepCommit, ViewRecord, chain
from fsm.store.base import Store
from fsm.store.lease import lease_is_free


class MemoryStore(Store):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._runs: dict[str, RunState] = {}
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._views: dict[str, dict[int, ViewRecord]] = {}
        self._events: dict[str, list[Event]] = {}
        self._effects: dict[str, Effect] = {}
        self._approvals: dict[str, Approval] = {}
        self._artifacts: dict[str, str] = {}
        self._leases: dict[str, str] = {}

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        with self._lock:
            if run.run_id in self._runs:
                raise RunError(f"run {run.run_id!r} already exists", run_id=run.run_id)
            self._runs[run.run_id] = run.model_copy(update={"version": 0})
            self._messages[run.run_id] = []
            self._views[run.run_id] = {}
            self._events[run.run_id] = []
            return self.commit(commit or StepCommit(run=run, expected_version=0))

    def load_run(self, run_id: str) -> RunState:
        with self._lock:
            try:
                return self._runs[run_id].model_copy(deep=True)
            except KeyError:
                raise RunNotFound(run_id) from None

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0,
                  newest_first: bool = False) -> list[RunState]:
        with self._lock:
            runs = sorted(
                (r for r in self._runs.values()
                 if (status is None or r.status == status)
                 and (workflow is None or r.workflow == workflow)),
                key=lambda r: (r.created_at, r.run_id), reverse=newest_first,
            )
            end = None if limit is None else offset + limit
            return [r.model_copy(deep=True) for r in runs[offset:end]]

    def commit(self, commit: StepCommit) -> RunState:
        with self._lock:
            run_id = commit.run.run_id
            current = self.load_run(run_id)
            if current.version != commit.expected_version:
                raise ConcurrentUpdate(run_id, commit.expected_version, current.version)
            if commit.decision is not None:
                approval = self._approvals[commit.decision[0]]
                if approval.decision is not None:
                    raise ApprovalAlreadyDecided(
                        f"approval {approval.approval_id} of run {run_id!r} was already "
                        f"{approval.decision} by {approval.reviewer}", run_id=run_id,
                    )
            new = commit.run.model_copy(
                update={"version": commit.expected_version + 1}, deep=True
            )
            self._runs[run_id] = new
            self._messages[run_id].extend(copy.deepcopy(commit.messages))
            if commit.view is not None:
                self._views[run_id][commit.view.step] = commit.view.model_copy(deep=True)
            log = self._events[run_id]
            prev = log[-1].hash if log else GENESIS
            log.extend(chain(commit.events, prev, len(log)))
            for key, (result, error) in commit.effects_done.items():
                eff = self._effects[key]
                self._effects[key] = eff.model_copy(update={
                    "status": "DONE", "result": copy.deepcopy(result), "error": error,
                    "finished_at": new.updated_at,
                })
            if commit.new_approval is not None:
                self._approvals[commit.new_approval.approval_id] = commit.new_approval
            if commit.decision is not None:
                aid, decision, reviewer, note, at = commit.decision
                self._approvals[aid] = self._approvals[aid].model_copy(update={
                    "decision": decision, "reviewer": reviewer, "note": note, "decided_at": at,
                })
            self._artifacts.update(commit.artifacts)
            return new.model_copy(deep=True)

    def messages(self, run_id: str, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            if run_id not in self._messages:
                raise RunNotFound(run_id)
            return copy.deepcopy(self._messages[run_id][start:end])

    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        with self._lock:
            views = self._views.get(run_id)
            if views is None:
                raise RunNotFound(run_id)
            if not views:
                return None
            if step is None:
                step = max(views)
            v = views.get(step)
            return v.model_copy(deep=True) if v else None

    def events(self, run_id: str) -> list[Event]:
        with self._lock:
            if run_id not in self._events:
                raise RunNotFound(run_id)
            return [e.model_copy(deep=True) for e in self._events[run_id]]

    def claim_effect(self, effect: Effect) -> Effect | None:
        with self._lock:
            existing = self._effects.get(effect.key)
            if existing is not None:
                return existing.model_copy(deep=True)
            self._effects[effect.key] = effect.model_copy(deep=True)
            return None

    def effect(self, key: str) -> Effect | None:
        with self._lock:
            e = self._effects.get(key)
            return e.model_copy(deep=True) if e else None

    def effects(self, run_id: str) -> list[Effect]:
        with self._lock:
            return [e.model_copy(deep=True) for k, e in sorted(self._effects.items())
                    if e.run_id == run_id]

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True) -> list[Approval]:
        with self._lock:
            return [
                a.model_copy(deep=True) for a in self._approvals.values()
                if (run_id is None or a.run_id == run_id)
                and (not pending_only or a.decision is None)
            ]

    def artifact(self, sha256: str) -> str | None:
        with self._lock:
            return self._artifacts.get(sha256)

    def log_head(self, run_id: str) -> tuple[int, str]:
        with self._lock:
            log = self._events.get(run_id)
            if log is None:
                raise RunNotFound(run_id)
            return len(log), (log[-1].hash if log else GENESIS)

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False) -> str | None:
        from fsm.errors import RunLocked

        with self._lock:
            self.load_run(run_id)
            held = self._leases.get(run_id)
            if held is not None and held != owner and not force and not lease_is_free(held):
                raise RunLocked(run_id, held)
            self._leases[run_id] = owner
            return held if held != owner else None

    def release(self, run_id: str, owner: str) -> None:
        with self._lock:
            if self._leases.get(run_id) == owner:
                del self._leases[run_id]
