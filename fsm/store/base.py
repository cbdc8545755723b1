"""The store interface the engine talks to, and the records it keeps.

Every store (in-memory, SQLite) passes the same contract suite
(``tests/test_store_contract.py``). One :class:`StepCommit` is applied all or
nothing: the run row, the new transcript messages, the view snapshot, the log
events, finished effects, approval changes and artifacts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Self

from fsm.records import Approval, Effect, Event, RunState, StepCommit, ViewRecord


class Store(ABC):
    """Persistence for runs. Implementations must make :meth:`commit` atomic."""

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
    def claim_effect(self, effect: Effect) -> Effect | None:
        """Commit a STARTED row for ``effect.key`` now, in its own transaction.

        Returns ``None`` when this call claimed the key, else the existing row
        (the tool must then not run again).
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
    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False) -> str | None:
        """Take the run's lease or raise :class:`~fsm.errors.RunLocked`; the previous holder.

        A lease held by a process that no longer exists on this host is taken over;
        ``force`` takes it from any holder (an operator's decision: the holder is gone).
        """

    @abstractmethod
    def release(self, run_id: str, owner: str) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
