"""The store interface the engine talks to, and the records it keeps.

Every store (in-memory, SQLite, PostgreSQL) passes the same contract suite
(``tests/test_store_contract.py``). One :class:`StepCommit` is applied all or
nothing: the run row, the new transcript messages, the view snapshot, the log
events, finished effects, approval changes and artifacts.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Self

from fsm.errors import StoreError
from fsm.records import (
    Approval,
    Effect,
    Event,
    RunState,
    StepCommit,
    ViewRecord,
    snapshot_json,
)
from fsm.store.people import Account, Notification, Refusal


@dataclass(frozen=True)
class Lease:
    """Who holds a run's lease, and until when (``None``: until released)."""

    owner: str
    until: float | None


@dataclass(frozen=True)
class Claimed:
    """A run a worker claimed: its id, workflow, and the lease holder it replaced."""

    run_id: str
    workflow: str
    previous: str | None


class Store(ABC):
    """Persistence for runs. Implementations must make :meth:`commit` atomic."""

    #: Where the database is (a path or a URL): workflow resources are opened from it.
    location: str = ""

    @abstractmethod
    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        """Insert a new run (version 1) together with its first messages and events."""

    @abstractmethod
    def load_run(self, run_id: str) -> RunState:
        """The run row; raises :class:`~fsm.errors.RunNotFound`."""

    @abstractmethod
    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0,
                  newest_first: bool = False) -> list[RunState]:
        """Runs, oldest first (``newest_first``: newest first), filtered by status and
        workflow; ``offset`` and ``limit`` page through them in the database."""

    @abstractmethod
    def commit(self, commit: StepCommit) -> RunState:
        """Apply a step atomically; the returned run has ``version`` incremented.

        Raises :class:`~fsm.errors.ConcurrentUpdate` when the stored version is not
        ``expected_version`` and :class:`~fsm.errors.ApprovalAlreadyDecided` when the
        decision's approval was decided before. Nothing is written in either case.
        """

    @abstractmethod
    def messages(self, run_id: str, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        """Transcript messages ``[start:end]``."""

    @abstractmethod
    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        """The view snapshot of ``step`` (default: the latest)."""

    @abstractmethod
    def events(self, run_id: str) -> list[Event]: ...

    @abstractmethod
    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None) -> Effect | None:
        """Commit a STARTED row for ``effect.key`` now, in its own transaction.

        Returns ``None`` when this call claimed the key, else the existing row
        (the tool must then not run again). With ``owner`` (and ``version``) the same
        transaction checks that ``owner`` still holds the run's lease (and the run is
        at ``version``): else :class:`~fsm.errors.LeaseLost` (or
        :class:`~fsm.errors.ConcurrentUpdate`) and nothing is claimed.
        """

    @abstractmethod
    def effect(self, key: str) -> Effect | None: ...

    @abstractmethod
    def effects(self, run_id: str) -> list[Effect]:
        """Every effect row of a run, in key order."""

    @abstractmethod
    def approvals(self, run_id: str | None = None, *, pending_only: bool = True) -> list[Approval]:
        ...

    @abstractmethod
    def artifact(self, sha256: str) -> str | None: ...

    @abstractmethod
    def log_head(self, run_id: str) -> tuple[int, str]:
        """(number of log events, hash of the last one), kept with the run row."""

    @abstractmethod
    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        """Take the run's lease or raise :class:`~fsm.errors.RunLocked`; the previous holder.

        The lease lasts ``ttl`` seconds from ``now`` (``None``: until released) and is
        renewed with :meth:`renew`. An expired lease, or one held by a process that no
        longer exists on this host, is taken over; ``force`` takes it from any holder
        (an operator's decision: the holder is gone).
        """

    @abstractmethod
    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        """Extend ``owner``'s lease to ``now + ttl``; False when ``owner`` lost it."""

    @abstractmethod
    def release(self, run_id: str, owner: str) -> None: ...

    @abstractmethod
    def lease(self, run_id: str) -> Lease | None:
        """The run's lease as stored (expired or not), or ``None``."""

    @abstractmethod
    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1) -> list[Claimed]:
        """Lease up to ``limit`` runs that are ``running`` and free, for ``owner``.

        Free: unleased, expired, or held by a dead process of this host. Two workers
        calling this at once never get the same run.
        """

    # -- fleet helpers with defaults that suit one process --------------------------

    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        """Set ``wake`` whenever a run may have become runnable, until ``stop``.

        Returns False when the store cannot notify (the caller then polls).
        """
        return False

    @contextmanager
    def sweep_lock(self) -> Iterator[bool]:
        """Hold the fleet-wide right to sweep expired approvals; yields False if taken."""
        yield True

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    # -- the approval inbox -------------------------------------------------------------
    # Pages of the inbox and the runs list. The defaults for waiting approvals are correct
    # for any store but read everything; the SQL stores override them with indexed queries.

    def waiting(self, workflow: str | None = None, *, limit: int = 50,
                offset: int = 0) -> list[tuple[Approval, RunState]]:
        """Undecided approvals of waiting runs, newest request first, with their runs."""
        rows = []
        for a in self.approvals(pending_only=True):
            run = self.load_run(a.run_id)
            if run.status == "awaiting_approval" and workflow in (None, run.workflow):
                rows.append((a, run))
        rows.sort(key=lambda r: (r[0].requested_at, r[0].approval_id), reverse=True)
        return rows[offset:offset + limit]

    def count_waiting(self, workflow: str | None = None) -> int:
        return len(self.waiting(workflow, limit=2**62))

    def runs_page(self, status: str | None = None, workflow: str | None = None, *,
                  limit: int = 50, offset: int = 0) -> list[RunState]:
        """Runs, newest first."""
        return self.list_runs(status, workflow=workflow, limit=limit, offset=offset,
                              newest_first=True)

    def count_runs(self, status: str | None = None, workflow: str | None = None) -> int:
        return len(self.runs_page(status, workflow, limit=2**62))

    def workflow_names(self) -> list[str]:
        """The workflows that have runs, sorted."""
        return sorted({r.workflow for r in self.list_runs()})

    def run_columns(self, run_id: str) -> tuple[str, str]:
        """(status, workflow) as the run row's own columns hold them, beside its snapshot:
        what the queue and the listings filter on (the audit compares the two)."""
        run = self.load_run(run_id)
        return run.status, run.workflow

    def snapshot_text(self, run_id: str) -> str:
        """The run row's snapshot exactly as stored: the text whose hash the last event of
        the run's last commit records (the audit compares the two)."""
        return snapshot_json(self.load_run(run_id))

    def approval(self, approval_id: str) -> Approval | None:
        for a in self.approvals(pending_only=False):
            if a.approval_id == approval_id:
                return a
        return None

    # Accounts, refused attempts and the notification outbox. A store that keeps them
    # also writes a notification row inside :meth:`commit` whenever a commit requests an
    # approval or records an expiry, in the same transaction.

    def add_account(self, account: Account) -> None:
        """Insert a new account; :class:`~fsm.store.schema.StoreError` if the name is taken."""
        raise self._no_people()

    def save_account(self, account: Account, *, was: float | None = None) -> None:
        """Replace an existing account's row (password, limit, disabled). ``was``: the
        ``updated_at`` of the row as it was read; the save is refused (``StoreError``,
        nothing changed) when the row has changed since, so two changes made at once
        cannot undo one another."""
        raise self._no_people()

    def account(self, name: str) -> Account | None:
        raise self._no_people()

    def accounts(self) -> list[Account]:
        raise self._no_people()

    def add_refusal(self, refusal: Refusal) -> None:
        raise self._no_people()

    def refusals(self, run_id: str) -> list[Refusal]:
        raise self._no_people()

    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        """Notification rows of these approvals (or of a run), oldest first."""
        raise self._no_people()

    def due_notifications(self, now: float, limit: int = 20) -> list[Notification]:
        """Pending rows whose next attempt is due, oldest first."""
        raise self._no_people()

    def save_notification(self, note: Notification) -> None:
        """Record a delivery attempt's outcome (status, attempts, next attempt, error)."""
        raise self._no_people()

    def _no_people(self) -> Exception:
        return StoreError(f"{type(self).__name__} keeps no accounts or notifications")
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
