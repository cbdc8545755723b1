"""What a store does, by role: one small protocol per concern.

A store is one database (DBOS's "system database"): the memory, SQLite and PostgreSQL
stores answer every role below (:class:`~fsm.store.base.Store`), and ``store.roles``
(:class:`Roles`) holds one object per role: a SQL store's are objects over its one
:class:`~fsm.store.database.Database`.
Code that needs one concern asks for its role instead, so what it can touch is what its
signature says (the auditor reads runs and their rows but cannot commit; the accounts
page keeps accounts but cannot see a transcript). The reading half of a role is its own
protocol where readers are common (Burr's loader/saver split): :class:`RunReads` for
whoever only reads runs and their logs, :class:`Runs` for the one writer of a step.

=================  =========================================================  ============
role               what it keeps                                              written by
=================  =========================================================  ============
:class:`Runs`      run rows, transcripts, views, the hash-chained log,        a step's
                   artifacts                                                  commit
:class:`Effects`   write intents and their results (the claim of a write)     a step
:class:`Approvals` requests for a person's decision, and the decisions        a commit
:class:`Definitions` workflow definitions by hash, and the runs on each       the engine
:class:`People`    accounts, refused attempts, the notification outbox        the inbox
:class:`Conversations` customers' replies, reply tokens                       the reply
                                                                              endpoint
:class:`Desk`      handovers, request subjects, tombstones, retention         a commit,
                                                                              a prune
:class:`Leases`    who drives a run (leases), the queue of runnable runs      workers
:class:`Inbox`     the inbox's and the runs list's pages (queries only)       nobody
=================  =========================================================  ============

Each protocol's methods are abstract: a class that names a role as a base must
implement all of it (or be abstract itself).
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from fsm.errors import RowDamaged
from fsm.records import (
    Approval,
    DefinitionCount,
    DefinitionRecord,
    Effect,
    Event,
    Handover,
    RunState,
    StepCommit,
    ViewRecord,
)
from fsm.records.conversation import Reply
from fsm.signing import Keys
from fsm.store.desk import OPEN, Cut, ForkEdge, Queue, Tombstone
from fsm.store.lease import Claimed, Lease
from fsm.store.page import Page
from fsm.store.people import Account, Notification, Refusal

__all__ = ["Approvals", "Conversations", "Definitions", "Desk", "Effects", "Evidence",
           "Handovers", "Inbox", "InboxRows", "Leases", "Migrations", "Outbox", "Outcomes",
           "Fleet", "Pages", "People", "Requests", "Roles", "RunReads", "Runs", "Versions"]


class RunReads(Protocol):
    """Reading runs: their rows, transcripts, views, logs and artifacts (the loader)."""

    #: Where the database is (a path or a URL): workflow resources are opened from it.
    location: str
    #: The key that signs every commit's log head, and the public keys that verify them.
    keys: Keys

    @abstractmethod
    def load_run(self, run_id: str) -> RunState:
        """The run row; raises :class:`~fsm.errors.RunNotFound`."""

    @abstractmethod
    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0, newest_first: bool = False,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[RunState]:
        """Runs, oldest first (``newest_first``: newest first), filtered by status and
        workflow; ``offset`` and ``limit`` page through them in the database.

        A run row that cannot be read raises :class:`~fsm.errors.RowDamaged`; with
        ``skip_damaged``, it is left out and named in the :class:`~fsm.store.page.Page`'s
        ``damaged`` instead (so are the damaged rows of :meth:`Approvals.approvals`,
        :meth:`Inbox.waiting` and :meth:`People.due_notifications`). ``damaged``, a list
        the read fills, is the deprecated spelling."""

    @abstractmethod
    def messages(self, run_id: str, start: int = 0, end: int | None = None
                 ) -> list[dict[str, Any]]:
        """Transcript messages ``[start:end]`` as stored: their JSON objects (read them
        as typed messages with :func:`fsm.records.transcript.read`)."""

    @abstractmethod
    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        """The view snapshot of ``step`` (default: the latest)."""

    @abstractmethod
    def events(self, run_id: str) -> list[Event]:
        """The run's log, in order."""

    @abstractmethod
    def log_head(self, run_id: str) -> tuple[int, str]:
        """(number of log events, hash of the last one), kept with the run row."""

    @abstractmethod
    def signed_head(self, run_id: str) -> tuple[int, str, str | None]:
        """(number of log events, hash of the last one, the head's signature ``KEY:HEX``
        or ``None``), kept with the run row (see :mod:`fsm.signing`)."""

    @abstractmethod
    def artifact(self, sha256: str) -> str | None:
        """A large tool result kept by the hash of its text, or ``None``."""

    @abstractmethod
    def run_columns(self, run_id: str) -> tuple[str, str]:
        """(status, workflow) as the run row's own columns hold them, beside its snapshot:
        what the queue and the listings filter on (the audit compares the two)."""

    @abstractmethod
    def snapshot_text(self, run_id: str) -> str:
        """The run row's snapshot exactly as stored: the text whose hash the last event of
        the run's last commit records (the audit compares the two)."""


class Runs(RunReads, Protocol):
    """Writing runs (the saver): one :class:`~fsm.records.StepCommit` at a time, all or
    nothing — the run row, its new messages, view, log events, finished effects, approval
    changes, replies read, artifacts and the rows of the outbox and the desk."""

    @abstractmethod
    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        """Insert a new run (version 1) together with its first messages and events."""

    @abstractmethod
    def commit(self, commit: StepCommit) -> RunState:
        """Apply a step atomically; the returned run has ``version`` incremented.

        Raises :class:`~fsm.errors.ConcurrentUpdate` when the stored version is not
        ``expected_version`` (or :class:`~fsm.errors.LeaseLost` when ``owner`` no longer
        holds the lease) and :class:`~fsm.errors.ApprovalAlreadyDecided` when the
        decision's approval was decided before. Nothing is written in either case.
        """


class Effects(Protocol):
    """Write intents: the row claimed before a write tool runs, finished by the commit."""

    @abstractmethod
    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None, claim: Event | None = None) -> Effect | None:
        """Commit a STARTED row for ``effect.key`` now, in its own transaction.

        Returns ``None`` when this call claimed the key, else the existing row
        (the tool must then not run again). With ``owner`` (and ``version``) the same
        transaction checks that ``owner`` still holds the run's lease (and the run is
        at ``version``): else :class:`~fsm.errors.LeaseLost` (or
        :class:`~fsm.errors.ConcurrentUpdate`) and nothing is claimed.

        With ``claim`` (a ``claim`` event), the same transaction appends it to the run's
        log, records its hash in the row's ``claim``, and adds one to the run's version;
        nothing of it is written when the key was claimed before.
        """

    @abstractmethod
    def effect(self, key: str) -> Effect | None:
        """The effect row of an idempotency key, or ``None``."""

    @abstractmethod
    def effects(self, run_id: str) -> list[Effect]:
        """Every effect row of a run, in key order."""


class Approvals(Protocol):
    """Requests for a person's decision (written and decided by commits)."""

    @abstractmethod
    def approvals(self, run_id: str | None = None, *, pending_only: bool = True,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[Approval]:
        """Approvals (of a run), oldest request first; ``pending_only``: undecided."""

    @abstractmethod
    def approval(self, approval_id: str) -> Approval | None:
        """One approval by id, decided or not, or ``None``."""


class Definitions(Protocol):
    """Workflow definitions kept by their hash, and which runs live on each."""

    @abstractmethod
    def record_definition(self, record: DefinitionRecord) -> bool:
        """Keep ``record`` unless a definition with its hash is kept already (the first
        record of a hash stays); True when this call added it."""

    @abstractmethod
    def definition(self, definition_hash: str) -> DefinitionRecord | None:
        """The recorded definition with this hash, or ``None``."""

    @abstractmethod
    def definitions(self, workflow: str | None = None) -> list[DefinitionRecord]:
        """Recorded definitions (of ``workflow``), in the order they were first seen."""

    @abstractmethod
    def definition_counts(self, workflow: str | None = None,
                          status: str | None = None) -> list[DefinitionCount]:
        """How many runs each (workflow, definition, status) has, from the run rows'
        columns, sorted by workflow, definition and status."""

    @abstractmethod
    def version_labels(self, hashes: Iterable[str]) -> dict[str, str]:
        """Each definition hash → its recorded version label (the hash itself when the
        definition is unlabelled or was never recorded)."""

    @abstractmethod
    def definition_column(self, run_id: str) -> str:
        """The definition hash the run row's own column holds, beside its snapshot: what
        the queue claims by (the audit compares the two)."""


class People(Protocol):
    """Accounts, refused attempts and the notification outbox.

    A store that keeps them also writes a notification row inside a commit that requests
    an approval or records its decision or expiry, in the same transaction.
    """

    @abstractmethod
    def add_account(self, account: Account) -> None:
        """Insert a new account; :class:`~fsm.errors.StoreError` if the name is taken."""

    @abstractmethod
    def save_account(self, account: Account, *, was: float | None = None) -> None:
        """Replace an existing account's row (password, limit, disabled). ``was``: the
        ``updated_at`` of the row as it was read; the save is refused (``StoreError``,
        nothing changed) when the row has changed since, so two changes made at once
        cannot undo one another."""

    @abstractmethod
    def account(self, name: str) -> Account | None: ...

    @abstractmethod
    def accounts(self) -> list[Account]:
        """Every account, by name."""

    @abstractmethod
    def add_refusal(self, refusal: Refusal) -> None:
        """Keep a refused attempt, chained after the run's last one."""

    @abstractmethod
    def refusals(self, run_id: str) -> list[Refusal]:
        """The run's refused attempts, in the order they were kept."""

    @abstractmethod
    def refusal_head(self, run_id: str) -> tuple[int, str] | None:
        """(how many refused attempts the run row records, the hash of the last one), or
        ``None`` when this store does not chain them (it keeps its records as objects,
        which nobody edits behind its back)."""

    @abstractmethod
    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        """Notification rows of these approvals (or of a run), oldest first."""

    @abstractmethod
    def due_notifications(self, now: float, limit: int = 20, *, skip_damaged: bool = False,
                          damaged: list[RowDamaged] | None = None) -> Page[Notification]:
        """Pending rows whose next attempt is due, oldest first."""

    @abstractmethod
    def save_notification(self, note: Notification) -> None:
        """Record a delivery attempt's outcome (status, attempts, next attempt, error)."""


class Conversations(Protocol):
    """Customers' replies, kept the moment they arrive (each run's in the order their
    transactions land), read by the run in a later commit (``replies_read``), and the hash
    of each run's reply token (``token_hash`` of the commit that creates it)."""

    @abstractmethod
    def add_reply(self, reply: Reply, *, version: int) -> Reply:
        """Keep ``reply`` as the run's next one (its ``seq`` set), in one transaction that
        checks the run is still at ``version``: else :class:`~fsm.errors.ConcurrentUpdate`
        and nothing is kept. Replies never change the run row or its version."""

    @abstractmethod
    def replies(self, run_id: str, *, unread_only: bool = False) -> list[Reply]:
        """The run's replies in ``seq`` order (``unread_only``: those not read yet)."""

    @abstractmethod
    def reply_token(self, run_id: str) -> str | None:
        """The hash of the run's reply token, or ``None`` when it was given none."""


class Desk(Protocol):
    """The desk: handed-over runs (a commit that hands a run over writes its row, and a
    notification row, in the same transaction), the subjects of requests, and retention
    (the tombstones of pruned runs)."""

    @abstractmethod
    def handovers(self, queue: Queue = OPEN, *, limit: int = 50,
                  offset: int = 0) -> list[Handover]:
        """Handovers in ``queue`` (default: the open ones), newest first."""

    @abstractmethod
    def count_handovers(self, queue: Queue = OPEN) -> int: ...

    @abstractmethod
    def handover(self, handover_id: str) -> Handover | None: ...

    @abstractmethod
    def run_handovers(self, run_id: str) -> list[Handover]:
        """Every handover of a run, oldest first."""

    @abstractmethod
    def subject_runs(self, workflow: str, subject: str) -> list[str]:
        """The runs of ``workflow`` whose requests were about ``subject``, oldest first."""

    @abstractmethod
    def tombstone(self, run_id: str) -> Tombstone | None:
        """What is kept of a pruned run, or ``None``."""

    @abstractmethod
    def count_prunable(self, cut: Cut, now: float) -> tuple[int, int]:
        """(runs, log events) that a prune of ``cut`` would delete now (see
        :mod:`fsm.store.prune`)."""

    @abstractmethod
    def fork_edges(self, cut: Cut, now: float) -> list[ForkEdge]:
        """The runs ``cut`` takes but for their forks (a run with a fork is never pruned
        before it), each with each of its forks, by parent then oldest fork first."""

    @abstractmethod
    def prune_batch(self, cut: Cut, *, now: float, by: str, limit: int) -> list[Tombstone]:
        """Delete up to ``limit`` runs of ``cut`` in one transaction, writing a tombstone
        of each; the tombstones (none: nothing is left to prune)."""


class Leases(Protocol):
    """Who drives a run, and the queue of runs waiting for a driver (the runs table is
    the queue: there is no second one whose state could disagree with it)."""

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
    def release(self, run_id: str, owner: str) -> None:
        """Give the lease back (nothing happens when ``owner`` does not hold it)."""

    @abstractmethod
    def lease(self, run_id: str) -> Lease | None:
        """The run's lease as stored (expired or not), or ``None``."""

    @abstractmethod
    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1,
                       definitions: list[str] | None = None,
                       exclude: Collection[str] = ()) -> list[Claimed]:
        """Lease up to ``limit`` runs that are ``running`` and free, for ``owner``.

        Free: unleased, expired, or held by a dead process of this host. Two workers
        calling this at once never get the same run. ``definitions`` (hashes) claims only
        runs on those definitions: a worker claims only what its code can drive.
        ``exclude`` (run ids) is never claimed: a worker passes the runs it still has in
        flight, so that a run it gave back from a step that never returned goes to
        another worker, not to a second thread of its own.
        """

    @abstractmethod
    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        """Set ``wake`` whenever a run may have become runnable, until ``stop``.

        Returns False when the store cannot notify (the caller then polls).
        """

    @abstractmethod
    def sweep_lock(self) -> AbstractContextManager[bool]:
        """Hold the fleet-wide right to sweep expired approvals; yields False if taken."""


class Inbox(Protocol):
    """The pages of the approval inbox and the runs list: queries over the other roles'
    rows, answered by the database (paged, counted, indexed)."""

    @abstractmethod
    def waiting(self, workflow: str | None = None, *, limit: int = 50, offset: int = 0,
                skip_damaged: bool = False, damaged: list[RowDamaged] | None = None
                ) -> Page[tuple[Approval, RunState]]:
        """Undecided approvals of waiting runs, newest request first, with their runs."""

    @abstractmethod
    def count_waiting(self, workflow: str | None = None) -> int: ...

    @abstractmethod
    def runs_page(self, status: str | None = None, workflow: str | None = None, *,
                  limit: int = 50, offset: int = 0) -> list[RunState]:
        """Runs, newest first."""

    @abstractmethod
    def count_runs(self, status: str | None = None, workflow: str | None = None) -> int: ...

    @abstractmethod
    def workflow_names(self) -> list[str]:
        """The workflows that have runs, sorted."""


class Evidence(RunReads, Effects, Approvals, Definitions, Desk, People, Conversations,
               Protocol):
    """Every row a run left, in every role: what the audit and the duplicates a page
    shows read (no lease, no page of the inbox). Only a whole store answers it."""


class InboxRows(People, Inbox, Protocol):
    """The inbox's rows (accounts, refused attempts, the outbox) and its pages."""


@dataclass(frozen=True)
class Roles:
    """A store's roles, one object each (a SQL store's are objects over its one
    database; the memory store is every role itself). Code that needs one concern takes
    that role's protocol, and any store's ``store.roles.<role>`` answers it:
    ``unfinished_writes(store.roles.effects, runs)`` reads effects and can do nothing
    else. Code that reads several roles (the audit's :class:`Evidence`) takes the store."""

    runs: Runs
    effects: Effects
    approvals: Approvals
    definitions: Definitions
    inbox: InboxRows
    conversations: Conversations
    desk: Desk
    leases: Leases


# Bundles of roles, each what one kind of reader takes: each spans several objects of
# ``store.roles``, so only a whole store answers it.
class Requests(RunReads, Approvals, Protocol):
    """Runs and the requests for a person's decision on them: what checks a request
    before it is decided, and what finds the runs due a sweep."""


class Outbox(RunReads, Approvals, Desk, People, Protocol):
    """The notification outbox and what each of its rows is about (a run, and its
    approval or its handover): what delivers the notifications."""


class Handovers(RunReads, Desk, Protocol):
    """Runs and their handovers: what a handover's page reads."""


class Pages(Evidence, Inbox, Protocol):
    """Every row a run left, and the inbox's pages: what the inbox's list of requests
    reads (no commit, no lease)."""


class Versions(RunReads, Definitions, Protocol):
    """Runs and the definitions they live on: what lists the versions and picks the runs
    of one."""


class Migrations(Versions, Effects, Protocol):
    """Runs, their definitions and the claims of their writes: what plans a migration,
    and what checks a candidate definition against stored runs (neither writes)."""


class Fleet(RunReads, Approvals, Leases, Protocol):
    """Runs, the requests they wait on and their leases: what counts the fleet's runs
    by status, in flight and runnable."""


class Outcomes(RunReads, Effects, Approvals, Conversations, Protocol):
    """What a run left of its own: its row, log and transcript, its writes, its
    decisions and its customer's replies (what a suite built from runs reads)."""
