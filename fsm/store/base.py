"""The store: one database with every role of :mod:`fsm.store.roles`.

Every store (in-memory, SQLite, PostgreSQL) passes the same contract suite
(``tests/store/test_store_contract.py``). One :class:`StepCommit` is applied all or
nothing: the run row, the new transcript messages, the view snapshot, the log
events, finished effects, approval changes and artifacts. Code that needs one concern
asks for its role (:class:`~fsm.store.roles.RunReads`, :class:`~fsm.store.roles.People`,
...) rather than for the whole :class:`Store`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Self

from fsm.errors import FSMError, RowDamaged, RunNotFound, RunPruned
from fsm.records import Approval, DefinitionRecord, RunState, snapshot_json, utc
from fsm.store.desk import Tombstone
from fsm.store.lease import Claimed, Lease
from fsm.store.page import Page, old_spelling
from fsm.store.roles import (
    Approvals,
    Conversations,
    Definitions,
    Desk,
    Effects,
    Inbox,
    Leases,
    People,
    Roles,
    RunReads,
    Runs,
)

__all__ = ["Claimed", "Lease", "RunReads", "Runs", "Store", "labels", "missing"]


def labels(hashes: Iterable[str],
           definition: Callable[[str], DefinitionRecord | None]) -> dict[str, str]:
    """Each definition hash → its label (the hash itself when ``definition`` finds none)."""
    out: dict[str, str] = {}
    for h in hashes:
        if h not in out:
            found = definition(h)
            out[h] = found.label if found is not None else h
    return out


def missing(run_id: str, tombstone: Callable[[str], Tombstone | None]) -> RunNotFound:
    """The error for a run a store does not hold: :class:`RunPruned` (saying when and by
    whom) when ``tombstone`` finds what is kept of it."""
    try:
        stone = tombstone(run_id)
    except FSMError:
        stone = None  # a damaged tombstones table: the run is not there either way
    if stone is None:
        return RunNotFound(run_id)
    return RunPruned(run_id, pruned_at=utc(stone.pruned_at), pruned_by=stone.pruned_by,
                     status=stone.status)


class Store(Runs, Effects, Approvals, Definitions, People, Conversations, Desk, Leases,
            Inbox):
    """Persistence for runs: every role, in one database. Implementations must make
    :meth:`commit` atomic; what every store may compute from its other methods has a
    default here (the SQL stores answer the inbox's pages with indexed queries)."""

    #: Where the database is (a path or a URL): workflow resources are opened from it.
    location: str = ""

    @cached_property
    def roles(self) -> Roles:
        """The store's roles, one object each (a store that is every role itself: it)."""
        return Roles(runs=self, effects=self, approvals=self, definitions=self, inbox=self,
                     conversations=self, desk=self, leases=self)

    def version_labels(self, hashes: Iterable[str]) -> dict[str, str]:
        return labels(hashes, self.definition)

    def definition_column(self, run_id: str) -> str:
        return self.load_run(run_id).definition_hash

    def not_found(self, run_id: str) -> RunNotFound:
        """The error for a run this store does not hold (see :func:`missing`)."""
        return missing(run_id, self.tombstone)

    def forks_of(self, run_id: str) -> list[str]:
        """The ids of the runs forked from ``run_id`` (``fsm fork``), oldest first."""
        return [r.run_id for r in sorted(self.list_runs(), key=lambda r: (r.created_at, r.run_id))
                if r.forked_from is not None and r.forked_from.run_id == run_id]

    # -- fleet helpers with defaults that suit one process --------------------------

    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        return False  # one process: the caller polls

    @contextmanager
    def sweep_lock(self) -> Iterator[bool]:
        yield True  # one process: nobody else sweeps

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    async def open_async(self) -> bool:
        """Open this store's async driver for the running event loop, if it has one: True
        when code in a bridged greenlet (:func:`fsm._bridge.run_bridged`) on this loop now
        reaches the database without a thread; False: the caller runs it in threads."""
        return False

    async def close_async(self) -> None:  # noqa: B027 - optional hook
        """Close what :meth:`open_async` opened for the running event loop."""

    def admission(self) -> asyncio.Semaphore | None:
        """What admits steps to the running loop's async driver: no more steps are under
        way at once than it has connections, whoever drives them (None: none is open)."""
        return None

    # -- the approval inbox -------------------------------------------------------------
    # Pages of the inbox and the runs list. The defaults for waiting approvals are correct
    # for any store but read everything; the SQL stores override them with indexed queries.

    def waiting(self, workflow: str | None = None, *, limit: int = 50, offset: int = 0,
                skip_damaged: bool = False, damaged: list[RowDamaged] | None = None
                ) -> Page[tuple[Approval, RunState]]:
        old_spelling("waiting", damaged)
        pending = self.approvals(pending_only=True,
                                 skip_damaged=skip_damaged or damaged is not None)
        if damaged is not None:
            damaged += pending.damaged
        rows = []
        for a in pending:
            run = self.load_run(a.run_id)
            if run.status == "awaiting_approval" and workflow in (None, run.workflow):
                rows.append((a, run))
        rows.sort(key=lambda r: (r[0].requested_at, r[0].approval_id), reverse=True)
        return Page(rows[offset:offset + limit], pending.damaged)

    def count_waiting(self, workflow: str | None = None) -> int:
        return len(self.waiting(workflow, limit=2**62))

    def runs_page(self, status: str | None = None, workflow: str | None = None, *,
                  limit: int = 50, offset: int = 0) -> list[RunState]:
        return self.list_runs(status, workflow=workflow, limit=limit, offset=offset,
                              newest_first=True)

    def count_runs(self, status: str | None = None, workflow: str | None = None) -> int:
        return len(self.runs_page(status, workflow, limit=2**62))

    def workflow_names(self) -> list[str]:
        return sorted({r.workflow for r in self.list_runs()})

    def run_columns(self, run_id: str) -> tuple[str, str]:
        run = self.load_run(run_id)
        return run.status, run.workflow

    def snapshot_text(self, run_id: str) -> str:
        return snapshot_json(self.load_run(run_id))

    def approval(self, approval_id: str) -> Approval | None:
        for a in self.approvals(pending_only=False):
            if a.approval_id == approval_id:
                return a
        return None

    def refusal_head(self, run_id: str) -> tuple[int, str] | None:
        return None  # refused attempts kept as objects, which nobody edits behind its back

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
