"""An in-memory store: the reference implementation of the contract, for tests."""

from __future__ import annotations

import copy
import threading
from collections.abc import Collection
from typing import Any

from fsm.errors import (
    ApprovalAlreadyDecided,
    RowDamaged,
    RunError,
    RunLocked,
    RunNotFound,
    StoreError,
)
from fsm.records import (
    GENESIS,
    Approval,
    DefinitionCount,
    DefinitionRecord,
    Effect,
    Event,
    RunState,
    StepCommit,
    ViewRecord,
    chain,
)
from fsm.records.conversation import Reply
from fsm.signing import Keys
from fsm.store._memory_desk import MemoryDesk
from fsm.store.base import Claimed, Lease, Store
from fsm.store.lease import check_fence, expiry, lease_held
from fsm.store.page import Page, old_spelling
from fsm.store.people import (
    Account,
    Notification,
    Refusal,
    account_not_saved,
    notification_key,
    outbox_rows,
)


class MemoryStore(MemoryDesk, Store):
    """Every row as objects in this process; ``keys`` sign the log's heads (default: a
    new key held in memory, which dies with the store)."""

    def __init__(self, keys: Keys | None = None) -> None:
        self.keys = keys or Keys.generate()
        #: run_id → the signature of its log head.
        self._sigs: dict[str, str] = {}
        self._lock = threading.RLock()
        self._runs: dict[str, RunState] = {}
        self._messages: dict[str, list[dict[str, Any]]] = {}
        self._views: dict[str, dict[int, ViewRecord]] = {}
        self._events: dict[str, list[Event]] = {}
        self._effects: dict[str, Effect] = {}
        self._approvals: dict[str, Approval] = {}
        self._artifacts: dict[str, str] = {}
        self._leases: dict[str, Lease] = {}
        self._accounts: dict[str, Account] = {}
        self._refusals: list[Refusal] = []
        self._notifications: dict[str, Notification] = {}
        self._init_desk()
        self._definitions: dict[str, DefinitionRecord] = {}
        self._replies: dict[str, list[Reply]] = {}
        self._tokens: dict[str, str] = {}

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        with self._lock:
            if run.run_id in self._runs:
                raise RunError(f"run {run.run_id!r} already exists", run_id=run.run_id)
            self._runs[run.run_id] = run.model_copy(update={"version": 0})
            self._messages[run.run_id] = []
            self._views[run.run_id] = {}
            self._events[run.run_id] = []
            return self._commit(commit or StepCommit(run=run, expected_version=0), fence=False)

    def load_run(self, run_id: str) -> RunState:
        with self._lock:
            try:
                return self._runs[run_id].model_copy(deep=True)
            except KeyError:
                raise self.not_found(run_id) from None

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0, newest_first: bool = False,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[RunState]:
        # Records kept as objects are never damaged: a page's ``damaged`` stays empty.
        old_spelling("list_runs", damaged)
        with self._lock:
            runs = sorted(
                (r for r in self._runs.values()
                 if (status is None or r.status == status)
                 and (workflow is None or r.workflow == workflow)),
                key=lambda r: (r.created_at, r.run_id), reverse=newest_first,
            )
            end = None if limit is None else offset + limit
            return Page(r.model_copy(deep=True) for r in runs[offset:end])

    def commit(self, commit: StepCommit) -> RunState:
        return self._commit(commit, fence=True)

    def _fence(self, run_id: str, owner: str | None, version: int | None) -> RunState:
        current = self.load_run(run_id)
        held = self._leases.get(run_id)
        check_fence(run_id, (current.version, held.owner if held else None), owner=owner,
                    version=version)
        return current

    def _commit(self, commit: StepCommit, *, fence: bool) -> RunState:
        with self._lock:
            run_id = commit.run.run_id
            self._fence(run_id, commit.owner if fence else None, commit.expected_version)
            self._check_replies(run_id, commit.replies_read)
            if commit.decision is not None:
                approval = self._approvals[commit.decision.approval_id]
                if approval.decision is not None:
                    raise ApprovalAlreadyDecided(
                        f"approval {approval.approval_id} of run {run_id!r} was already "
                        f"{approval.decision} by {approval.reviewer}", run_id=run_id,
                    )
            new = commit.run.model_copy(
                update={"version": commit.expected_version + 1}, deep=True
            )
            self._runs[run_id] = new
            self._messages[run_id].extend(copy.deepcopy(commit.message_dicts))
            if commit.view is not None:
                self._views[run_id][commit.view.step] = commit.view.model_copy(deep=True)
            log = self._events[run_id]
            prev = log[-1].hash if log else GENESIS
            base = (len(log), prev)
            log.extend(Event.model_construct(**row) for row in chain(commit.events, prev, len(log)))
            self._sign(run_id, base)
            for key, (result, error) in commit.effects_done.items():
                eff = self._effects[key]
                self._effects[key] = eff.model_copy(update={
                    "status": "DONE", "result": copy.deepcopy(result), "error": error,
                    "finished_at": new.updated_at,
                })
            if commit.new_approval is not None:
                self._approvals[commit.new_approval.approval_id] = commit.new_approval
            if commit.decision is not None:
                d = commit.decision
                self._approvals[d.approval_id] = self._approvals[d.approval_id].model_copy(
                    update={"decision": d.decision, "reviewer": d.reviewer, "note": d.note,
                            "decided_at": d.time, "approved_args": d.args})
            self._artifacts.update(commit.artifacts)
            self._conversation(new, commit)
            self._outbox(commit)
            self._desk(commit)
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

    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None, claim: Event | None = None) -> Effect | None:
        with self._lock:
            if owner is not None or version is not None or claim is not None:
                run = self._fence(effect.run_id, owner, version)
            existing = self._effects.get(effect.key)
            if existing is not None:
                return existing.model_copy(deep=True)
            row = effect.model_copy(deep=True)
            if claim is not None:
                log = self._events[effect.run_id]
                base = (len(log), log[-1].hash if log else GENESIS)
                (logged,) = chain([claim], base[1], len(log))
                log.append(Event.model_construct(**logged))
                row.claim = logged["hash"]
                self._sign(effect.run_id, base)
                self._runs[run.run_id] = run.model_copy(update={"version": run.version + 1})
            self._effects[effect.key] = row
            return None

    def effect(self, key: str) -> Effect | None:
        with self._lock:
            e = self._effects.get(key)
            return e.model_copy(deep=True) if e else None

    def effects(self, run_id: str) -> list[Effect]:
        with self._lock:
            return [e.model_copy(deep=True) for k, e in sorted(self._effects.items())
                    if e.run_id == run_id]

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[Approval]:
        old_spelling("approvals", damaged)
        with self._lock:
            return Page(
                a.model_copy(deep=True) for a in self._approvals.values()
                if (run_id is None or a.run_id == run_id)
                and (not pending_only or a.decision is None)
            )

    def artifact(self, sha256: str) -> str | None:
        with self._lock:
            return self._artifacts.get(sha256)

    def _sign(self, run_id: str, base: tuple[int, str]) -> None:
        count, head = self.log_head(run_id)
        log = self._events[run_id]
        self._sigs[run_id] = self.keys.extend(
            run_id, (*base, self._sigs.get(run_id)), count, head, trusted=False,
            hash_at=lambda seq: log[seq].hash if seq < len(log) else None,
            public=self._runs[run_id].status != "running")

    def signed_head(self, run_id: str) -> tuple[int, str, str | None]:
        with self._lock:
            count, head = self.log_head(run_id)
            return count, head, self._sigs.get(run_id)

    def log_head(self, run_id: str) -> tuple[int, str]:
        with self._lock:
            log = self._events.get(run_id)
            if log is None:
                raise RunNotFound(run_id)
            return len(log), (log[-1].hash if log else GENESIS)

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        with self._lock:
            self.load_run(run_id)
            held = self._leases.get(run_id)
            if (held is not None and held.owner != owner and not force
                    and lease_held(held.owner, held.until, now)):
                raise RunLocked(run_id, held.owner)
            self._leases[run_id] = Lease(owner, expiry(now, ttl))
            return held.owner if held is not None and held.owner != owner else None

    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        with self._lock:
            held = self._leases.get(run_id)
            if held is None or held.owner != owner:
                return False
            self._leases[run_id] = Lease(owner, now + ttl)
            return True

    def release(self, run_id: str, owner: str) -> None:
        with self._lock:
            held = self._leases.get(run_id)
            if held is not None and held.owner == owner:
                del self._leases[run_id]

    def lease(self, run_id: str) -> Lease | None:
        with self._lock:
            self.load_run(run_id)
            return self._leases.get(run_id)

    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1,
                       definitions: list[str] | None = None,
                       exclude: Collection[str] = ()) -> list[Claimed]:
        out: list[Claimed] = []
        with self._lock:
            for run in sorted(self._runs.values(), key=lambda r: (r.updated_at, r.run_id)):
                if len(out) >= limit:
                    break
                if run.status != "running" or run.run_id in exclude or (
                        workflows and run.workflow not in workflows):
                    continue
                if definitions is not None and run.definition_hash not in definitions:
                    continue
                held = self._leases.get(run.run_id)
                if held is not None and lease_held(held.owner, held.until, now):
                    continue
                self._leases[run.run_id] = Lease(owner, now + ttl)
                out.append(Claimed(run.run_id, run.workflow, held.owner if held else None))
        return out

    # -- definitions ----------------------------------------------------------------

    def record_definition(self, record: DefinitionRecord) -> bool:
        with self._lock:
            if record.definition_hash in self._definitions:
                return False
            self._definitions[record.definition_hash] = record
            return True

    def definition(self, definition_hash: str) -> DefinitionRecord | None:
        with self._lock:
            return self._definitions.get(definition_hash)

    def definitions(self, workflow: str | None = None) -> list[DefinitionRecord]:
        with self._lock:
            return [d for d in self._definitions.values()
                    if workflow is None or d.workflow == workflow]

    def definition_counts(self, workflow: str | None = None,
                          status: str | None = None) -> list[DefinitionCount]:
        groups: dict[tuple[str, str, str], list[str]] = {}
        with self._lock:
            for r in self._runs.values():
                if workflow in (None, r.workflow) and status in (None, r.status):
                    groups.setdefault((r.workflow, r.definition_hash, r.status),
                                      []).append(r.run_id)
        return [DefinitionCount(w, h, st, len(ids), min(ids))
                for (w, h, st), ids in sorted(groups.items())]
    # -- conversations --------------------------------------------------------------

    def _check_replies(self, run_id: str, seqs: list[int]) -> None:
        replies = self._replies.get(run_id, [])
        for seq in seqs:
            if not 0 < seq <= len(replies) or replies[seq - 1].read_step is not None:
                raise StoreError(f"reply {seq} of run {run_id!r} is missing or was read "
                                 "already; nothing of this step was saved")

    def _conversation(self, new: RunState, commit: StepCommit) -> None:
        replies = self._replies.get(new.run_id, [])
        for seq in commit.replies_read:
            replies[seq - 1] = replies[seq - 1].model_copy(update={"read_step": new.step})
        if commit.token_hash is not None:
            self._tokens[new.run_id] = commit.token_hash

    def add_reply(self, reply: Reply, *, version: int) -> Reply:
        with self._lock:
            self._fence(reply.run_id, None, version)
            replies = self._replies.setdefault(reply.run_id, [])
            kept = reply.model_copy(update={"seq": len(replies) + 1, "read_step": None})
            replies.append(kept)
            return kept.model_copy()

    def replies(self, run_id: str, *, unread_only: bool = False) -> list[Reply]:
        with self._lock:
            return [r.model_copy() for r in self._replies.get(run_id, [])
                    if not unread_only or r.read_step is None]

    def reply_token(self, run_id: str) -> str | None:
        with self._lock:
            return self._tokens.get(run_id)

    # -- the approval inbox: accounts, refusals, the notification outbox ---------------

    def _outbox(self, c: StepCommit) -> None:
        new_id = c.new_approval.approval_id if c.new_approval is not None else None
        for aid, kind in outbox_rows(new_id, c.decision):
            key = notification_key(aid, kind)
            self._notifications.setdefault(key, Notification(
                key=key, run_id=c.run.run_id, approval_id=aid, kind=kind,
                created_at=c.run.updated_at, next_attempt_at=c.run.updated_at,
            ))

    def add_account(self, account: Account) -> None:
        with self._lock:
            if account.name in self._accounts:
                raise StoreError(f"account {account.name!r} already exists")
            self._accounts[account.name] = account.model_copy()

    def save_account(self, account: Account, *, was: float | None = None) -> None:
        with self._lock:
            found = self._accounts.get(account.name)
            if found is None or (was is not None and found.updated_at != was):
                raise account_not_saved(account.name, found is not None)
            self._accounts[account.name] = account.model_copy()

    def account(self, name: str) -> Account | None:
        with self._lock:
            a = self._accounts.get(name)
            return a.model_copy() if a else None

    def accounts(self) -> list[Account]:
        with self._lock:
            return [a.model_copy() for _, a in sorted(self._accounts.items())]

    def add_refusal(self, refusal: Refusal) -> None:
        with self._lock:
            n = len(self._refusals) + 1
            self._refusals.append(refusal.model_copy(update={"refusal_id": n}))

    def refusals(self, run_id: str) -> list[Refusal]:
        with self._lock:
            return [r.model_copy() for r in self._refusals if r.run_id == run_id]

    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        with self._lock:
            rows = [n for n in self._notifications.values()
                    if (approval_ids is not None and n.approval_id in approval_ids)
                    or (approval_ids is None and n.run_id == run_id)]
            return [n.model_copy() for n in sorted(rows, key=lambda n: (n.created_at, n.key))]

    def due_notifications(self, now: float, limit: int = 20, *, skip_damaged: bool = False,
                          damaged: list[RowDamaged] | None = None) -> Page[Notification]:
        old_spelling("due_notifications", damaged)
        with self._lock:
            rows = [n for n in self._notifications.values()
                    if n.status == "pending" and n.next_attempt_at <= now]
            rows.sort(key=lambda n: (n.next_attempt_at, n.key))
            return Page(n.model_copy() for n in rows[:limit])

    def save_notification(self, note: Notification) -> None:
        with self._lock:
            if note.key in self._notifications:
                self._notifications[note.key] = note.model_copy()


