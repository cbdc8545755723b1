"""The store interface the engine talks to, and the records it keeps.

Every store (in-memory, SQLite) passes the same contract suite
(``tests/test_store_contract.py``). One :class:`StepCommit` is applied all or
nothing: the run row, the new transcript messages, the view snapshot, the log
events, finished effects, approval changes and artifacts.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from fsm.run import RunState, canonical

GENESIS = "0" * 64


class ViewRecord(BaseModel):
    """Enough to rebuild exactly what the model saw at one step, in constant space."""

    step: int
    state: str
    #: Names of the tools offered (their schemas come from the pinned definition).
    tools: list[str]
    #: Events offered through the ``advance`` tool.
    events: list[str]
    #: The view showed ``messages[:message_count]`` (after compaction, below).
    message_count: int
    #: Compaction in force: messages[1:upto] were replaced by ``summary``.
    compaction: dict[str, Any] | None = None


class Event(BaseModel):
    """One row of the append-only, hash-chained event log."""

    run_id: str
    seq: int = 0
    step: int
    time: float
    #: policy, tool, refusal, transition, pause, decision, compaction, stop, start, resume
    kind: str
    state_before: str | None = None
    state_after: str | None = None
    tool: str | None = None
    event: str | None = None
    reason: str | None = None
    cost_micros: int = 0
    tokens: int = 0
    reviewer: str | None = None
    detail: dict[str, Any] = {}
    prev_hash: str = GENESIS
    hash: str = ""

    def body(self) -> dict[str, Any]:
        return self.model_dump(exclude={"hash"})

    def compute_hash(self) -> str:
        return hashlib.sha256((self.prev_hash + canonical(self.body())).encode()).hexdigest()


class Effect(BaseModel):
    """The intent record and claim of one write tool call."""

    key: str
    run_id: str
    step: int
    tool: str
    args: dict[str, Any]
    status: Literal["STARTED", "DONE"]
    result: Any = None
    #: Set when the tool raised: the ``"TypeName: message"`` the model reads.
    error: str | None = None
    started_at: float
    finished_at: float | None = None


class Approval(BaseModel):
    approval_id: str
    run_id: str
    step: int
    tool: str | None
    args: dict[str, Any]
    args_hash: str
    run_version: int
    requested_at: float
    expires_at: float
    decision: Literal["approved", "denied", "expired"] | None = None
    reviewer: str | None = None
    note: str | None = None
    decided_at: float | None = None


@dataclass
class StepCommit:
    """Everything one step writes, applied in one transaction."""

    run: RunState
    expected_version: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    view: ViewRecord | None = None
    events: list[Event] = field(default_factory=list)
    #: Effects to mark DONE: key → (result, error).
    effects_done: dict[str, tuple[Any, str | None]] = field(default_factory=dict)
    new_approval: Approval | None = None
    #: (approval_id, decision, reviewer, note, time) — refused if already decided.
    decision: tuple[str, str, str | None, str | None, float] | None = None
    artifacts: dict[str, str] = field(default_factory=dict)


class Store(ABC):
    """Persistence for runs. Implementations must make :meth:`commit` atomic."""

    @abstractmethod
    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        """Insert a new run (version 1) together with its first messages and events."""

    @abstractmethod
    def load_run(self, run_id: str) -> RunState:
        """The run row; raises :class:`~fsm.errors.RunNotFound`."""

    @abstractmethod
    def list_runs(self, status: str | None = None) -> list[RunState]: ...

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


def chain(events: list[Event], prev_hash: str, next_seq: int) -> list[Event]:
    """Give events their sequence numbers and hashes, continuing a run's chain."""
    out = []
    for i, ev in enumerate(events):
        ev = ev.model_copy(update={"seq": next_seq + i, "prev_hash": prev_hash})
        ev = ev.model_copy(update={"hash": ev.compute_hash()})
        prev_hash = ev.hash
        out.append(ev)
    return out


def verify_chain(events: list[Event]) -> str | None:
    """The first problem in a run's hash chain, or ``None`` when it is intact."""
    prev = GENESIS
    for i, ev in enumerate(events):
        if ev.seq != i:
            return f"event seq {i} is missing (found seq {ev.seq}: rows deleted or reordered)"
        if ev.prev_hash != prev:
            return f"event seq {ev.seq}: prev_hash does not match the previous row"
        if ev.compute_hash() != ev.hash:
            return f"event seq {ev.seq}: hash does not match its contents (row altered)"
        prev = ev.hash
    return None
