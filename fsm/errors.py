"""Every error fsm raises.

::

    FSMError
    ├── WorkflowDefinitionError      bad tables, found once at load
    │   └── InvariantError           invariants naming what the workflow does not have
    ├── WorkflowNotFound             a workflow or policy name that resolves to nothing
    ├── UsageError                   a command-line argument that cannot be used
    │   ├── SettingsError            an environment variable that cannot be used
    │   └── UnreadableFile           a recorded-conversation file of no shape fsm shadow reads
    ├── StoreError                   the database could not be opened, read or written
    │   ├── StoreUnavailable         ... for now: a lost connection, a timeout (also Unavailable)
    │   ├── RowDamaged               one row cannot be read: which run, which table
    │   └── SigningKeyError          the signing key is missing, unreadable or not the
    │                                database's: nothing was written
    ├── Unavailable                  infrastructure under a step failed for now: retry later
    ├── PartlyApplied                a write tool changed part of what it was to change
    ├── ModelConfigError             a model adapter missing a setting, or unfit for the spec
    ├── PriceError                   a price table entry that cannot be read
    ├── DiagramError                 a diagram format or rendering that cannot be done
    │   └── GraphvizMissing          SVG or PNG asked for without Graphviz's dot
    ├── ScriptExhausted              a scripted test policy ran out of actions
    ├── AccountError                 an inbox account that cannot be created or changed
    ├── InboxRefused                 a decision attempt the inbox refuses (a 4xx)
    ├── NotifyError                  notifications configured in a way that cannot work
    ├── ServeError                   the inbox server cannot start as configured
    ├── AmountError                  typed money that is not exactly one amount
    ├── BundleError                  an evidence bundle that cannot be written or read
    ├── MigrationRefused             a migration plan with problems: nothing was changed
    ├── SuiteError                   an evaluation suite that cannot be read: nothing ran
    ├── EngineClosed                 an AsyncEngine asked to drive runs after its aclose()
    └── RunError                     something about one run, at run time
        ├── RunNotFound
        │   └── RunPruned            a run a prune deleted: only its tombstone is left
        ├── InvalidRunState          the command does not fit the run's status
        ├── NothingPending           deciding a run that waits for nobody
        ├── ConcurrentUpdate         a stale writer lost the optimistic-version race
        ├── RunLocked                another process is driving the run right now
        ├── LeaseLost                this process's lease was taken: it may not write
        ├── DefinitionChanged        a run's definition is not kept by this code
        │   └── ServerChanged        ... because a tool server's tools changed under it
        ├── TransitionRefused        the machine refused an event (internal boundary)
        ├── WorkflowCodeError        the workflow's own code raised: a bug, the run fails
        ├── HandoverRefused          a desk action the handover does not allow (taken by
        │                            another, closed, no note, a run that cannot resume)
        ├── ApprovalError
        │   ├── ApprovalAlreadyDecided
        │   ├── ApprovalExpired
        │   ├── ApprovalStale
        │   └── ApprovalRefused      empty reviewer, self-approval, an event not offered
        ├── ReplyRefused             a customer's reply the run does not take (nothing kept)
        ├── StopDriving              an after-commit hook stops the engine driving a run
        └── ForkRefused              a fork or replay of a step the run did not commit, or
                                     a run that cannot be re-derived there (nothing made)

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


class UnreadableFile(UsageError):
    """A file of recorded conversations that is none of the shapes ``fsm shadow`` reads
    (exit status 2); one conversation that cannot be read is reported, not raised."""


class SettingsError(UsageError):
    """Environment variables that cannot be used (see :class:`fsm.settings.Settings`):
    ``problems`` says, for each, its name, its value and what is allowed."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class EngineClosed(FSMError):
    """An :class:`~fsm.runtime.async_engine.AsyncEngine` asked to drive a run after its
    ``aclose()``."""


class StoreError(FSMError):
    """The database could not be opened, read or written."""


class SigningKeyError(StoreError):
    """The key that signs the log's heads is missing, unreadable, or not the one the
    database's runs were signed with: nothing was written."""


class Unavailable(FSMError):
    """Infrastructure under a step failed for now: a lost database connection, a pool,
    lock or statement timeout, a serialization failure, a busy database.

    It is not a tool's answer. Tools and the resources under them raise it (or an error
    :func:`is_transient` recognises); the step then rolls back, the run stays resumable
    and is retried with backoff, and it is handed over after a bounded number of tries
    in a row. ``retry_in`` is the delay before the next try, when the engine set one;
    ``tries`` how many have failed in a row.
    """

    def __init__(self, message: str, *, run_id: str | None = None,
                 retry_in: float | None = None, tries: int | None = None) -> None:
        self.run_id = run_id
        self.retry_in = retry_in
        self.tries = tries
        super().__init__(message)


class PartlyApplied(FSMError):
    """A write tool raises it when its call failed after changing part of what it was to
    change (two of three rows written, a charge made and its receipt lost). The model can
    neither finish nor undo that, so the run is handed over to a person with the message.

    Any other exception a write tool raises is read as its refusal, which changed nothing
    (unless the workflow declares its writes dependent, ``dependent_writes=True``)."""


class StoreUnavailable(StoreError, Unavailable):
    """The database cannot be reached, or did not answer in time: try again later."""

    def __init__(self, message: str) -> None:
        Unavailable.__init__(self, message)


#: SQLite's result codes for a database another connection holds.
_SQLITE_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
#: Classes of psycopg (and psycopg_pool) whose errors are the server's or the network's,
#: not the query's: a lost connection, a timeout, a conflict to retry, a pool timeout.
_PSYCOPG_TRANSIENT = ("OperationalError", "InterfaceError", "IdleInTransactionSessionTimeout")


#: Classes of the common HTTP clients whose errors are the network's: no answer came.
_HTTP_TRANSIENT = {"httpx": ("TransportError",), "requests": ("ConnectionError", "Timeout")}


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is an infrastructure failure worth retrying, not an answer: an
    :class:`Unavailable`, a lost or refused connection or a timeout (Python's
    ``ConnectionError`` and ``TimeoutError``, httpx's ``TransportError``, requests'
    ``ConnectionError`` and ``Timeout``), a psycopg ``OperationalError`` (a lost
    connection, ``PoolTimeout``, a serialization failure, a lock or statement timeout) or
    ``InterfaceError``, or SQLite's busy or locked database."""
    if isinstance(exc, Unavailable | ConnectionError | TimeoutError):
        return True
    for cls in type(exc).__mro__:
        module = cls.__module__ or ""
        if module.startswith("psycopg") and cls.__name__ in _PSYCOPG_TRANSIENT:
            return True
        if cls.__name__ in _HTTP_TRANSIENT.get(module.split(".")[0], ()):
            return True
        if module == "sqlite3" and cls.__name__ == "OperationalError":
            code = getattr(exc, "sqlite_errorname", "")
            return code.startswith(_SQLITE_BUSY) or "database is locked" in str(exc)
    return False


class RowDamaged(StoreError):
    """One row cannot be read: it is not what fsm wrote (not JSON, or not the shape of its
    record). ``table`` and ``run_id`` say where it is; ``key`` names the row when the
    table has its own key (an approval id, an effect or notification key).

    A read of one run raises it; a read of many runs' rows (the approvals waiting, the
    runs list) can skip the row and report it instead, so one damaged row never stops
    the others from being read.
    """

    def __init__(self, message: str, *, table: str, run_id: str | None = None,
                 key: str | None = None, then: str = "") -> None:
        super().__init__(message + then)
        #: What is wrong, without ``then`` (where to look next): what ``fsm audit``, the
        #: place it points to, reports of the row.
        self.finding = message
        self.table = table
        self.run_id = run_id
        self.key = key


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


class AmountError(FSMError, ValueError):
    """Money typed by a person that is not exactly one amount in the workflow's currency;
    the message names the field and the accepted form."""


class BundleError(FSMError):
    """An evidence bundle cannot be written (a run not found, a file) or read."""
class MigrationRefused(FSMError):
    """A migration plan with problems; nothing was changed. ``lines`` are the plan's
    verdicts (one per run, then one per problem), ``problems`` the problems alone."""

    def __init__(self, workflow: str, target: str, problems: list[str],
                 lines: list[str]) -> None:
        self.workflow = workflow
        self.target = target
        self.problems = list(problems)
        self.lines = list(lines)
        body = "\n".join(lines)
        super().__init__(f"migration of workflow {workflow!r} to version {target} refused: "
                         f"{len(self.problems)} problem(s); nothing was changed\n{body}")


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


class RunPruned(RunNotFound):
    """A run ``fsm prune`` deleted: its tombstone is all that is left (``fsm audit RUN``
    reports it). ``pruned_at`` (a UTC time as text), ``pruned_by`` and ``status`` (how it
    finished) come from the tombstone."""

    def __init__(self, run_id: str, *, pruned_at: str, pruned_by: str, status: str) -> None:
        RunError.__init__(self, f"run {run_id!r} was pruned on {pruned_at} by {pruned_by} "
                                f"(it finished {status}); only its tombstone is left "
                                f"(fsm audit {run_id} reports it)", run_id=run_id)
        self.pruned_at = pruned_at
        self.pruned_by = pruned_by
        self.status = status


class HandoverRefused(RunError):
    """A desk action on a handed-over run that is refused; nothing was changed. ``code``
    says why (``open``, ``closed``, ``taken``, ``note``, ``outcome``, ``resume``,
    ``event``, ``person``)."""

    def __init__(self, run_id: str, code: str, message: str) -> None:
        super().__init__(message, run_id=run_id)
        self.code = code


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


class StopDriving(RunError):
    """Raised by an engine hook's ``after_commit`` to stop driving the run there.

    The step's commit has landed; the engine gives the run's lease back and the
    exception reaches whoever drove the run (a worker that is stopping raises it). It
    is the one exception a hook may raise on purpose: any other is logged and the run
    goes on (see :mod:`fsm.observability.hooks`).
    """


class DefinitionChanged(RunError):
    """The run lives on a definition this code does not keep (neither the current one nor
    one of its ``earlier`` versions). ``recorded`` is the hash the run needs, ``version``
    its label as the store recorded it (``""``: not recorded), ``available`` the labels
    this code keeps."""

    def __init__(self, run_id: str, workflow: str, recorded: str, current: str, *,
                 version: str = "", available: list[str] | tuple[str, ...] = ()) -> None:
        self.workflow = workflow
        self.recorded = recorded
        self.current = current
        self.version = version
        self.available = tuple(available) or (current,)
        needs = f"version {version} (definition {recorded})" if version else \
            f"definition {recorded}"
        super().__init__(
            f"run {run_id!r} needs workflow {workflow!r} {needs}, which this code does not "
            f"define (it keeps {', '.join(self.available)}; current definition {current}); "
            f"keep that version importable with define_workflow(..., earlier=[...]), or "
            f"move the run: fsm migrate {run_id} --to current (try --dry-run first)",
            run_id=run_id,
        )


class ServerChanged(DefinitionChanged):
    """A waiting run was started against a tool server whose tools have changed since:
    ``changes`` maps each such server to what differs (its pinned and current tool-list
    hashes, tools added and removed)."""

    def __init__(self, run_id: str, workflow: str, recorded: str, current: str,
                 changes: dict[str, dict[str, Any]]) -> None:
        self.workflow, self.recorded, self.current = workflow, recorded, current
        self.version, self.available, self.changes = "", (current,), changes
        said = "; ".join(_server_change(name, c) for name, c in sorted(changes.items()))
        RunError.__init__(
            self, f"run {run_id!r} was started against tool servers that have changed "
            f"since ({said}): refused; restore what it was started against, or move the run: "
            f"fsm migrate {run_id} --to current", run_id=run_id)


def _server_change(name: str, change: dict[str, Any]) -> str:
    parts = [f"server {name!r} pinned tools {change.get('pinned') or 'none'}, "
             f"now {change.get('now') or 'not in the definition'}"]
    for key in ("added", "removed"):
        if change.get(key):
            parts.append(f"{key} {', '.join(change[key])}")
    return ", ".join(parts)


class TransitionRefused(RunError):
    """The workflow machine refused an event. Engine-internal; becomes an observation."""


class WorkflowCodeError(RunError):
    """The workflow's own code (a guard, a ``check``, an ``approval`` rule, a ``remember``
    or ``emits`` hook, a ``presentation`` function) raised: a bug, not an answer for the
    model. The run fails at once. ``where`` names the code; the message says what it
    raised, and ``__cause__`` is the exception. Engine-internal: the step records it."""

    def __init__(self, where: str, message: str, *, run_id: str | None = None,
                 state: str | None = None, event: str | None = None) -> None:
        self.where = where
        super().__init__(message, run_id=run_id, state=state, event=event)


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


class ReplyRefused(RunError):
    """A customer's reply that is not kept: empty, too long, not text, for a run that does
    not exist, has finished or is not talking with its customer, or with a wrong token.

    ``code`` says which (``empty``, ``too_long``, ``nul``, ``not_text``, ``unknown_run``,
    ``finished``, ``not_waiting``, ``no_token``, ``token``, ``stale``); nothing changed.
    """

    def __init__(self, code: str, message: str, *, run_id: str | None = None,
                 state: str | None = None) -> None:
        self.code = code
        super().__init__(message, run_id=run_id, state=state)


class ForkRefused(RunError):
    """A fork (or a replay from a step) that cannot be made: a step out of range or not
    committed, or a run whose recording does not re-derive it. Nothing was written."""


class SuiteError(FSMError):
    """An evaluation suite file that cannot be used (an unknown key, a case without an
    expected outcome, ...): the message names the line. Nothing ran."""


def validation_problems(exc: Any, whole: str = "(value)") -> list[str]:
    """A pydantic ``ValidationError`` as one ``"field: message"`` line per problem;
    ``whole`` names the value itself when the problem is not in one field."""
    return [f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}"
            for e in exc.errors()]


def validation_summary(exc: Any, whole: str = "(arguments)") -> str:
    """A pydantic ``ValidationError`` in one line."""
    return "; ".join(validation_problems(exc, whole))
