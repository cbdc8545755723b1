"""The engine's side of :mod:`fsm.observability.hooks`: the views it builds and when it calls them.

Every function here is called only when the engine has hooks (``ctx.hooks`` is not
``None``): without hooks, no view is built and nothing here runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from fsm.definition.spec import WorkflowSpec
from fsm.errors import FSMError
from fsm.observability.hooks import (
    CommitInfo,
    DriveInfo,
    HookSet,
    LoggedEvent,
    PauseInfo,
    PolicyCallInfo,
    PolicyResultInfo,
    StopInfo,
    ToolCallInfo,
    ToolResultInfo,
)
from fsm.policy import Action, Usage
from fsm.records import RunState, StepCommit, fingerprint
from fsm.store.roles import RunReads

if TYPE_CHECKING:
    from fsm.runtime.context import StepContext


class Step(Protocol):
    """What the views are made from: a step (:class:`fsm.runtime.step.Step`)."""

    @property
    def ctx(self) -> StepContext: ...

    @property
    def run(self) -> RunState: ...

    @property
    def step(self) -> int: ...

    @property
    def was(self) -> str:
        """The status the run had when the step began."""
        ...

@dataclass(frozen=True, slots=True)
class Outcome:
    """Where a run is after a step's commit (what :meth:`Engine.steps` yields)."""

    run_id: str
    step: int
    state: str
    status: str
    reason: str | None
    #: The run row's version the commit wrote.
    version: int
    #: The run as the commit returned it (a copy: changing it changes nothing stored).
    run: RunState

    @classmethod
    def of(cls, run: RunState) -> Outcome:
        return cls(run_id=run.run_id, step=run.step, state=run.state, status=run.status,
                   reason=run.reason, version=run.version, run=run)


#: Statuses a commit leaves a run waiting in, for a person or its customer.
_WAITING = ("awaiting_approval", "awaiting_customer")


def _where(spec: WorkflowSpec, run: RunState, step: int) -> dict[str, Any]:
    return {"run_id": run.run_id, "workflow": run.workflow,
            "definition_hash": run.definition_hash, "definition_version": spec.label,
            "step": step, "state": run.state}


def policy_name(policy: Any) -> str:
    """What a policy is called in a span: ``module.qualname`` (an object: its class)."""
    named = policy if hasattr(policy, "__qualname__") else type(policy)
    module = getattr(named, "__module__", "") or ""
    qualname = getattr(named, "__qualname__", "") or repr(policy)
    return f"{module}.{qualname}" if module else qualname


def before_policy(hooks: HookSet, spec: WorkflowSpec, run: RunState, step: int,
                  policy: Any) -> None:
    if hooks.wants("before_policy"):
        hooks.call("before_policy", PolicyCallInfo(**_where(spec, run, step),
                                               policy=policy_name(policy)))


def after_policy(hooks: HookSet, s: Step, policy: Any, usage: Usage, *, outcome: str,
                 action: Action | None = None, request: dict[str, Any] | None = None,
                 error: str | None = None) -> None:
    if not hooks.wants("after_policy"):
        return
    model = (request or {}).get("model")
    hooks.call("after_policy", PolicyResultInfo(
        **_where(s.ctx.spec, s.run, s.step), policy=policy_name(policy),
        model=model if isinstance(model, str) else None, input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens, cost_micros=usage.cost_micros, calls=usage.calls,
        outcome=outcome,  # type: ignore[arg-type]
        tool=action.tool if action is not None else None,
        final=action is not None and action.final is not None, error=error))


def tool_call(s: Step, tool: str, args: dict[str, Any], key: str | None, *, write: bool,
              claimed: bool) -> ToolCallInfo:
    return ToolCallInfo(**_where(s.ctx.spec, s.run, s.step), tool=tool,
                    call_id=key or f"{s.run.run_id}:{s.step}:{tool}",
                    args_hash=fingerprint(args), write=write, claimed=claimed)


def tool_result(call: ToolCallInfo, error: str | None) -> ToolResultInfo:
    return ToolResultInfo(run_id=call.run_id, workflow=call.workflow,
                      definition_hash=call.definition_hash,
                      definition_version=call.definition_version, step=call.step,
                      state=call.state, tool=call.tool, call_id=call.call_id,
                      args_hash=call.args_hash, write=call.write, claimed=call.claimed,
                      error=error)


def commit_info(s: Step, commit: StepCommit, after: RunState | None = None, *,
                initial: bool = False) -> CommitInfo:
    run = after if after is not None else commit.run
    used = run.used
    return CommitInfo(
        **_where(s.ctx.spec, run, s.step), status=run.status, reason=run.reason,
        expected_version=commit.expected_version,
        run_version=after.version if after is not None else 0,
        events=tuple(LoggedEvent(kind=e.kind, state_before=e.state_before,
                                 state_after=e.state_after, tool=e.tool, event=e.event,
                                 reason=e.reason, reviewer=e.reviewer,
                                 detail=MappingProxyType(e.detail)) for e in commit.events),
        initial=initial, input_tokens=used.input_tokens, output_tokens=used.output_tokens,
        cost_micros=used.cost_micros)


def committed(hooks: HookSet, s: Step, commit: StepCommit, run: RunState, *,
              initial: bool = False) -> None:
    """After a commit landed: ``after_commit``, then ``on_pause`` or ``on_stop`` when
    the commit paused or stopped the run."""
    if hooks.wants("after_commit"):
        hooks.call("after_commit", commit_info(s, commit, run, initial=initial))
    kinds = {e.kind for e in commit.events}
    where = _where(s.ctx.spec, run, s.step)
    if run.status in _WAITING and s.was != run.status and hooks.wants("on_pause"):
        pending = run.pending
        hooks.call("on_pause", PauseInfo(
            **where, status=run.status,
            approval_id=getattr(pending, "approval_id", None),
            tool=getattr(pending, "tool", None), run_version=run.version))
    elif "stop" in kinds and hooks.wants("on_stop"):
        hooks.call("on_stop", StopInfo(**where, status=run.status, reason=run.reason,
                                       run_version=run.version))


class Driving:
    """``with Driving(...)`` around a held lease: ``before_drive`` as the segment
    begins, ``after_drive`` as it ends (with the run as the store then has it, or the
    exception's type name). Each reads the run row once: only hooks pay for it."""

    def __init__(self, lease: Any, hooks: HookSet, spec: WorkflowSpec, store: RunReads,
                 run_id: str, kind: str) -> None:
        self.lease, self.hooks, self.spec, self.store = lease, hooks, spec, store
        self.run_id, self.kind = run_id, kind

    def _info(self, error: str = "") -> DriveInfo | None:
        try:
            run = self.store.load_run(self.run_id)
        except FSMError:
            return None
        spec = self.spec.version_for(run.definition_hash) or self.spec
        return DriveInfo(**_where(spec, run, run.step), kind=self.kind,
                         run_version=run.version, status=run.status, error=error,
                         agent=not any(spec.transitions.values()))

    def __enter__(self) -> Any:
        previous = self.lease.__enter__()
        try:
            info = self._info()
            if info is not None:
                self.hooks.call("before_drive", info)
        except BaseException:
            self.lease.__exit__()
            raise
        return previous

    def __exit__(self, kind: Any = None, exc: Any = None, tb: Any = None) -> None:
        try:
            info = self._info("" if exc is None else type(exc).__name__)
            if info is not None:
                self.hooks.call("after_drive", info)
        finally:
            self.lease.__exit__(kind, exc, tb)
