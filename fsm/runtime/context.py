"""What a step is given: a small frozen context instead of the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import Resources
from fsm.observability.hooks import HookSet
from fsm.records import RunState
from fsm.store.roles import Approvals, Conversations, Effects, RunReads, Runs

Clock = Callable[[], float]


class StepStore(Runs, Effects, Approvals, Conversations, Protocol):
    """What a step asks of its store: it writes its run (one commit), claims the effects of
    its writes, and reads the run's approvals and customer replies."""


class Transcripts:
    """The transcripts of the runs an engine is driving, read once and kept in step.

    A step appends its messages only once its commit has landed; a failed commit
    forgets the run, so the next read comes from the store again.
    """

    def __init__(self, store: RunReads) -> None:
        self._store = store
        self._cache: dict[str, list[dict[str, Any]]] = {}

    def of(self, run_id: str) -> list[dict[str, Any]]:
        """The whole transcript of ``run_id`` (shared: treat it as read-only)."""
        cached = self._cache.get(run_id)
        if cached is None:
            cached = self.load(self._store.load_run(run_id))
        return cached

    def load(self, run: RunState) -> list[dict[str, Any]]:
        """Read ``run``'s transcript: the messages its steps wrote, which the run row counts.
        A row past that count was written by no step, and nobody is shown it."""
        loaded = self._cache[run.run_id] = self._store.messages(run.run_id, 0,
                                                                run.message_count)
        return loaded

    def extend(self, run_id: str, messages: list[dict[str, Any]]) -> None:
        cached = self._cache.get(run_id)
        if cached is not None:
            cached.extend(messages)

    def forget(self, run_id: str) -> None:
        self._cache.pop(run_id, None)


@dataclass(frozen=True)
class StepContext:
    """Everything a :class:`~fsm.runtime.step.Step` reads besides the run itself."""

    spec: WorkflowSpec
    store: StepStore
    clock: Clock
    transcripts: Transcripts
    #: Characters of a tool result kept in the transcript; the rest goes to artifacts.
    result_cap: int = 8000
    #: Identical calls refused in a row before the run fails (``None``: never).
    max_repeats: int | None = 3
    #: Refuse unknown tools without listing the allowed ones.
    plain_errors: bool = False
    #: Whether the workflow has events at all (an Agent's has none, and no ``advance``).
    has_events: bool = field(default=True)
    #: The workflow's resources at the store's location, for its tools.
    resources: Resources | None = None
    #: The lease owner the step writes as: the store refuses a commit or an effect claim
    #: from an owner that no longer holds the run's lease (``None``: no check).
    owner: str | None = None
    #: The engine's hooks (``None``: it has none, and builds no view for them).
    hooks: HookSet | None = None


@dataclass(frozen=True)
class RunMove:
    """One run's move to another definition, as a validated migration plan decided it
    (:meth:`~fsm.runtime.step.Step.migrate` writes it)."""

    #: The definition the run moves to.
    to: WorkflowSpec
    #: The state it is in there.
    state: str
    #: Who moves it (an operator's name, logged as the reviewer of the move).
    by: str
    #: What the ``migrated`` event records: both hashes and versions, the map.
    detail: dict[str, Any]
    #: A call waiting for approval is asked for again under the target (True), or the
    #: target refuses it and it goes back to the model with ``why`` (False).
    ask_again: bool = True
    why: str = ""
