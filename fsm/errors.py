"""Every error the framework raises.

::

    FSMError
    ├── WorkflowDefinitionError      bad tables, found once at load
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
            └── ApprovalRefused      empty reviewer, self-approval

Model output never raises: the engine turns it into an observation. These errors
are for programmers and operators.
"""

from __future__ import annotations


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
    def __init__(self, run_id: str, owner: str) -> None:
        self.owner = owner
        super().__init__(
            f"run {run_id!r} is being driven by another process ({owner}); "
            "wait for it to stop, then resume (if that process is gone for good: "
            "fsm resume --take-over)",
            run_id=run_id,
        )


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
