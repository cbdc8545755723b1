"""The engine: one policy call per step, one tool call at a time, one commit per step.

See DESIGN.md "One step". Model output never raises out of here: every refusal
becomes an observation for the model and an event in the log.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from fsm.errors import DefinitionChanged, InvalidRunState, RunLocked
from fsm.faults import fault
from fsm.policy import Action, PolicyFn, PolicyUnavailable, Usage, as_action
from fsm.records import (
    FINAL_STATUSES,
    Approval,
    Budgets,
    Effect,
    Pending,
    RunState,
    ViewRecord,
    fingerprint,
)
from fsm.runtime.budgets import raised_budgets
from fsm.runtime.gate import Call, Finish, Fire, Gate, Pause, Refuse
from fsm.runtime.step import StepBuilder
from fsm.runtime.view import offered, render
from fsm.spec import ADVANCE, WorkflowSpec
from fsm.store.base import Store
from fsm.store.lease import new_owner

Clock = Callable[[], float]


class Engine:
    """Drives runs of one workflow against one store with one policy."""

    def __init__(
        self, spec: WorkflowSpec, store: Store, policy: PolicyFn | None = None, *,
        budgets: Budgets | None = None, result_cap: int = 8000, max_repeats: int | None = 3,
        clock: Clock = time.time, compactor: Any = None, plain_errors: bool = False,
    ) -> None:
        self.spec = spec
        self.store = store
        self.policy = policy
        self.budgets = budgets or Budgets()
        self.result_cap = result_cap
        self.clock = clock
        self.compactor = compactor
        self.gate = Gate(spec, max_repeats=max_repeats, plain_errors=plain_errors)
        self.owner = new_owner()
        self._transcript: dict[str, list[dict[str, Any]]] = {}

    # -- public API -------------------------------------------------------------------

    def start(self, goal: str, *, user: str = "", run_id: str | None = None,
              budgets: Budgets | None = None, drive: bool = True,
              meta: dict[str, Any] | None = None) -> RunState:
        """Create a run in the initial state with ``goal`` as the first message, and drive it."""
        now = self.clock()
        run = RunState(
            run_id=run_id or uuid.uuid4().hex[:12], workflow=self.spec.name,
            definition_hash=self.spec.definition_hash, user=user, state=self.spec.initial,
            budgets=budgets or self.budgets, created_at=now, updated_at=now,
        )
        b = StepBuilder(self, run, step=0)
        b.message({"role": "user", "content": goal})
        b.event("start", state_after=run.state, detail={"user": user, **(meta or {})})
        self._entered(b, None)
        run = self.store.create_run(run, b.commit(initial=True))
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
                b = StepBuilder(self, run, step=run.step)
                b.event("takeover", detail={"from": previous})
                run = b.save()
            run = self._expire_if_due(run)
            if run.status == "model_unavailable":
                b = StepBuilder(self, run, step=run.step)
                b.set(status="running", reason=None)
                b.event("resume", detail={"after": "model_unavailable"})
                run = b.save()
            if run.status != "running":
                if run.status in FINAL_STATUSES or run.status == "awaiting_approval":
                    return run
            return self._drive(run)

    def decide(self, run_id: str, approved: bool, reviewer: str, note: str = "") -> RunState:
        """Approve or deny what a paused run waits for, then continue the run."""
        from fsm.runtime.review import apply_decision

        with self._lease(run_id):
            run = self._load(run_id)
            run = apply_decision(self, run, approved, reviewer, note)
            return self._drive(run) if run.status == "running" else run

    def sweep(self, skipped: list[tuple[str, str]] | None = None) -> list[str]:
        """Apply every expired approval; return the ids of the runs it touched.

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
                    self._expire_if_due(self._load(a.run_id))
            except (RunLocked, DefinitionChanged) as exc:
                if skipped is not None:
                    skipped.append((a.run_id, str(exc)))
                continue
            touched.append(a.run_id)
        return touched

    def raise_budgets(self, run_id: str, limits: dict[str, Any], by: str) -> RunState:
        """Raise budgets of a run (an operator's decision, logged as a ``budget`` event with
        ``by``); a run stopped as ``budget_exhausted`` runs again if none is spent now.

        ``limits`` maps :class:`Budgets` fields to new limits, each above what was used.
        """
        with self._lease(run_id):
            run = self._load(run_id)
            budgets, changes = raised_budgets(run, limits, by)
            b = StepBuilder(self, run, step=run.step)
            b.set(budgets=budgets)
            b.event("budget", reviewer=by, detail={"by": by, "changes": changes})
            if run.status == "budget_exhausted" and run.used.exhausted(budgets) is None:
                b.set(status="running", reason=None)
            return b.save()

    def transcript(self, run_id: str) -> list[dict[str, Any]]:
        return self.store.messages(run_id)

    # -- the loop ---------------------------------------------------------------------

    def _drive(self, run: RunState) -> RunState:
        # Only the first step after loading can find a write claimed by a process that
        # died: while this engine holds the lease, nobody else claims this run's keys.
        first = True
        while run.status == "running":
            if run.pending is not None and run.pending.kind == "approved":
                run = self._run_approved(run)
            else:
                run = self._step(run, look_for_claim=first)
                first = False
        return run

    def _run_approved(self, run: RunState) -> RunState:
        """Run the call a person approved, with the key it was requested under.

        A claim left by a process that died here is replayed (done), called again
        (retry-safe) or handed over as in doubt — never run blindly twice.
        """
        pending = run.pending
        assert pending is not None and pending.tool is not None
        b = StepBuilder(self, run, step=pending.step)
        b.set(pending=None)
        args = self.spec.tools[pending.tool].args.model_validate(pending.args)
        self.execute(b, pending.tool, args, key=pending.key)
        return b.save()

    def _step(self, run: RunState, *, look_for_claim: bool = True) -> RunState:
        started = time.monotonic()
        step = run.step + 1
        claimed = self.store.effect(f"{run.run_id}:{step}") if look_for_claim else None
        if claimed is not None and claimed.status == "STARTED":
            return self._recover(run, claimed, started)
        reason = run.used.exhausted(run.budgets)
        if reason is not None:
            b = StepBuilder(self, run, step=run.step)
            b.stop("budget_exhausted", reason)
            return b.save()
        fault("before_policy", step)
        b = StepBuilder(self, run, step=step, started=started)
        record = self._view_record(b)
        view = render(self.spec, run.run_id, record, self._messages(run.run_id))
        action = self._ask(b, view)
        if action is None:
            return b.save()
        self._act(b, action)
        return b.save()

    def _view_record(self, b: StepBuilder) -> ViewRecord:
        run = b.run
        if self.compactor is not None:
            self.compactor.maybe_compact(self, b, self._messages(run.run_id))
        tools, events = offered(self.spec, run.state)
        record = ViewRecord(
            step=b.step, state=run.state, tools=tools, events=events,
            message_count=len(self._messages(run.run_id)), compaction=b.run.compaction,
        )
        b.view = record
        return record

    def _ask(self, b: StepBuilder, view: Any) -> Action | None:
        assert self.policy is not None, "this engine has no policy to drive runs with"
        try:
            raw = self.policy(view)
        except PolicyUnavailable as exc:
            # The model never answered: what the attempts cost counts, the step does not.
            b.spend(exc.usage, policy_call=True, uses_step=False)
            b.stop("model_unavailable", f"model unavailable: {exc}")
            return None
        except Exception as exc:  # a bug in the policy, not model output
            b.spend(Usage(calls=0), policy_call=True)
            b.stop("failed", f"policy raised {type(exc).__name__}: {exc}")
            return None
        action = usable(raw)
        b.spend(action.usage, policy_call=True)
        return action

    def _act(self, b: StepBuilder, action: Action) -> None:
        b.assistant(action)
        decision = self.gate.check(b.run, action)
        if isinstance(decision, Refuse):
            b.refuse(decision)
        elif isinstance(decision, Finish):
            b.set(answer=decision.text)
            b.stop("done", None)
        elif isinstance(decision, Fire):
            b.tool_result(ADVANCE, result=None)
            self.fire(b, decision.event, decision.payload, by_model=True)
        elif isinstance(decision, Pause):
            self._pause_call(b, decision)
        elif isinstance(decision, Call):
            self.execute(b, decision.tool, decision.args, key=b.key())

    # -- effects ----------------------------------------------------------------------

    def execute(self, b: StepBuilder, tool_name: str, args: Any, *, key: str | None,
                existing: Effect | None = None) -> None:
        """Run a validated call; writes are claimed first and replayed, never repeated."""
        from fsm.tools import ToolContext

        tool = self.spec.tools[tool_name]
        args_dict = args.model_dump(mode="json")
        if tool.write:
            assert key is not None
            if existing is None:
                existing = self.store.claim_effect(Effect(
                    key=key, run_id=b.run.run_id, step=b.step, tool=tool_name, args=args_dict,
                    status="STARTED", started_at=self.clock(),
                ))
            if existing is not None:
                if existing.status == "DONE":
                    b.event("tool", tool=tool_name, detail={"key": key, "replayed": True})
                    self._finish_call(b, tool, args, existing.result, existing.error, key)
                    return
                if not tool.retry_safe:
                    b.stop("handed_over", f"in doubt: {tool_name} {key}")
                    return
        ctx = ToolContext(run_id=b.run.run_id, user=b.run.user, step=b.step,
                          facts=b.run.facts, key=key if tool.write else None)
        result: Any = None
        error: str | None = None
        try:
            result = tool.fn(args, ctx)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        fault("after_tool_before_commit", b.step)
        if tool.write and key is not None:
            b.effects_done[key] = (result, error)
        b.event("tool", tool=tool_name, detail={"args": args_dict, "key": key, "error": error})
        self.gate.remember_call(b.run, tool_name, args_dict)
        self._finish_call(b, tool, args, result, error, key)

    def _finish_call(self, b: StepBuilder, tool: Any, args: Any, result: Any,
                     error: str | None, key: str | None) -> None:
        if error is not None:
            b.tool_result(tool.name, error=error)
            return
        b.tool_result(tool.name, result=result)
        try:
            if tool.remember is not None:
                b.set(facts={**b.run.facts, **tool.remember(args, result, b.run.facts)})
            event = tool.emits(result) if tool.emits is not None else None
        except Exception as exc:
            # The tool ran (its result is recorded); the workflow's own code failed on it.
            b.stop("failed", f"{tool.name}: reading its result raised {type(exc).__name__}: {exc}")
            return
        if event:
            self.fire(b, event, {}, by_model=False)

    def _recover(self, run: RunState, effect: Effect, started: float) -> RunState:
        """A crash left a claimed write with no committed step: finish that step."""
        b = StepBuilder(self, run, step=effect.step, started=started)
        self._view_record(b)
        b.spend(Usage(calls=0), policy_call=True)
        b.event("recover", tool=effect.tool, detail={"key": effect.key, "status": effect.status})
        b.assistant(Action(tool=effect.tool, args=effect.args))
        args = self.spec.tools[effect.tool].args.model_validate(effect.args)
        self.execute(b, effect.tool, args, key=effect.key, existing=effect)
        return b.save()

    # -- transitions and pauses -------------------------------------------------------

    def fire(self, b: StepBuilder, event: str, payload: dict[str, Any], *, by_model: bool) -> bool:
        """Fire ``event`` through the machine; a refusal is logged, never raised."""
        from fsm.errors import TransitionRefused

        before = b.run.state
        try:
            after = self.spec.machine.fire(before, event, b.run.facts, payload,
                                           run_id=b.run.run_id)
        except TransitionRefused as exc:
            b.event("refusal", event=event, reason=str(exc))
            if by_model:
                b.replace_last_result(ADVANCE, error=str(exc))
            return False
        facts = dict(b.run.facts)
        if event in self.spec.records:
            facts[self.spec.records[event]] = payload
        b.set(state=after, facts=facts, recent_calls=[])
        b.event("transition", event=event, state_before=before, state_after=after)
        if by_model:
            b.replace_last_result(ADVANCE, result={"event": event, "state": after})
        self._entered(b, event)
        return True

    def _entered(self, b: StepBuilder, event: str | None) -> None:
        state = b.run.state
        if state in self.spec.terminal:
            status = "handed_over" if state in self.spec.handed_over_states else "done"
            b.stop(status, f"reached {state!r}" if status == "handed_over" else None)
        elif self.spec.waits_for_person(state):
            pending = Pending(kind="event", events=list(self.spec.events_from(state)),
                              step=b.step, args=dict(b.run.facts.get("decision") or {}))
            self._pause(b, pending)

    def _pause_call(self, b: StepBuilder, p: Pause) -> None:
        args = p.args.model_dump(mode="json")
        self._pause(b, Pending(kind="call", tool=p.tool, args=args, key=b.key(), step=b.step))

    def _pause(self, b: StepBuilder, pending: Pending) -> None:
        now = self.clock()
        approval = Approval(
            approval_id=uuid.uuid4().hex[:12], run_id=b.run.run_id, step=b.step,
            tool=pending.tool, args=pending.args, args_hash=fingerprint(pending.subject()),
            run_version=b.expected_version + 1, requested_at=now,
            expires_at=now + self.spec.approval_ttl_seconds,
        )
        pending = pending.model_copy(update={"approval_id": approval.approval_id})
        b.set(status="awaiting_approval", pending=pending)
        b.new_approval = approval
        b.event("pause", tool=pending.tool, detail={
            "approval_id": approval.approval_id, "args": pending.args,
            "events": pending.events, "expires_at": approval.expires_at,
        })

    def _expire_if_due(self, run: RunState) -> RunState:
        from fsm.runtime.review import expire_if_due

        return expire_if_due(self, run)

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
        self._transcript[run_id] = self.store.messages(run_id)
        return run

    def _messages(self, run_id: str) -> list[dict[str, Any]]:
        if run_id not in self._transcript:
            self._transcript[run_id] = self.store.messages(run_id)
        return self._transcript[run_id]

    def _lease(self, run_id: str, *, force: bool = False) -> _Lease:
        return _Lease(self, run_id, force)


def usable(raw: Any) -> Action:
    """The policy's output as an action; anything unusable becomes a ``problem`` the
    model reads. Arguments must be plain JSON: they go into the transcript as they are."""
    try:
        action = as_action(raw)
    except ValidationError as exc:
        parts = [f"{'.'.join(map(str, e['loc'])) or 'action'}: {e['msg']}" for e in exc.errors()]
        # Address the error to the tool the model meant, when it named one.
        tool = raw.get("tool") if isinstance(raw, dict) else None
        return Action(tool=tool if isinstance(tool, str) else None,
                      problem=f"unusable policy output: {'; '.join(parts)}")
    except Exception as exc:
        return Action(problem=f"unusable policy output: {type(exc).__name__}: {exc}")
    try:
        json.dumps([action.args, action.final, action.text], allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return Action(tool=action.tool, usage=action.usage,
                      problem=f"unusable policy output: arguments are not plain JSON ({exc})")
    return action


class _Lease:
    def __init__(self, engine: Engine, run_id: str, force: bool = False) -> None:
        self.engine = engine
        self.run_id = run_id
        self.force = force

    def __enter__(self) -> str | None:
        return self.engine.store.acquire(self.run_id, self.engine.owner, self.engine.clock(),
                                         force=self.force)

    def __exit__(self, *exc: object) -> None:
        self.engine.store.release(self.run_id, self.engine.owner)
        self.engine._transcript.pop(self.run_id, None)
