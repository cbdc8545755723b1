"""Engine hooks: what a worker, fault injection, metrics and tracing see of each step.

Subclass :class:`Hooks`, override the methods you need, and give instances to the
engine (``Engine(spec, store, policy, hooks=[MyHooks()])``).
Each method is given a frozen view of what happened::

    before_drive / after_drive     a driven segment of a run (start, resume, decide, ...)
    before_policy / after_policy   one policy call (tokens, cost, the model it named)
    before_tool / after_tool       one tool call (its call id and arguments' hash)
    before_commit / after_commit   the step's one transaction (the events it logs)
    on_pause / on_stop             after the commit that paused or stopped the run

What happens when a hook raises: a hook cannot break a run's guarantees. An
exception (any ``Exception``) from a hook is logged on the ``fsm.observability.hooks`` logger with
its traceback, and the run goes on as if the hook had returned: a failing
``before_commit`` hook does not lose the commit, a failing ``after_tool`` hook does
not lose the call's result. Two things pass through on purpose:

- :class:`~fsm.errors.StopDriving` from ``after_commit``: the commit has landed; the
  engine stops driving the run there (a hook that must stop a run between two steps;
  a worker that is stopping simply stops iterating :meth:`Engine.steps`);
- a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
  ``SystemExit``, or :class:`SimulatedCrash` in tests), as it would from anywhere:
  the step that did not commit rolls back, exactly as after a crash at that point.

A hook runs on the thread that drives the run (a worker drives several at once):
make it thread-safe if it keeps state. Hooks given to :func:`scope` (at a command's
entry point: the fault points, tracing) join every engine made inside it, and every
engine a worker or a served app made inside it makes later. With no hook set, the engine
builds no view at all.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from fsm.errors import StopDriving

log = logging.getLogger("fsm.observability.hooks")


class SimulatedCrash(BaseException):
    """A crash a test provokes from a hook: not an ``Exception``, so no handler of the
    engine or the hook dispatch takes it; the step in progress does not commit."""


@dataclass(frozen=True, slots=True)
class StepInfo:
    """Where a run is: what every view carries."""

    run_id: str
    workflow: str
    #: The run's definition: its hash and version label (the hash when it has none).
    definition_hash: str
    definition_version: str
    #: The step (a policy call's step; a commit's step number).
    step: int
    #: The workflow state the run is in when the view is made.
    state: str


@dataclass(frozen=True, slots=True)
class DriveInfo(StepInfo):
    """A driven segment of a run: one lease held by one engine."""

    #: ``start``, ``resume``, ``decide``, ``desk``, ``budgets`` or ``sweep``.
    kind: str = "resume"
    #: The run row's version when the segment began (after: the last one it wrote).
    run_version: int = 0
    #: The run's status (after: when the segment ended).
    status: str = ""
    #: The exception's type name when the segment ended with one (``""``: it did not).
    error: str = ""
    #: The definition is a single agent (no events between states: ``fsm.Agent``'s).
    agent: bool = False


@dataclass(frozen=True, slots=True)
class PolicyCallInfo(StepInfo):
    """One policy call about to be made."""

    #: The policy's name: ``module.function`` (a model adapter names its model after).
    policy: str = ""


@dataclass(frozen=True, slots=True)
class PolicyResultInfo(StepInfo):
    """One policy call made."""

    policy: str = ""
    #: The model the adapter asked (its request record's ``model``), ``None`` otherwise.
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    calls: int = 0
    #: ``action`` (the policy answered), ``unavailable``, ``refused`` or ``failed``.
    outcome: Literal["action", "unavailable", "refused", "failed"] = "action"
    #: The tool the action names, its final answer given (``final``), or neither.
    tool: str | None = None
    final: bool = False
    #: One line on what went wrong (an outcome other than ``action``).
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallInfo(StepInfo):
    """One tool call about to run (after a write's key was claimed)."""

    tool: str = ""
    #: The write's idempotency key; ``RUN:STEP:TOOL`` for a read.
    call_id: str = ""
    #: SHA-256 of the arguments' canonical JSON.
    args_hash: str = ""
    write: bool = False
    #: A write whose key this step has just claimed (committed before the call).
    claimed: bool = False


@dataclass(frozen=True, slots=True)
class ToolResultInfo(ToolCallInfo):
    """One tool call made; its result is not committed yet."""

    #: The error the model reads (``None``: the call succeeded).
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event a commit writes to the run's log."""

    kind: str
    state_before: str | None
    state_after: str | None
    tool: str | None = None
    event: str | None = None
    reason: str | None = None
    reviewer: str | None = None
    #: The event's kind-specific facts (read-only).
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CommitInfo(StepInfo):
    """A step's transaction: before it is made, or after it landed."""

    #: The run's status and reason as the commit writes them.
    status: str = ""
    reason: str | None = None
    #: The run row's version the commit expects, and the one it wrote (0 before).
    expected_version: int = 0
    run_version: int = 0
    #: The events the commit logs, in order.
    events: tuple[LoggedEvent, ...] = ()
    #: The commit that creates the run.
    initial: bool = False
    #: What the run has used so far (after this step).
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0


@dataclass(frozen=True, slots=True)
class PauseInfo(StepInfo):
    """A run the commit left waiting for a person (or its customer)."""

    status: str = ""
    approval_id: str | None = None
    tool: str | None = None
    run_version: int = 0


@dataclass(frozen=True, slots=True)
class StopInfo(StepInfo):
    """A run the commit stopped: done, failed, handed over, out of budget, or paused
    for the model's server (``model_unavailable``, ``model_refused``)."""

    status: str = ""
    reason: str | None = None
    run_version: int = 0


class Hooks:
    """The engine's hooks, each a no-op here: override the ones you need."""

    def before_drive(self, drive: DriveInfo) -> None:
        """A segment of a run begins (its lease is held)."""

    def after_drive(self, drive: DriveInfo) -> None:
        """The segment ended; the lease is about to be given back."""

    def before_policy(self, call: PolicyCallInfo) -> None:
        """The policy is about to be asked."""

    def after_policy(self, result: PolicyResultInfo) -> None:
        """The policy answered (or failed)."""

    def before_tool(self, call: ToolCallInfo) -> None:
        """A tool is about to run."""

    def after_tool(self, result: ToolResultInfo) -> None:
        """A tool ran; its result is not committed yet."""

    def before_commit(self, commit: CommitInfo) -> None:
        """A step is about to commit."""

    def after_commit(self, commit: CommitInfo) -> None:
        """A step's commit landed. May raise :class:`~fsm.errors.StopDriving`."""

    def on_pause(self, pause: PauseInfo) -> None:
        """A commit left the run waiting for a person or its customer."""

    def on_stop(self, stop: StopInfo) -> None:
        """A commit stopped the run."""


#: The hook methods, in the order above.
POINTS = ("before_drive", "after_drive", "before_policy", "after_policy", "before_tool",
          "after_tool", "before_commit", "after_commit", "on_pause", "on_stop")


class HookSet:
    """The hooks of one engine, dispatched with the failure rules above. Only the
    methods a hook overrides are called: a point no hook overrides costs nothing."""

    def __init__(self, hooks: Iterable[Hooks] = ()) -> None:
        self.hooks: tuple[Hooks, ...] = ()
        self._at: dict[str, tuple[Any, ...]] = {p: () for p in POINTS}
        for hook in hooks:
            self.add(hook)

    def add(self, hook: Hooks) -> None:
        missing = [p for p in POINTS if not callable(getattr(hook, p, None))]
        if missing:
            raise TypeError(f"{hook!r} is not a hooks object: it has no {', '.join(missing)} "
                            "(subclass fsm.Hooks)")
        self.hooks = (*self.hooks, hook)
        for point in POINTS:
            if getattr(type(hook), point, None) is not getattr(Hooks, point):
                self._at[point] = (*self._at[point], getattr(hook, point))

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def wants(self, point: str) -> bool:
        """Whether any hook overrides ``point`` (a view is worth building)."""
        return bool(self._at[point])

    def call(self, point: str, view: Any) -> None:
        for fn in self._at[point]:
            try:
                fn(view)
            except StopDriving:
                if point != "after_commit":
                    log.error("hook %s raised StopDriving from %s, where it cannot stop "
                              "the run; ignored", _name(fn), point)
                    continue
                raise
            except Exception:
                log.exception("hook %s failed in %s (run %s); the run goes on", _name(fn),
                              point, getattr(view, "run_id", "?"))


def _name(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    return type(owner).__qualname__ if owner is not None else getattr(fn, "__qualname__",
                                                                       repr(fn))


#: The hooks :func:`scope` puts around the engines made inside it (a context's, not the
#: process's: another thread or task has its own).
_SCOPED: ContextVar[tuple[Hooks, ...]] = ContextVar("fsm_hooks_scoped", default=())


@contextmanager
def scope(*hooks: Hooks, alone: bool = False) -> Iterator[tuple[Hooks, ...]]:
    """Give ``hooks`` to every engine made inside this block, in this thread or task (an
    entry point's business: the ``fsm`` command scopes its fault points and tracing
    around the command). A worker or a served app made inside keeps them for the engines
    it makes later, on any thread. ``alone``: these hooks instead of those in scope
    already. Yields the hooks in scope."""
    for hook in hooks:
        HookSet([hook])  # refuses what is not a hooks object, now
    token = _SCOPED.set(_joined(() if alone else _SCOPED.get(), hooks))
    try:
        yield _SCOPED.get()
    finally:
        _SCOPED.reset(token)


def adopt(hooks: Iterable[Hooks]) -> None:
    """Put ``hooks`` in scope for the rest of this thread (a thread pool's initializer: a
    worker's threads keep the hooks that were in scope where the worker was made)."""
    _SCOPED.set(_joined((), hooks))


def in_scope() -> tuple[Hooks, ...]:
    """The hooks :func:`scope` gives engines made here, in order."""
    return _SCOPED.get()


def joined(*groups: Iterable[Hooks]) -> list[Hooks]:
    """``groups`` in order, each hook once (the same object given twice is called once)."""
    return list(_joined((), [h for g in groups for h in g]))


def _joined(first: tuple[Hooks, ...], more: Iterable[Hooks]) -> tuple[Hooks, ...]:
    out = list(first)
    for hook in more:
        if not any(hook is h for h in out):
            out.append(hook)
    return tuple(out)


def _deprecated(name: str) -> None:
    warnings.warn(f"fsm.observability.hooks.{name} is deprecated: give hooks to the engine "
                  "(Engine(..., hooks=[h])), or scope them around where engines are made "
                  "(with fsm.observability.hooks.scope(h): ...)", DeprecationWarning, stacklevel=3)


def install(*hooks: Hooks) -> None:
    """Deprecated: :func:`scope`. Adds ``hooks`` to the engines made afterwards in this
    thread or task."""
    _deprecated("install")
    for hook in hooks:
        HookSet([hook])
    _SCOPED.set(_joined(_SCOPED.get(), hooks))


def uninstall(*hooks: Hooks) -> None:
    """Deprecated: :func:`scope`. Takes hooks :func:`install` added out again (engines
    made before keep them)."""
    _deprecated("uninstall")
    _SCOPED.set(tuple(h for h in _SCOPED.get() if not any(h is x for x in hooks)))


def installed() -> tuple[Hooks, ...]:
    """Deprecated: :func:`in_scope`."""
    _deprecated("installed")
    return _SCOPED.get()
