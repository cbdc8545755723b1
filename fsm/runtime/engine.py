"""The engine: one policy call per step, one tool call at a time, one commit per step.

See DESIGN.md "One step". The engine starts, resumes, decides and sweeps runs, holds
their leases and asks the policy; a :class:`~fsm.runtime.step.Step` writes each step.
Model output never raises out of here: every refusal becomes an observation for the
model and an event in the log.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Generator, Iterable
from typing import Any, Generic, NamedTuple, TypeVar, cast, overload

from pydantic import ValidationError

from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import Resources
from fsm.definition.versions import definition_record
from fsm.errors import (
    DefinitionChanged,
    FSMError,
    InvalidRunState,
    RowDamaged,
    RunLocked,
    ServerChanged,
    Unavailable,
    is_transient,
    validation_summary,
)
from fsm.observability.hooks import Hooks, HookSet, in_scope, joined
from fsm.policy import (
    NO_USAGE,
    Action,
    PolicyFn,
    PolicyRefused,
    PolicyUnavailable,
    Usage,
    as_action,
)
from fsm.records import (
    ApprovedCall,
    Budgets,
    Effect,
    Handover,
    RunState,
    Status,
    check_plain_json,
    describe,
    new_id,
    one_line,
    policy_record,
    same_policy,
    shown,
    storable,
)
from fsm.records.transcript import UserMessage
from fsm.runtime import claims, desk, observe, review
from fsm.runtime.budgets import raised_budgets
from fsm.runtime.compaction import Compactor
from fsm.runtime.config import EngineConfig
from fsm.runtime.context import Clock, StepContext, Transcripts
from fsm.runtime.conversation import writes as conversation_writes
from fsm.runtime.conversation.engine import Conversations
from fsm.runtime.driving import Ask, AsyncPolicyCalledSync, Driving, answered, finished
from fsm.runtime.leases import Heartbeats, Lease
from fsm.runtime.observe import Outcome
from fsm.runtime.retry import Retry
from fsm.runtime.step import Step
from fsm.runtime.swept import Swept
from fsm.runtime.view import Schemas, render
from fsm.store.base import Store
from fsm.store.lease import new_owner
from fsm.store.roles import RunReads


class _Bound(NamedTuple):
    """What the engine drives a run with: the run's own definition, and the step context
    and tool schemas made from it."""

    spec: WorkflowSpec
    ctx: StepContext
    schemas: Schemas


T = TypeVar("T")

#: ``max_repeats`` not given on its own: the config's holds (``None`` is a value: no limit).
_GIVEN_BY_CONFIG = object()


class _Setting(Generic[T]):
    """An engine's field of its config, read as an attribute (``engine.lease_seconds``);
    setting it afterwards still works for a release, with a deprecation warning."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, engine: None, owner: type) -> _Setting[T]: ...

    @overload
    def __get__(self, engine: Engine, owner: type) -> T: ...

    def __get__(self, engine: Engine | None, owner: type) -> T | _Setting[T]:
        return self if engine is None else cast(T, getattr(engine.config, self.name))

    def __set__(self, engine: Engine, value: T) -> None:
        engine._reconfigure(self.name, value)


class Engine(Conversations):
    """Drives runs of one workflow against one store with one policy.

    New runs start on ``spec``; a run started on one of the versions ``spec`` keeps
    (``define_workflow(..., earlier=[...])``) resumes on that version. A run whose
    definition is not kept is refused with :class:`~fsm.errors.DefinitionChanged`.
    """

    def __init__(
        self, spec: WorkflowSpec, store: Store, policy: PolicyFn | None = None, *,
        config: EngineConfig | None = None, budgets: Budgets | None = None,
        result_cap: int | None = None, max_repeats: int | None | object = _GIVEN_BY_CONFIG,
        clock: Clock = time.time, compactor: Compactor | None = None,
        plain_errors: bool = False, resources: Resources | None = None,
        retry: Retry | None = None, hooks: Iterable[Hooks] = (),
        heartbeats: Heartbeats | None = None,
    ) -> None:
        # ``budgets``, ``result_cap``, ``max_repeats`` and ``retry`` are also accepted on
        # their own; given, they take the place of the config's.
        config = config or EngineConfig()
        given: dict[str, Any] = {"budgets": budgets, "result_cap": result_cap, "retry": retry}
        changes = {k: v for k, v in given.items() if v is not None}
        if max_repeats is not _GIVEN_BY_CONFIG:
            changes["max_repeats"] = max_repeats
        #: How this engine drives runs (frozen; see :class:`~fsm.runtime.config.EngineConfig`).
        self.config = dataclasses.replace(config, **changes, owner=config.owner or new_owner())
        self.spec = spec
        self.store = store
        self.policy = policy
        self.clock = clock
        self.compactor = compactor
        self._transcripts = Transcripts(store)
        #: What renews this engine's leases (shared when given: a worker's engines).
        self.heartbeats = heartbeats or Heartbeats()
        #: The workflow's resources, opened from the store's location on first use (or
        #: shared, when given: a worker keeps one set for all the runs it drives).
        self._own_resources = resources is None
        self.resources = resources or Resources(spec.resources, store.location)
        self._ctx = StepContext(
            spec=spec, store=store, clock=clock, transcripts=self._transcripts,
            result_cap=self.config.result_cap, max_repeats=self.config.max_repeats,
            plain_errors=plain_errors, has_events=any(spec.transitions.values()),
            resources=self.resources, owner=self.config.owner,
        )
        #: The hooks (:mod:`fsm.observability.hooks`): those in scope where it is made, then
        #: these.
        self.hooks = HookSet(joined(in_scope(), hooks))
        if self.hooks:
            self._ctx = dataclasses.replace(self._ctx, hooks=self.hooks)
        #: definition hash → what a run on that definition is driven with.
        self._bound: dict[str, _Bound] = {}

    # -- the config, read (set afterwards: deprecated) ----------------------------------

    @property
    def owner(self) -> str:
        """The lease owner this engine drives runs as."""
        owner = self.config.owner
        assert owner is not None
        return owner

    @owner.setter
    def owner(self, owner: str) -> None:
        self._reconfigure("owner", owner)
        self._ctx = dataclasses.replace(self._ctx, owner=owner)
        self._bound = {}

    #: Seconds a run's lease lasts without a heartbeat.
    lease_seconds: _Setting[float] = _Setting()
    #: Seconds a step may last before the run's lease is given back (``None``: no limit).
    step_timeout: _Setting[float | None] = _Setting()
    #: The budgets a run gets when its start names none.
    budgets: _Setting[Budgets] = _Setting()
    #: How runs the infrastructure failed are tried again.
    retry: _Setting[Retry] = _Setting()

    def _reconfigure(self, name: str, value: Any) -> None:
        warnings.warn(f"setting Engine.{name} after construction is deprecated; give it "
                      f"as Engine(..., config=EngineConfig({name}=...))",
                      DeprecationWarning, stacklevel=3)
        self.config = dataclasses.replace(self.config, **{name: value})

    def add_hook(self, hook: Hooks) -> None:
        """Deprecated: give hooks at construction (``Engine(..., hooks=[hook])``). Calls
        ``hook`` at every hook point of the runs this engine drives from now on."""
        warnings.warn("Engine.add_hook is deprecated; give hooks at construction, as "
                      "Engine(..., hooks=[hook])", DeprecationWarning, stacklevel=2)
        self.hooks = HookSet([*self.hooks.hooks, hook])
        self._ctx = dataclasses.replace(self._ctx, hooks=self.hooks)
        self._bound = {}

    def _on(self, spec: WorkflowSpec) -> _Bound:
        """The context and schemas for runs on ``spec`` (one of the kept versions)."""
        found = self._bound.get(spec.definition_hash)
        if found is None:
            ctx = self._ctx if spec is self.spec else dataclasses.replace(
                self._ctx, spec=spec, has_events=any(spec.transitions.values()))
            found = self._bound[spec.definition_hash] = _Bound(spec, ctx, Schemas.of(spec))
        return found

    def close(self) -> None:
        """Close the workflow resources this engine opened (not the store)."""
        if self._own_resources:
            self.resources.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API -------------------------------------------------------------------

    def start(self, goal: str, *, user: str = "", run_id: str | None = None,
              budgets: Budgets | None = None, drive: bool = True,
              meta: dict[str, Any] | None = None) -> RunState:
        """Create a run in the initial state with ``goal`` as the first message, and drive it."""
        return self._begin(goal, user=user, run_id=run_id, budgets=budgets, drive=drive,
                           meta=meta)

    def _begin(self, goal: str, *, user: str, run_id: str | None, budgets: Budgets | None,
               drive: bool, meta: dict[str, Any] | None,
               token_hash: str | None = None) -> RunState:
        now = self.clock()
        self.store.record_definition(definition_record(self.spec, now))
        run = RunState(
            run_id=run_id or new_id(), workflow=self.spec.name,
            definition_hash=self.spec.definition_hash, user=user, state=self.spec.initial,
            budgets=budgets or self.budgets, created_at=now, updated_at=now,
        )
        with Step(self._ctx, run, step=0, new_run=True) as s:
            s.message(UserMessage.make(content=goal))
            s.event("start", state_after=run.state, detail={"user": user, **(meta or {})})
            s.token_hash = token_hash
            # A conversation's opening message is the customer's first reply.
            if token_hash is None or not conversation_writes.read_opening(s, goal):
                s.entered(None)
        run = s.landed
        return self.resume(run.run_id) if drive and run.status == "running" else run

    def resume(self, run_id: str, *, take_over: bool = False,
               policy_record: dict[str, Any] | None = None) -> RunState:
        """Continue a run from its last checkpoint until it stops.

        ``take_over`` takes the run's lease from whoever holds it — for a holder this
        host cannot see is gone (another machine, a reused process id). Make sure it is.

        ``policy_record`` names the policy this engine drives the run with (as a start
        event records it: ``{"policy": "model:NAME", "base_url": ..., "settings": ...}``,
        never a secret); when it differs from the one the run's log records, the change
        is logged as a ``policy_set`` event, and later resumes continue with it.
        """
        return finished(self._steps(run_id, take_over, policy_record), self.policy)

    def steps(self, run_id: str, *, take_over: bool = False,
              policy_record: dict[str, Any] | None = None
              ) -> Generator[Outcome, None, RunState]:
        """Drive a run as :meth:`resume` does, yielding an :class:`Outcome` after each
        step's commit: ``for outcome in engine.steps(run_id): ...``.

        The run's lease is held (and renewed) until the iterator is exhausted or
        closed; breaking out of the loop (or ``close()``) leaves the run where its last
        commit put it, to be resumed later. A run with nothing to drive yields nothing.
        """
        driving = answered(self._steps(run_id, take_over, policy_record), self.policy)
        try:
            while True:
                try:
                    run = next(driving)
                except StopIteration as done:
                    return cast(RunState, done.value)
                yield Outcome.of(run)
        finally:
            driving.close()

    def step(self, run_id: str, *, take_over: bool = False) -> Outcome | None:
        """Drive one step of a run and let go of it; its outcome (``None``: the run had
        nothing to drive: it waits, or it has stopped)."""
        driving = self.steps(run_id, take_over=take_over)
        try:
            return next(driving, None)
        finally:
            driving.close()

    def _steps(self, run_id: str, take_over: bool, policy_record: dict[str, Any] | None
               ) -> Driving[RunState]:
        """The run after each step (then as it was left), for :meth:`steps` and
        :meth:`resume`; what it was left as is the generator's return value."""
        with self._lease(run_id, force=take_over, kind="resume") as previous:
            run, b = self._load(run_id)
            run = self._prepared(run, b, previous if take_over else None, policy_record)
            if run.status in ("running", "awaiting_customer"):
                run = yield from self._driving(run, b)
        settled = yield from self._settling(run)
        if settled is not run:
            yield settled
        return settled

    def _prepared(self, run: RunState, b: _Bound, took_from: str | None,
                  policy_record: dict[str, Any] | None) -> RunState:
        """What resuming does before the first step: log a takeover, apply what is due,
        make a run stopped for its model runnable again, log a change of policy."""
        # A paused run is only released, not written: a new version would make its
        # pending approval (or the request its customer answers) stale.
        if took_from and run.status not in ("awaiting_approval", "awaiting_customer"):
            with Step(b.ctx, run, step=run.step) as s:
                s.event("takeover", detail={"from": took_from})
            run = s.landed
        run = self._expire_if_due(run, b)
        run = self.unanswered_if_due(run, b)
        if run.status in ("model_unavailable", "model_refused"):
            with Step(b.ctx, run, step=run.step) as s:
                s.continue_after("resume", after=run.status)
            run = s.landed
        if run.status == "running" and policy_record is not None:
            run = self._record_policy(run, b, policy_record)
        return run

    def _record_policy(self, run: RunState, b: _Bound, record: dict[str, Any]) -> RunState:
        recorded = policy_record(self.store.events(run.run_id))
        if same_policy(recorded, record):
            return run
        with Step(b.ctx, run, step=run.step) as s:
            s.policy_set(record, recorded)
        return s.landed

    def decide(self, run_id: str, approved: bool, reviewer: str, note: str = "", *,
               event: str | None = None, drive: bool = True,
               amend: dict[str, Any] | None = None) -> RunState:
        """Approve or deny what a paused run waits for, then continue the run.

        ``drive=False`` only records the decision and leaves the run to the workers. When
        the infrastructure fails the run's next step (:class:`~fsm.errors.Unavailable`),
        the decision stands and the run is returned ``running``, to be tried again.

        ``event`` names the human event to fire when the waiting state has more than
        the workflow's approve and deny events. ``amend`` approves with changed arguments
        (e.g. ``{"amount_paise": 120_000}``), where the workflow's ``amend`` hook allows it.
        """
        return finished(self._deciding(run_id, approved, reviewer, note, event=event,
                                       drive=drive, amend=amend), self.policy)

    def _deciding(self, run_id: str, approved: bool, reviewer: str, note: str, *,
                  event: str | None, drive: bool, amend: dict[str, Any] | None
                  ) -> Driving[RunState]:
        with self._lease(run_id, kind="decide"):
            run, b = self._load(run_id)
            if run.status != "awaiting_approval" or run.pending is None:
                raise review.not_waiting(
                    run, self.store.approvals(run.run_id, pending_only=False))
            approval = review.pending_approval(self.store, run)
            unlogged = review.unlogged_decision(approval, self.store.events(run_id))
            if unlogged is not None:
                return (yield from self._settling(self._unlogged(run, b, unlogged)))
            ruling = review.review(b.spec, run, approval, approved=approved,
                                   reviewer=reviewer, note=note, now=self.clock(), event=event,
                                   amend=amend)
            with Step(b.ctx, run, step=run.step) as s:
                s.apply_ruling(ruling)
            run = s.landed
            if ruling.verdict == "expired":
                raise review.expired_error(run_id, approval, run)
            if drive and run.status == "running":
                try:
                    run = yield from self._driving(run, b)
                except Unavailable:
                    pass  # the decision stands; the run stays running, to be tried again
        return (yield from self._settling(run))

    def take_handover(self, run_id: str, person: str, *, note: str | None = None
                      ) -> RunState:
        """Take a handed-over run at the desk: it is assigned to ``person`` (logged as
        ``take``). One another person took is taken over only with a ``note`` saying why
        (logged with whom it was taken from); without one,
        :class:`~fsm.errors.HandoverRefused`."""
        with self._lease(run_id, kind="desk"):
            run, b = self._load(run_id)
            with Step(b.ctx, run, step=run.step) as s:
                desk.take(s, self._handover(run_id), person, note)
            return s.landed

    def close_handover(self, run_id: str, person: str, outcome: str, note: str, *,
                       event: str | None = None, drive: bool = True) -> RunState:
        """Close a handed-over run's handover with ``outcome`` (``resolved``, ``resumed``,
        ``closed``) and a required ``note`` (logged as ``close``). ``resumed`` fires
        ``event``, a person's event out of the hand-over state, and continues the run
        (``drive=False``: leaves it to the workers)."""
        return finished(self._closing(run_id, person, outcome, note, event=event,
                                      drive=drive), self.policy)

    def _closing(self, run_id: str, person: str, outcome: str, note: str, *,
                 event: str | None, drive: bool) -> Driving[RunState]:
        with self._lease(run_id, kind="desk"):
            run, b = self._load(run_id)
            with Step(b.ctx, run, step=run.step) as s:
                desk.close(s, self._handover(run_id), person, outcome, note, event)
            run = s.landed
            if drive and run.status == "running":
                run = yield from self._driving(run, b)
            return run

    def fork(self, run_id: str, *, at: int, new_run_id: str | None = None) -> RunState:
        """A new run from what run ``run_id`` had committed at step ``at`` (not driven;
        resume it to continue). See :mod:`fsm.runtime.forking`."""
        from fsm.runtime.forking import fork

        return fork(self, run_id, at=at, new_run_id=new_run_id)

    def context_for(self, spec: WorkflowSpec) -> StepContext:
        """The step context this engine writes runs on ``spec`` (one of its versions) with."""
        return self._on(spec).ctx

    def _handover(self, run_id: str) -> Handover | None:
        rows = self.store.run_handovers(run_id)
        return rows[-1] if rows else None

    def raise_budgets(self, run_id: str, limits: dict[str, Any], by: str) -> RunState:
        """Raise budgets of a run (an operator's decision, logged as a ``budget`` event with
        ``by``); a run stopped as ``budget_exhausted`` runs again if none is spent now.

        ``limits`` maps :class:`Budgets` fields to new limits, each above what was used.
        """
        with self._lease(run_id, kind="budgets"):
            run, b = self._load(run_id)
            budgets, changes = raised_budgets(run, limits, by)
            with Step(b.ctx, run, step=run.step) as s:
                s.raise_budgets(budgets, by, changes)
            return s.landed

    def sweep(self, skipped: list[tuple[str, str]] | None = None, *,
              failed: list[tuple[str, str]] | None = None,
              damaged: list[RowDamaged] | None = None, raising: bool = True) -> Swept:
        """Apply every expired approval, and every wait for a customer of this workflow
        that passed its time: a :class:`Swept`, the ids of the runs it expired or moved.

        Each run is swept on its own. A run that cannot be touched now (driven by another
        process, or pinned to another definition) is left for the next sweep and named in
        ``Swept.skipped`` as (run, why); a run that cannot be swept at all (a damaged row,
        a write the database refuses) in ``Swept.failed``, and an approval or runs row that
        cannot be read in ``Swept.damaged``. Every other run is swept all the same; then,
        unless ``raising=False``, the first such problem is raised.

        ``skipped``, ``failed`` and ``damaged`` (lists the sweep filled) are deprecated: read
        the :class:`Swept`. Given ``failed`` (or ``damaged``), those problems are not raised.
        """
        swept = self._swept()
        given = {"skipped": skipped, "failed": failed, "damaged": damaged}
        if any(v is not None for v in given.values()):
            named = ", ".join(k for k, v in given.items() if v is not None)
            warnings.warn(f"Engine.sweep({named}=[...]) is deprecated; read them from the "
                          "Swept it returns, with sweep(raising=False)",
                          DeprecationWarning, stacklevel=2)
            swept.fill(skipped, failed, damaged)
        problem = swept.first_problem(damaged=damaged is None, failed=failed is None)
        if raising and problem is not None:
            raise problem
        return swept

    def _swept(self) -> Swept:
        """:meth:`sweep`, with every problem kept in the value, none raised."""
        now = self.clock()
        swept = Swept()
        pending = self.store.approvals(pending_only=True, skip_damaged=True)
        swept.damaged += pending.damaged
        due = [a.run_id for a in pending if a.expires_at <= now]
        swept += [run_id for run_id in due + self._decided_waiting(swept.damaged)
                  if self._sweep_guarded(run_id, swept)]
        self._sweep_conversations(swept)
        once: dict[tuple[str | None, ...], RowDamaged] = {}
        for d in swept.damaged:
            once.setdefault((d.table, d.run_id, d.key), d)
        swept.damaged[:] = once.values()
        return swept

    def _decided_waiting(self, damaged: list[RowDamaged]) -> list[str]:
        """Runs of this workflow that wait for a person on an approval row that says it
        was decided: what no decision fsm records leaves behind (the sweep hands each
        over unless its log holds the decision)."""
        found = []
        waiting = self.store.list_runs("awaiting_approval", workflow=self.spec.name,
                                       skip_damaged=True)
        damaged += waiting.damaged
        for run in waiting:
            aid = run.pending.approval_id if run.pending is not None else None
            try:
                row = self.store.approval(aid) if aid is not None else None
            except RowDamaged as exc:
                damaged.append(exc)
                continue
            if row is not None and row.decision is not None:
                found.append(run.run_id)
        return found

    def _sweep_guarded(self, run_id: str, swept: Swept) -> bool:
        """:meth:`_sweep_one`, with what stops it kept in ``swept``."""
        try:
            return self._sweep_one(run_id)
        except (RunLocked, DefinitionChanged) as exc:
            swept.skipped.append((run_id, str(exc)))
        except RowDamaged as exc:
            swept.damaged.append(exc)
        except FSMError as exc:
            swept.fail(run_id, exc)
        return False

    def _sweep_one(self, run_id: str) -> bool:
        """Expire the run's approval if it is due; whether it did (not when someone
        decided it meanwhile, or the run is of another workflow)."""
        if self.store.load_run(run_id).workflow != self.spec.name:
            return False
        with self._lease(run_id, kind="sweep"):
            run, b = self._load(run_id)
            return self._expire_if_due(run, b) is not run

    # -- the loop ---------------------------------------------------------------------

    def _driving(self, run: RunState, b: _Bound) -> Driving[RunState]:
        """The run after each step, until it stops or waits (the generator's value is
        the run as it was left)."""
        # Only the first step after loading can find a write claimed by a process that
        # died: while this engine holds the lease, nobody else claims this run's keys.
        first = True
        while run.status in ("running", "awaiting_customer"):
            try:
                if isinstance(run.pending, ApprovedCall):
                    with Step(b.ctx, run, step=run.pending.step) as s:
                        s.run_approved(run.pending)
                    run = s.landed
                elif self._unread(run, b) and not (first and self._claim_left(run)):
                    # What the customer said is read before the model is asked again (after
                    # a step a crash left half done, which the model took without it).
                    run = self.read_replies(run, b)
                elif run.status == "running":
                    run = yield from self._step(run, b, look_for_claim=first)
                    first = False
                else:
                    return run
            except Unavailable as exc:
                if exc.run_id is not None:
                    raise  # logged and counted already (by _step)
                run = self._unavailable(run.run_id, b, exc, NO_USAGE)
                yield run
                return run
            self.heartbeats.progress(self, run.run_id)
            yield run
        return run

    def _unread(self, run: RunState, b: _Bound) -> bool:
        return b.spec.converses and bool(self.store.replies(run.run_id, unread_only=True))

    def _claim_left(self, run: RunState) -> bool:
        claimed = self.store.effect(f"{run.run_id}:{run.step + 1}")
        return claimed is not None and claimed.status == "STARTED"

    def _step(self, run: RunState, b: _Bound, *, look_for_claim: bool = True
              ) -> Driving[RunState]:
        started = time.monotonic()
        step = run.step + 1
        try:
            claimed = self.store.effect(f"{run.run_id}:{step}") if look_for_claim else None
            if claimed is not None and claimed.status == "STARTED":
                return self._recover(run, b, claimed, started)
        except Unavailable as exc:
            return self._unavailable(run.run_id, b, exc, NO_USAGE)
        reason = run.used.exhausted(run.budgets)
        if reason is not None:
            with Step(b.ctx, run, step=run.step) as s:
                s.stop("budget_exhausted", reason)
            return s.landed
        if b.ctx.hooks is not None:
            observe.before_policy(b.ctx.hooks, b.spec, run, step, self.policy)
        s = Step(b.ctx, run, step=step, started=started)
        try:
            with s:
                self._compact(s)
                record = s.record_view(s.run.compaction)
                messages = self._transcripts.of(run.run_id)
                action = yield from self._ask(
                    s, render(b.spec, b.schemas, run.run_id, record, messages))
                if action is not None:
                    s.act(action)
            return s.landed
        except Unavailable as exc:
            # What the step's model calls cost, though the step rolled back.
            return self._unavailable(run.run_id, b, exc, _spent(run, s.run))

    def _unavailable(self, run_id: str, b: _Bound, exc: Unavailable, lost: Usage) -> RunState:
        """The infrastructure failed a step, which rolled back: log it in a commit of its
        own and raise :class:`Unavailable` with the delay before the next try, or hand the
        run over once ``retry.tries`` tries in a row failed (and return it). When even
        that commit cannot be made, the error is raised as it is (nothing counted)."""
        self._transcripts.forget(run_id)
        limit = self.retry.tries
        try:
            run = self.store.load_run(run_id)
            tries = run.unavailable + 1
            delay = self.retry.delay(tries)
            with Step(b.ctx, run, step=run.step) as s:
                s.unavailable(str(exc), lost, tries=tries, limit=limit, retry_in=delay)
            run = s.landed
        except Unavailable:
            raise exc from None
        if run.status != "running":
            return run
        raise Unavailable(f"run {run_id!r}: {exc} (try {tries} of {limit}; the next in "
                          f"{delay:.1f}s)", run_id=run_id, retry_in=delay,
                          tries=tries) from exc

    def _compact(self, s: Step) -> None:
        if self.compactor is None:
            return
        run_id = s.run.run_id
        plan = self.compactor.plan(s.ctx.spec, s.run, self._transcripts.of(run_id),
                                   lambda: _path(self.store, run_id))
        if plan is not None:
            s.compact(plan.compaction, plan.usage, plan.detail)

    def _ask(self, s: Step, view: Any, *, compacted: bool = False) -> Driving[Action | None]:
        """Ask the policy (its driver calls it) and take its answer, or what it raised."""
        assert self.policy is not None, "this engine has no policy to drive runs with"
        hooks = s.ctx.hooks
        try:
            raw = yield Ask(view)
        except AsyncPolicyCalledSync:
            raise  # the engine's caller's mistake, not the policy's
        except PolicyUnavailable as exc:
            return (yield from self._not_answered(s, exc, compacted=compacted))
        except Exception as exc:  # a bug in the policy, not model output
            if is_transient(exc):  # the policy's own database or network, for now
                if hooks is not None:
                    observe.after_policy(hooks, s, self.policy, NO_USAGE,
                                         outcome="unavailable", error=describe(exc))
                raise Unavailable(f"the policy: {describe(exc)}") from exc
            s.spend(NO_USAGE, policy_call=True)
            s.stop("failed", f"policy raised {describe(exc)}")
            if hooks is not None:
                observe.after_policy(hooks, s, self.policy, NO_USAGE, outcome="failed",
                                     error=s.run.reason)
            return None
        action = usable(raw)
        s.spend(action.usage, policy_call=True, request=action.request)
        if hooks is not None:
            observe.after_policy(hooks, s, self.policy, action.usage, outcome="action",
                                 action=action, request=action.request, error=action.problem)
        return action

    def _not_answered(self, s: Step, exc: PolicyUnavailable, *,
                      compacted: bool) -> Driving[Action | None]:
        """The model never answered: what the attempts cost counts, the step does not."""
        hooks = s.ctx.hooks
        try:
            usage = Usage.model_validate(exc.usage)  # clamped, as an action's is
        except ValidationError as bad:
            s.spend(NO_USAGE, policy_call=True)
            s.stop("failed", "policy raised PolicyUnavailable with a usage that is not "
                             f"one: {validation_summary(bad, 'usage')}")
            if hooks is not None:
                observe.after_policy(hooks, s, self.policy, NO_USAGE, outcome="failed",
                                     error=s.run.reason)
            return None
        s.spend(usage, policy_call=True, uses_step=False, request=exc.request)
        status: Status = "model_refused" if isinstance(exc, PolicyRefused) \
            else "model_unavailable"
        if hooks is not None:
            observe.after_policy(hooks, s, self.policy, usage, request=exc.request,
                                 outcome="refused" if status == "model_refused"
                                 else "unavailable", error=one_line(shown(exc)))
        if isinstance(exc, PolicyRefused) and exc.overflow and not compacted:
            smaller = self._shrink(s)
            if smaller is not None:
                return (yield from self._ask(s, smaller, compacted=True))
        words = "model refused the request" if status == "model_refused" \
            else "model unavailable"
        s.stop(status, f"{words}: {one_line(shown(exc))}", error=exc.detail)
        return None

    def _shrink(self, s: Step) -> Any:
        """After a context overflow: a view compacted to half its size, recorded as the
        step's view, or ``None`` when there is no compactor or nothing left to fold."""
        if self.compactor is None:
            return None
        run_id = s.run.run_id
        spec = s.ctx.spec
        messages = self._transcripts.of(run_id)
        plan = self.compactor.shrink(spec, s.run, messages,
                                     lambda: _path(self.store, run_id))
        if plan is None or plan.compaction is None:
            return None
        s.compact(plan.compaction, plan.usage, {**plan.detail, "overflow": True})
        record = s.record_view(s.run.compaction)
        return render(spec, self._on(spec).schemas, run_id, record, messages)

    def _recover(self, run: RunState, b: _Bound, effect: Effect, started: float) -> RunState:
        problem = claims.claim_problem(b.ctx, run, effect)
        if problem is not None:
            with Step(b.ctx, run, step=run.step) as s:
                s.refuse_claim(effect, problem)
            return s.landed
        with Step(b.ctx, run, step=effect.step, started=started) as s:
            s.record_view(run.compaction)
            s.recover(effect)
        return s.landed

    def _expire_if_due(self, run: RunState, b: _Bound) -> RunState:
        """Apply an expired approval: fire the expiry event, or tell the model. An
        approval row decided outside the log hands the run over."""
        if run.status != "awaiting_approval" or run.pending is None:
            return run
        approval = review.pending_approval(self.store, run)
        unlogged = review.unlogged_decision(approval, self.store.events(run.run_id))
        if unlogged is not None:
            return self._unlogged(run, b, unlogged)
        if not review.is_due(approval, self.clock()):
            return run
        with Step(b.ctx, run, step=run.step) as s:
            s.apply_ruling(review.expiry(b.spec, run, approval))
        return s.landed

    def _unlogged(self, run: RunState, b: _Bound, reason: str) -> RunState:
        with Step(b.ctx, run, step=run.step) as s:
            s.hand_over_waiting(reason)
        return s.landed

    # -- plumbing ---------------------------------------------------------------------

    def _load(self, run_id: str) -> tuple[RunState, _Bound]:
        run = self.store.load_run(run_id)
        if run.workflow != self.spec.name:
            raise InvalidRunState(
                f"run {run_id!r} belongs to workflow {run.workflow!r}, not {self.spec.name!r}",
                run_id=run_id, state=run.state,
            )
        spec = self.definition_of(run)
        # Recorded on first use: a run started before stores kept definitions has its
        # definition recorded by the first engine that drives it.
        self.store.record_definition(definition_record(spec, self.clock()))
        self._transcripts.load(run)
        return run, self._on(spec)

    def definition_of(self, run: RunState) -> WorkflowSpec:
        """The kept version ``run`` lives on; :class:`~fsm.errors.DefinitionChanged` (naming
        the version and hash it needs, and how to migrate it) when this code lacks it."""
        spec = self.spec.version_for(run.definition_hash)
        if spec is None:
            record = self.store.definition(run.definition_hash)
            changes = server_changes(record.body if record is not None else {}, self.spec)
            if changes:
                raise ServerChanged(run.run_id, run.workflow, run.definition_hash,
                                    self.spec.definition_hash, changes)
            raise DefinitionChanged(
                run.run_id, run.workflow, run.definition_hash, self.spec.definition_hash,
                version=record.version if record is not None else "",
                available=[v.label for v in self.spec.versions])
        return spec

    def _lease(self, run_id: str, *, force: bool = False, kind: str = "resume") -> Any:
        lease = Lease(self, run_id, force, forget=self._transcripts.forget)
        hooks = self.hooks
        if hooks.wants("before_drive") or hooks.wants("after_drive"):
            return observe.Driving(lease, hooks, self.spec, self.store, run_id, kind)
        return lease


def server_changes(body: dict[str, Any], spec: WorkflowSpec) -> dict[str, dict[str, Any]]:
    """The tool servers whose pins differ between a stored definition's ``body`` and
    ``spec``: for each, its pinned and current hashes and the tools added and removed."""
    pinned: dict[str, Any] = body.get("servers") or {}
    changes = {}
    for name in sorted(set(pinned) | set(spec.servers)):
        old, new = pinned.get(name) or {}, spec.servers.get(name) or {}
        if old.get("tools") != new.get("tools"):
            was, now = set(old.get("listed", ())), set(new.get("listed", ()))
            changes[name] = {"pinned": old.get("tools"), "now": new.get("tools"),
                             "added": sorted(now - was), "removed": sorted(was - now)}
    return changes


def _spent(before: RunState, after: RunState) -> Usage:
    """What a step that did not land spent on model calls (tokens and cost)."""
    a, b = before.used, after.used
    return Usage(input_tokens=b.input_tokens - a.input_tokens,
                 output_tokens=b.output_tokens - a.output_tokens,
                 cost_micros=b.cost_micros - a.cost_micros, calls=0)


def _path(store: RunReads, run_id: str) -> list[tuple[str, str]]:
    """``(event, state after)`` for every transition of a run so far."""
    return [(e.event or "", e.state_after or "") for e in store.events(run_id)
            if e.kind == "transition"]


def usable(raw: Any) -> Action:
    """The policy's output as an action; anything unusable becomes a ``problem`` the
    model reads. Arguments must be plain JSON: they go into the transcript as they are."""
    try:
        action = as_action(raw)
    except ValidationError as exc:
        # Address the error to the tool the model meant, when it named one.
        tool = raw.get("tool") if isinstance(raw, dict) else None
        said = "" if isinstance(raw, dict | Action) else f" (the policy returned {_named(raw)})"
        return Action(tool=storable(tool) if isinstance(tool, str) else None,
                      problem=f"unusable policy output: {validation_summary(exc, 'action')}"
                              f"{said}")
    except Exception as exc:
        return Action(problem=f"unusable policy output: {describe(exc)} (the policy returned "
                              f"{_named(raw)})")
    try:
        check_plain_json([action.tool, action.args, action.final, action.text])
    except (TypeError, ValueError, RecursionError) as exc:
        return Action(tool=None if action.tool is None else storable(action.tool),
                      usage=action.usage,
                      problem=f"unusable policy output: arguments are not plain JSON ({exc})")
    return action


def _named(raw: Any) -> str:
    """A policy's output, named in a line: ``None``, ``42``, ``'refund everything'``."""
    try:
        text = repr(raw)
    except Exception:  # noqa: BLE001 - the output's own repr is the policy's code
        text = f"a {type(raw).__name__}"
    return storable(text if len(text) <= 80 else text[:79] + "…")
