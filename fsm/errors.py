"""Every error fsm raises.

::

    FSMError
    ├── WorkflowDefinitionError      bad tables, found once at load
    │   └── InvariantError           invariants naming what the workflow does not have
    ├── WorkflowNotFound             a workflow or policy name that resolves to nothing
    ├── UsageError                   a command-line argument that cannot be used
    ├── StoreError                   the database could not be opened, read or written
    ├── ModelConfigError             a model adapter missing a setting, or unfit for the spec
    ├── PriceError                   a price table entry that cannot be read
    ├── DiagramError                 a diagram format or rendering that cannot be done
    │   └── GraphvizMissing          SVG or PNG asked for without Graphviz's dot
    ├── ScriptExhausted              a scripted test policy ran out of actions
    ├── AccountError                 an inbox account that cannot be created or changed
    ├── InboxRefused                 a decision attempt the inbox refuses (a 4xx)
    ├── NotifyError                  notifications configured in a way that cannot work
    ├── ServeError                   the inbox server cannot start as configured
    └── RunError                     something about one run, at run time
        ├── RunNotFound
        ├── InvalidRunState          the command does not fit the run's status
        ├── NothingPending           deciding a run that waits for nobody
        ├── ConcurrentUpdate         a stale writer lost the optimistic-version race
        ├── RunLocked                another process is driving the run right now
        ├── LeaseLost                this process's lease was taken: it may not write
        ├── DefinitionChanged        resuming under a different workflow definition
        ├── TransitionRefused        the machine refused an event (internal boundary)
        └── ApprovalError
            ├── ApprovalAlreadyDecided
            ├── ApprovalExpired
            ├── ApprovalStale
            └── ApprovalRefused      empty reviewer, self-approval, an event not offered

Model output never raises: the engine turns it into an observation. These errors
are for programmers and operators. Errors of dependencies (``sqlite3.Error``,
``transitions.MachineError``, ``openai`` errors) are translated where fsm calls them.
"""

from __future__ import annotations

from typing import Any


class FSMError(Exception):
    """Base class of every error raised by fsm."""


class WorkflowDefinitionError(FSMError):
    """The workflow's tables are wrong. ``problems`` lists every offender."""

    def __init__(self, workflow: str, problems: list[str]) -> None:
        self.workflow = workflow
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"workflow {workflow!r} has {len(self.problems)} definition problem(s):\n{lines}"
        )


class InvariantError(WorkflowDefinitionError):
    """Invariants that name states, events, tools or facts the workflow does not have."""


class WorkflowNotFound(FSMError):
    """A workflow or policy name that resolves to nothing."""


class UsageError(FSMError):
    """A command-line argument that cannot be used."""


class StoreError(FSMError):
    """The database could not be opened, read or written."""


class ModelConfigError(FSMError):
    """The model adapter is missing a setting (model name, API key) or cannot use the spec."""


class PriceError(FSMError):
    """A price table entry could not be read."""


class DiagramError(FSMError):
    """A diagram format that does not exist or does not fit, or a render that failed."""


class GraphvizMissing(DiagramError):
    """SVG or PNG was asked for, but Graphviz's ``dot`` program is not installed."""


class ScriptExhausted(FSMError, AssertionError):
    """A :class:`~fsm.testing.ScriptedPolicy` was asked for more actions than it holds."""


class AccountError(FSMError):
    """An account cannot be created or changed as asked."""


class InboxRefused(FSMError):
    """A decision attempt the inbox refuses; ``code`` is what the refusal log records."""

    def __init__(self, code: str, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class NotifyError(FSMError):
    """Notifications are configured in a way that cannot work."""


class ServeError(FSMError):
    """The server cannot start as configured."""


class RunError(FSMError):
    """An error about one run. Carries the run id, and the state and event if relevant."""

    def __init__(
        self, message: str, *, run_id: str | None = None, state: str | None = None,
        event: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.state = state
        self.event = event
        super().__init__(message)


class RunNotFound(RunError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found", run_id=run_id)


class InvalidRunState(RunError, RuntimeError):
    """The operation needs the run in another status (e.g. resuming a finished run)."""


class NothingPending(RunError, RuntimeError):
    """A decision was given for a run that is not waiting for a person."""


class ConcurrentUpdate(RunError):
    def __init__(self, run_id: str, expected: int, found: int) -> None:
        self.expected = expected
        self.found = found
        super().__init__(
            f"run {run_id!r} was updated by someone else: expected version {expected}, "
            f"found {found}; reload the run and try again",
            run_id=run_id,
        )


class RunLocked(RunError):
    def __init__(self, run_id: str, owner: str, *, this_process: bool = False) -> None:
        self.owner = owner
        if this_process:
            # One engine (one owner) asked to drive a run it is driving already.
            message = (f"run {run_id!r} is being driven by another thread of this process "
                       f"({owner}); wait for it to stop, then resume")
        else:
            message = (f"run {run_id!r} is being driven by another process ({owner}); "
                       "wait for it to stop, then resume (if that process is gone for good: "
                       "fsm resume --take-over)")
        super().__init__(message, run_id=run_id)


class LeaseLost(RunError):
    """The writer no longer holds the run's lease (it expired and was taken over).

    Raised by a step's commit and an effect's claim, which check the lease in the
    same transaction: nothing was written, and the tool did not run.
    """

    def __init__(self, run_id: str, owner: str, holder: str | None) -> None:
        self.owner = owner
        self.holder = holder
        super().__init__(
            f"run {run_id!r}: the lease of {owner} was lost (now held by "
            f"{holder or 'nobody'}); nothing was written, and this process drops the run",
            run_id=run_id,
        )


class DefinitionChanged(RunError):
    def __init__(self, run_id: str, workflow: str, recorded: str, current: str) -> None:
        self.recorded = recorded
        self.current = current
        super().__init__(
            f"run {run_id!r} was started under workflow {workflow!r} definition {recorded}, "
            f"but the current definition is {current}; resume it with the original "
            "definition",
            run_id=run_id,
        )


class TransitionRefused(RunError):
    """The workflow machine refused an event. Engine-internal; becomes an observation."""


class ApprovalError(RunError):
    """A decision on an approval was refused."""


class ApprovalAlreadyDecided(ApprovalError):
    pass


class ApprovalExpired(ApprovalError):
    pass


class ApprovalStale(ApprovalError):
    pass


class ApprovalRefused(ApprovalError):
    pass


def validation_problems(exc: Any, whole: str = "(value)") -> list[str]:
    """A pydantic ``ValidationError`` as one ``"field: message"`` line per problem;
    ``whole`` names the value itself when the problem is not in one field."""
    return [f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}"
            for e in exc.errors()]


def validation_summary(exc: Any, whole: str = "(arguments)") -> str:
    """A pydantic ``ValidationError`` in one line."""
    return "; ".join(validation_problems(exc, whole))
