"""The engine: one policy call per step, one tool call at a time, one commit per step.

See DESIGN.md "One step". The engine starts, resumes, decides and sweeps runs, holds
their leases and asks the policy; a :class:`~fsm.runtime.step.Step` writes each step.
Model output never raises out of here: every refusal becomes an observation for the
model and an event in the log.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from pydantic import ValidationError

from fsm.errors import (
    DefinitionChanged,
    FSMError,
    InvalidRunState,
    RunLocked,
    validation_summary,
)
from fsm.faults import fault
from fsm.policy import NO_USAGE, Action, PolicyFn, PolicyUnavailable, Usage, as_action
from fsm.records import (
    ApprovedCall,
    Budgets,
    Effect,
    RunState,
    check_plain_json,
    describe,
    new_id,
    shown,
    storable,
)
from fsm.runtime import review
from fsm.runtime.budgets import raised_budgets
from fsm.runtime.compaction import Compactor
from fsm.runtime.context import Clock, StepContext, Transcripts
from fsm.runtime.step import Step
from fsm.runtime.view import Schemas, render
from fsm.spec import WorkflowSpec
from fsm.store.base import Store
from fsm.store.lease import new_owner
from fsm.tools import Resources


class Engine:
    """Drives runs of one workflow against one store with one policy."""

    #: Seconds a run's lease lasts without a heartbeat (see ``_Lease``).
    lease_seconds: float = 30.0

    def __init__(
        self, spec: WorkflowSpec, store: Store, policy: PolicyFn | None = None, *,
        budgets: Budgets | None = None, result_cap: int = 8000, max_repeats: int | None = 3,
        clock: Clock = time.time, compactor: Compactor | None = None,
        plain_errors: bool = False, resources: Resources | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.policy = policy
        self.budgets = budgets or Budgets()
        self.clock = clock
        self.compactor = compactor
        self._transcripts = Transcripts(store)
        self._schemas = Schemas.of(spec)
        #: The workflow's resources, opened from the store's location on first use (or
        #: shared, when given: a worker keeps one set for all the runs it drives).
        self._own_resources = resources is None
        self.resources = resources or Resources(spec.resources, store.location)
        self._ctx = StepContext(
            spec=spec, store=store, clock=clock, transcripts=self._transcripts,
            result_cap=result_cap, max_repeats=max_repeats, plain_errors=plain_errors,
            has_events=any(spec.transitions.values()), resources=self.resources,
            owner=new_owner(),
        )

    @property
    def owner(self) -> str:
        """The lease owner this engine drives runs as (a worker sets its own)."""
        owner = self._ctx.owner
        assert owner is not None
        return owner

    @owner.setter
    def owner(self, owner: str) -> None:
        self._ctx = dataclasses.replace(self._ctx, owner=owner)

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
        now = self.clock()
        run = RunState(
            run_id=run_id or new_id(), workflow=self.spec.name,
            definition_hash=self.spec.definition_hash, user=user, state=self.spec.initial,
            budgets=budgets or self.budgets, created_at=now, updated_at=now,
        )
        s = Step(self._ctx, run, step=0)
        s.message({"role": "user", "content": goal})
        s.event("start", state_after=run.state, detail={"user": user, **(meta or {})})
        s.entered(None)
        run = s.create()
        return self.resume(run.run_id) if drive and run.status == "running" else run

    def resume(self, run_id: str, *, take_over: bool = False) -> RunState:
        """Continue a run from its last checkpoint until it stops.

        ``take_over`` takes the run's lease from whoever holds it — for a holder this
        host cannot see is gone (another machine, a reused process id). Make sure it is.
        """
        with self._lease(run_id, force=take_over) as previous:
            run = self._load(run_id)
            # A paused run is only released, not written: a new version would make its
            # pending approval stale.
            if take_over and previous and run.status != "awaiting_approval":
                s = Step(self._ctx, run, step=run.step)
                s.event("takeover", detail={"from": previous})
                run = s.save()
            run = self._expire_if_due(run)
            if run.status == "model_unavailable":
                s = Step(self._ctx, run, step=run.step)
                s.continue_after("resume", after="model_unavailable")
                run = s.save()
            return self._drive(run) if run.status == "running" else run

    def decide(self, run_id: str, approved: bool, reviewer: str, note: str = "", *,
               event: str | None = None, drive: bool = True,
               amend: dict[str, Any] | None = None) -> RunState:
        """Approve or deny what a paused run waits for, then continue the run.

        ``drive=False`` only records the decision and leaves the run to the workers.

        ``event`` names the human event to fire when the waiting state has more than
        the workflow's approve and deny events. ``amend`` approves with changed arguments
        (e.g. ``{"amount_paise": 120_000}``), where the workflow's ``amend`` hook allows it.
        """
        with self._lease(run_id):
            run = self._load(run_id)
            if run.status != "awaiting_approval" or run.pending is None:
                raise review.not_waiting(
                    run, self.store.approvals(run.run_id, pending_only=False))
            approval = review.pending_approval(self.store, run)
            ruling = review.review(self.spec, run, approval, approved=approved,
                                   reviewer=reviewer, note=note, now=self.clock(), event=event,
                                   amend=amend)
            s = Step(self._ctx, run, step=run.step)
            s.apply_ruling(ruling)
            run = s.save()
            if ruling.verdict == "expired":
                raise review.expired_error(run_id, approval, run)
            return self._drive(run) if drive and run.status == "running" else run

    def raise_budgets(self, run_id: str, limits: dict[str, Any], by: str) -> RunState:
        """Raise budgets of a run (an operator's decision, logged as a ``budget`` event with
        ``by``); a run stopped as ``budget_exhausted`` runs again if none is spent now.

        ``limits`` maps :class:`Budgets` fields to new limits, each above what was used.
        """
        with self._lease(run_id):
            run = self._load(run_id)
            budgets, changes = raised_budgets(run, limits, by)
            s = Step(self._ctx, run, step=run.step)
            s.raise_budgets(budgets, by, changes)
            return s.save()

    def sweep(self, skipped: list[tuple[str, str]] | None = None) -> list[str]:
        """Apply every expired approval; return the ids of the runs it expired.

        A run that cannot be touched now (driven by another process, or pinned to another
        definition) is left for the next sweep and reported in ``skipped`` as (run, why).
        """
        touched = []
        now = self.clock()
        for a in self.store.approvals(pending_only=True):
            if a.expires_at > now or self.store.load_run(a.run_id).workflow != self.spec.name:
                continue
            try:
                with self._lease(a.run_id):
                    run = self._load(a.run_id)
                    expired = self._expire_if_due(run) is not run
            except (RunLocked, DefinitionChanged) as exc:
                if skipped is not None:
                    skipped.append((a.run_id, str(exc)))
                continue
            if expired:  # not decided by someone else meanwhile
                touched.append(a.run_id)
        return touched

    # -- the loop ---------------------------------------------------------------------

    def _drive(self, run: RunState) -> RunState:
        # Only the first step after loading can find a write claimed by a process that
        # died: while this engine holds the lease, nobody else claims this run's keys.
        first = True
        while run.status == "running":
            if isinstance(run.pending, ApprovedCall):
                s = Step(self._ctx, run, step=run.pending.step)
                s.run_approved(run.pending)
                run = s.save()
            else:
                run = self._step(run, look_for_claim=first)
                first = False
        return run

    def _step(self, run: RunState, *, look_for_claim: bool = True) -> RunState:
        started = time.monotonic()
        step = run.step + 1
        claimed = self.store.effect(f"{run.run_id}:{step}") if look_for_claim else None
        if claimed is not None and claimed.status == "STARTED":
            return self._recover(run, claimed, started)
        reason = run.used.exhausted(run.budgets)
        if reason is not None:
            s = Step(self._ctx, run, step=run.step)
            s.stop("budget_exhausted", reason)
            return s.save()
        fault("before_policy", step)
        s = Step(self._ctx, run, step=step, started=started)
        self._compact(s)
        record = s.record_view(s.run.compaction)
        messages = self._transcripts.of(run.run_id)
        action = self._ask(s, render(self.spec, self._schemas, run.run_id, record, messages))
        if action is not None:
            s.act(action)
        return s.save()

    def _compact(self, s: Step) -> None:
        if self.compactor is None:
            return
        run_id = s.run.run_id
        plan = self.compactor.plan(self.spec, s.run, self._transcripts.of(run_id),
                                   lambda: _path(self.store, run_id))
        if plan is not None:
            s.compact(plan.compaction, plan.usage, plan.detail)

    def _ask(self, s: Step, view: Any) -> Action | None:
        assert self.policy is not None, "this engine has no policy to drive runs with"
        try:
            raw = self.policy(view)
        except PolicyUnavailable as exc:
            # The model never answered: what the attempts cost counts, the step does not.
            try:
                usage = Usage.model_validate(exc.usage)  # clamped, as an action's is
            except ValidationError as bad:
                s.spend(NO_USAGE, policy_call=True)
                s.stop("failed", "policy raised PolicyUnavailable with a usage that is not "
                                 f"one: {validation_summary(bad, 'usage')}")
                return None
            s.spend(usage, policy_call=True, uses_step=False)
            s.stop("model_unavailable", f"model unavailable: {shown(exc)}")
            return None
        except Exception as exc:  # a bug in the policy, not model output
            s.spend(NO_USAGE, policy_call=True)
            s.stop("failed", f"policy raised {describe(exc)}")
            return None
        action = usable(raw)
        s.spend(action.usage, policy_call=True)
        return action

    def _recover(self, run: RunState, effect: Effect, started: float) -> RunState:
        s = Step(self._ctx, run, step=effect.step, started=started)
        s.record_view(run.compaction)
        s.recover(effect)
        return s.save()

    def _expire_if_due(self, run: RunState) -> RunState:
        """Apply an expired approval: fire the expiry event, or tell the model."""
        if run.status != "awaiting_approval" or run.pending is None:
            return run
        approval = review.pending_approval(self.store, run)
        if not review.is_due(approval, self.clock()):
            return run
        s = Step(self._ctx, run, step=run.step)
        s.apply_ruling(review.expiry(self.spec, run, approval))
        return s.save()

    # -- plumbing ---------------------------------------------------------------------

    def _load(self, run_id: str) -> RunState:
        run = self.store.load_run(run_id)
        if run.workflow != self.spec.name:
            raise InvalidRunState(
                f"run {run_id!r} belongs to workflow {run.workflow!r}, not {self.spec.name!r}",
                run_id=run_id, state=run.state,
            )
        if run.definition_hash != self.spec.definition_hash:
            raise DefinitionChanged(run_id, run.workflow, run.definition_hash,
                                    self.spec.definition_hash)
        self._transcripts.load(run_id)
        return run

    def _lease(self, run_id: str, *, force: bool = False) -> _Lease:
        return _Lease(self, run_id, force)


def _path(store: Store, run_id: str) -> list[tuple[str, str]]:
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
        return Action(tool=storable(tool) if isinstance(tool, str) else None,
                      problem=f"unusable policy output: {validation_summary(exc, 'action')}")
    except Exception as exc:
        return Action(problem=f"unusable policy output: {describe(exc)}")
    try:
        check_plain_json([action.tool, action.args, action.final, action.text])
    except (TypeError, ValueError, RecursionError) as exc:
        return Action(tool=None if action.tool is None else storable(action.tool),
                      usage=action.usage,
                      problem=f"unusable policy output: arguments are not plain JSON ({exc})")
    return action


# -- leases: an owner, an expiry, a heartbeat ------------------------------------------
#
# While a run is driven its lease is renewed every third of ``Engine.lease_seconds``.
# A process that stops beating (killed, paused, cut off) loses the run once the lease
# expires; its next commit or effect claim is refused by the store (``LeaseLost``),
# because both carry ``Engine.owner`` and are checked in the same transaction.

class _Heartbeats:
    """One thread per process renews every lease the process holds, each every third of
    its lifetime: a thread per lease would cost every run a thread start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: token → (engine, run id, lease seconds, next beat on the monotonic clock)
        self._held: dict[int, tuple[Engine, str, float, float]] = {}
        self._thread: threading.Thread | None = None
        self._tokens = 0

    def hold(self, engine: Engine, run_id: str, ttl: float) -> int:
        with self._lock:
            self._tokens += 1
            token = self._tokens
            self._held[token] = (engine, run_id, ttl, time.monotonic() + ttl / 3)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="fsm-heartbeat")
                self._thread.start()
        self._wake.set()
        return token

    def drop(self, token: int) -> None:
        with self._lock:
            self._held.pop(token, None)

    def _run(self) -> None:
        while True:
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                due = [(t, h) for t, h in self._held.items() if h[3] <= now]
                for t, (e, run_id, ttl, _) in due:
                    self._held[t] = (e, run_id, ttl, now + ttl / 3)
                nxt = min((h[3] for h in self._held.values()), default=now + 60.0)
            for t, (e, run_id, ttl, _) in due:
                self._beat(t, e, run_id, ttl)
            self._wake.wait(max(nxt - time.monotonic(), 0.01))

    def _beat(self, token: int, engine: Engine, run_id: str, ttl: float) -> None:
        try:
            if not engine.store.renew(run_id, engine.owner, engine.clock(), ttl):
                self.drop(token)  # lost: the fence refuses this process's next write
        except FSMError:
            pass  # the database is unreachable: try again on the next beat


_HEARTBEATS = _Heartbeats()


#: (owner, run id) of every lease this process holds. The store lets an owner acquire
#: again what it holds (a renewal), so two threads driving one run with one engine would
#: both get in: the second is refused here.
_HELD: set[tuple[str, str]] = set()
_HELD_LOCK = threading.Lock()


class _Lease:
    def __init__(self, engine: Engine, run_id: str, force: bool = False) -> None:
        self.engine = engine
        self.run_id = run_id
        self.force = force
        self._token: int | None = None
        self._held: tuple[str, str] | None = None

    def __enter__(self) -> str | None:
        e, ttl = self.engine, self.engine.lease_seconds
        held = (e.owner, self.run_id)
        with _HELD_LOCK:
            if held in _HELD:
                raise RunLocked(self.run_id, e.owner, this_process=True)
            _HELD.add(held)
        self._held = held
        try:
            previous = e.store.acquire(self.run_id, e.owner, e.clock(), force=self.force,
                                       ttl=ttl)
        except BaseException:
            self._let_go()
            raise
        try:
            self._token = _HEARTBEATS.hold(e, self.run_id, ttl)
        except BaseException:  # no heartbeat (no thread to be had): give the run back
            self.__exit__()
            raise
        return previous

    def _let_go(self) -> None:
        if self._held is not None:
            with _HELD_LOCK:
                _HELD.discard(self._held)
            self._held = None

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _HEARTBEATS.drop(self._token)
        try:
            self.engine.store.release(self.run_id, self.engine.owner)
        except FSMError:
            pass  # the database is unreachable: the lease expires on its own
        finally:
            self.engine._transcripts.forget(self.run_id)
            self._let_go()
