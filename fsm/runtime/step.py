"""A step: the only writer of a run while the step lasts.

A :class:`Step` records what happens (messages, log events, spend), moves the
workflow machine, calls an effect, applies a person's decision or an expiry, and
commits it all in one transaction. Other modules compute values (a gate decision, a
review verdict, a compaction plan) and the step applies them.
"""

from __future__ import annotations

import math
import time
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from fsm.errors import TransitionRefused
from fsm.faults import fault
from fsm.machine import machine_for
from fsm.policy import NO_USAGE, Action, Usage
from fsm.records import (
    Approval,
    ApprovalDecision,
    ApprovedCall,
    Budgets,
    CallAwaitingApproval,
    Compaction,
    Effect,
    Event,
    EventAwaitingPerson,
    EventKind,
    RunState,
    Status,
    StepCommit,
    ViewRecord,
    call_subject,
    canonical,
    covered_rows,
    describe,
    fingerprint,
    json_value,
    shown,
    storable,
    text_hash,
    text_json,
    unreadable,
)
from fsm.runtime import gate
from fsm.runtime.context import StepContext
from fsm.runtime.review import Ruling, approved_binding_problem, bound_records
from fsm.spec import ADVANCE
from fsm.tools import ToolContext, ToolSpec

#: Event columns that may hold text from the model or an exception (a refused tool name).
_FREE_TEXT = ("tool", "event", "reason", "reviewer")


class Step:
    """Collects what one step writes, then commits it in one transaction."""

    def __init__(self, ctx: StepContext, run: RunState, *, step: int,
                 started: float | None = None) -> None:
        self.ctx = ctx
        # The step's own copy, changed in place: the caller's run stays as it was loaded.
        self.run = run.model_copy()
        self.run.used = run.used.model_copy()
        self.step = step
        self.expected_version = run.version
        self.started = started if started is not None else time.monotonic()
        self.messages: list[dict[str, Any]] = []
        self.events: list[Event] = []
        self.view: ViewRecord | None = None
        self.effects_done: dict[str, tuple[Any, str | None]] = {}
        self.new_approval: Approval | None = None
        self.decision: ApprovalDecision | None = None
        self.artifacts: dict[str, str] = {}

    # -- record -------------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        for name, value in changes.items():
            setattr(self.run, name, value)

    @property
    def key(self) -> str:
        """The idempotency key of a write made in this step."""
        return f"{self.run.run_id}:{self.step}"

    def spend(self, usage: Usage, *, policy_call: bool, uses_step: bool = True) -> None:
        """Add ``usage`` to the run; a policy call counts a step unless the model never
        answered (``uses_step=False``)."""
        used = self.run.used  # the step's own copy
        used.steps += 1 if policy_call and uses_step else 0
        used.input_tokens += usage.input_tokens
        used.output_tokens += usage.output_tokens
        used.cost_micros += usage.cost_micros
        if policy_call:
            self.event("policy", cost_micros=usage.cost_micros,
                       tokens=usage.input_tokens + usage.output_tokens,
                       detail={"input_tokens": usage.input_tokens,
                               "output_tokens": usage.output_tokens, "calls": usage.calls,
                               **usage.notes(),
                               **({} if uses_step else {"step_used": False})})

    def stop(self, status: Status, reason: str | None) -> None:
        reason = None if reason is None else storable(reason)
        self._set(status=status, reason=reason)
        self.event("stop", reason=reason, detail={"status": status})

    def continue_after(self, kind: EventKind, **detail: Any) -> None:
        """Make a stopped (model unavailable) or raised-budget run runnable again."""
        self._set(status="running", reason=None)
        self.event(kind, detail=detail)

    def raise_budgets(self, budgets: Budgets, by: str, changes: dict[str, list[Any]]) -> None:
        """New budgets from an operator; a run they stopped runs again if none is spent."""
        exhausted = self.run.status == "budget_exhausted"
        self._set(budgets=budgets)
        self.event("budget", reviewer=by, detail={"by": by, "changes": changes})
        if exhausted and self.run.used.exhausted(budgets) is None:
            self._set(status="running", reason=None)

    def message(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)

    def assistant(self, action: Action) -> None:
        if action.final is not None:
            self.message({"role": "assistant", "final": action.final})
        elif action.tool is not None:
            msg: dict[str, Any] = {"role": "assistant", "tool": action.tool, "args": action.args}
            if action.text:
                msg["text"] = action.text
            self.message(msg)
        else:
            self.message({"role": "assistant", "content": action.text or ""})

    def tool_result(self, tool: str, *, result: Any = None, error: str | None = None,
                    text: str | None = None) -> None:
        if error is not None:
            self.message({"role": "tool", "tool": tool, "error": error})
        else:
            self.message({"role": "tool", "tool": tool, "result": self._cap(result, text)})

    def _cap(self, result: Any, text: str | None = None) -> Any:
        """``result`` for the transcript, or an excerpt of it and the artifact that keeps
        it whole (``text``: its canonical JSON, when already known)."""
        cap = self.ctx.result_cap
        if len(text if text is not None else canonical(result)) <= cap // 2:
            return result  # well within the cap however it is spaced: no second encoding
        text = text_json(result)
        if len(text) <= cap:
            return result
        sha = text_hash(text)
        self.artifacts[sha] = text
        return {"excerpt": text[:cap], "artifact": f"artifact:{sha}", "chars": len(text)}

    def event(self, kind: EventKind, **fields: Any) -> None:
        for name in _FREE_TEXT:
            text = fields.get(name)
            if text:  # text the model, workflow code or an exception chose
                fields[name] = storable(text)
        fields.setdefault("state_before", self.run.state)
        fields.setdefault("state_after", self.run.state)
        self.events.append(Event(run_id=self.run.run_id, step=self.step,
                                 time=self.ctx.clock(), kind=kind, **fields))

    def record_view(self, compaction: Compaction | None) -> ViewRecord:
        tools, events = list(self.ctx.spec.allowed_tools(self.run.state)), \
            self.ctx.spec.model_events(self.run.state)
        self.view = ViewRecord(
            step=self.step, state=self.run.state, tools=tools, events=events,
            message_count=len(self.ctx.transcripts.of(self.run.run_id)), compaction=compaction,
        )
        return self.view

    def compact(self, compaction: Compaction | None, usage: Usage,
                detail: dict[str, Any]) -> None:
        """Apply a compaction plan (``None``: logged but not applied) and log it."""
        self.spend(usage, policy_call=False)
        if compaction is not None:
            self._set(compaction=compaction)
        self.event("compaction", cost_micros=usage.cost_micros,
                   tokens=usage.input_tokens + usage.output_tokens, detail=detail)

    # -- act on the policy's action -------------------------------------------------

    def act(self, action: Action) -> None:
        """Gate the action and apply the decision."""
        self.assistant(action)
        if self._binding_broken(action):
            return
        decision = gate.check(self.ctx, self.run, action)
        counter = getattr(decision, "repeat_refusals", None)
        if counter is not None:
            self._set(repeat_refusals=counter)
        if isinstance(decision, gate.Refuse):
            self._refuse(decision)
        elif isinstance(decision, gate.Finish):
            self._set(answer=decision.text)
            self.stop("done", None)
        elif isinstance(decision, gate.Fire):
            self.tool_result(ADVANCE, result=None)
            self.fire(decision.event, decision.payload, by_model=True)
        elif isinstance(decision, gate.Pause):
            self._pause_call(decision.tool, decision.args)
        else:
            self.execute(decision.tool, decision.args, key=self.key)

    def _refuse(self, refusal: gate.Refuse) -> None:
        reason = storable(refusal.reason)  # a tool's check may return any text
        if refusal.tool is not None:
            self.message({"role": "tool", "tool": refusal.tool, "error": reason})
        else:
            self.message({"role": "user", "content": reason, "runtime": True})
        self.event("refusal", tool=refusal.tool, event=refusal.event, reason=reason)
        if refusal.fail is not None:
            self.stop("failed", refusal.fail)

    def _binding_broken(self, action: Action) -> bool:
        """Before a write, what a person approved must still be what the run holds.

        Checked before the tool's own check, so the model is never told a changed value.
        """
        tool = self.ctx.spec.tools.get(action.tool or "")
        if tool is None or not tool.write or not self.run.facts:
            return False
        problem = approved_binding_problem(self.ctx.spec, self.ctx.store, self.run)
        if problem is None:
            return False
        self.tool_result(tool.name, error="the approved request no longer matches the run; "
                                          "a person takes over")
        self.stop("handed_over", problem)
        return True

    # -- effects ----------------------------------------------------------------------

    def execute(self, tool_name: str, args: BaseModel, *, key: str | None,
                existing: Effect | None = None) -> None:
        """Run a validated call; writes are claimed first and replayed, never repeated."""
        tool = self.ctx.spec.tools[tool_name]
        args_dict = args.model_dump(mode="json")
        if tool.write:
            assert key is not None
            if existing is None:
                existing = self.ctx.store.claim_effect(Effect(
                    key=key, run_id=self.run.run_id, step=self.step, tool=tool_name,
                    args=args_dict, status="STARTED", started_at=self.ctx.clock(),
                ), owner=self.ctx.owner, version=self.expected_version)
            if existing is not None:
                if existing.status == "DONE":
                    self.event("tool", tool=tool_name, detail={"key": key, "replayed": True})
                    self._finish_call(tool, args, existing.result, existing.error)
                    return
                if not tool.retry_safe:
                    self.stop("handed_over", f"in doubt: {tool_name} {key}")
                    return
        ctx = ToolContext(run_id=self.run.run_id, user=self.run.user, step=self.step,
                          facts=MappingProxyType(self.run.facts),
                          key=key if tool.write else None,
                          resources=self.ctx.resources)
        result: Any = None
        error: str | None = None
        try:
            result = tool.fn(args, ctx)
        except Exception as exc:
            error = describe(exc)
        fault("after_tool_before_commit", self.step)
        ran = error is None
        recorded, text, error = _recorded(tool_name, result, error)
        if tool.write and key is not None:
            self.effects_done[key] = (recorded, error)
        self.event("tool", tool=tool_name, detail={"args": args_dict, "key": key, "error": error})
        if self.ctx.max_repeats is not None:
            self._set(recent_calls=gate.remembered(self.run.recent_calls, tool_name, args_dict))
        if tool.write and ran and error is not None:
            # The write happened, but what it returned cannot be kept: told it failed, the
            # model could call it again under a new key. A person takes over instead.
            self.tool_result(tool_name, error=error)
            self.stop("handed_over", f"{tool_name} ran ({key}), but {error}")
            return
        self._finish_call(tool, args, recorded, error, text)

    def _finish_call(self, tool: ToolSpec, args: BaseModel, result: Any,
                     error: str | None, text: str | None = None) -> None:
        """Record the call's result (its JSON form, as the store reads it back; ``text``
        its canonical JSON when known) and give it to the workflow's hooks: the same value
        whether the call ran in this process or is replayed from its effect row after a
        crash."""
        if error is not None:
            self.tool_result(tool.name, error=error)
            return
        self.tool_result(tool.name, result=result, text=text)
        try:
            if tool.remember is not None:
                facts = {**self.run.facts,
                         **tool.remember(args, result, MappingProxyType(self.run.facts))}
                problem = unreadable(facts)
                if problem is not None:
                    self.stop("failed", f"{tool.name}: its remember hook returned facts that "
                                        f"cannot be stored: {problem}")
                    return
                self._set(facts=facts)
            event = tool.emits(result) if tool.emits is not None else None
            if event and event not in tool.emits_events:
                # Only declared events: the tables, the diagrams and the verifier say
                # which tool fires what, and the run must not do otherwise.
                self.stop("failed", f"{tool.name}: emits returned {shown(event)!r}, not one "
                                    f"of its emits_events ({', '.join(tool.emits_events)})")
                return
        except Exception as exc:
            # The tool ran (its result is recorded); the workflow's own code failed on it.
            self.stop("failed",
                      f"{tool.name}: reading its result raised {describe(exc)}")
            return
        if event:
            self.fire(event, {}, by_model=False)

    def run_approved(self, pending: ApprovedCall) -> None:
        """Run the call a person approved, with the key it was requested under.

        Its arguments are checked against the approval row first: a changed argument
        hands the run over. A claim left by a process that died here is replayed
        (done), called again (retry-safe) or handed over as in doubt.
        """
        self._set(pending=None)
        problem = _approved_call_problem(self.ctx, self.run.run_id, pending)
        if problem is not None:
            self.tool_result(pending.tool, error="the approved call no longer matches its "
                                                 "approval; a person takes over")
            self.stop("handed_over", problem)
            return
        args = self.ctx.spec.tools[pending.tool].args.model_validate(pending.args)
        self.execute(pending.tool, args, key=pending.key)

    def recover(self, effect: Effect) -> None:
        """A crash left a claimed write with no committed step: finish that step."""
        self.spend(NO_USAGE, policy_call=True)
        self.event("recover", tool=effect.tool,
                   detail={"key": effect.key, "status": effect.status})
        self.assistant(Action(tool=effect.tool, args=effect.args))
        args = self.ctx.spec.tools[effect.tool].args.model_validate(effect.args)
        self.execute(effect.tool, args, key=effect.key, existing=effect)

    # -- transitions and pauses -------------------------------------------------------

    def fire(self, event: str, payload: dict[str, Any], *, by_model: bool) -> bool:
        """Fire ``event`` through the machine; a refusal is logged, never raised."""
        spec = self.ctx.spec
        before = self.run.state
        try:
            after = machine_for(spec).fire(before, event, MappingProxyType(self.run.facts),
                                           payload, run_id=self.run.run_id)
        except TransitionRefused as exc:
            reason = storable(str(exc))  # a guard's error is the workflow's text
            self.event("refusal", event=event, reason=reason)
            if by_model:
                self._replace_advance_result(error=reason)
            return False
        facts = self.run.facts
        if event in spec.records:
            facts = {**facts, spec.records[event]: payload}
        self._set(state=after, facts=facts, recent_calls=[])
        self.event("transition", event=event, state_before=before, state_after=after)
        if by_model:
            self._replace_advance_result(result={"event": event, "state": after})
        self.entered(event)
        return True

    def _replace_advance_result(self, *, result: Any = None, error: str | None = None) -> None:
        for msg in reversed(self.messages):
            if msg.get("role") == "tool" and msg.get("tool") == ADVANCE:
                msg.pop("result", None)
                msg.pop("error", None)
                if error is not None:
                    msg["error"] = error
                else:
                    msg["result"] = result
                return

    def entered(self, event: str | None) -> None:
        """Act on the state the run is now in: a terminal state ends it, a person's
        state pauses it, asking about the record of the event that led there."""
        spec = self.ctx.spec
        state = self.run.state
        if state in spec.terminal:
            if state in spec.handed_over_states:
                self.stop("handed_over", f"reached {state!r}")
            else:
                self.stop("done", None)
        elif spec.waits_for_person(state):
            asks = self.run.facts.get(spec.records[event], {}) if event in spec.records else {}
            self._pause(EventAwaitingPerson(events=list(spec.events_from(state)),
                                            args=dict(asks), step=self.step))

    def _pause_call(self, tool: str, args: BaseModel) -> None:
        self._pause(CallAwaitingApproval(tool=tool, args=args.model_dump(mode="json"),
                                         key=self.key, step=self.step))

    def _pause(self, pending: CallAwaitingApproval | EventAwaitingPerson) -> None:
        approval = Approval.request(
            pending, run_id=self.run.run_id, run_version=self.expected_version + 1,
            now=self.ctx.clock(), ttl=self.ctx.spec.approval_ttl_seconds,
        )
        pending = pending.model_copy(update={"approval_id": approval.approval_id})
        self._set(status="awaiting_approval", pending=pending)
        self.new_approval = approval
        self.event("pause", tool=pending.tool, detail={
            "approval_id": approval.approval_id, "args": pending.args,
            "events": pending.events, "expires_at": approval.expires_at,
        })

    # -- people -----------------------------------------------------------------------

    def apply_ruling(self, ruling: Ruling) -> None:
        """Record a person's decision (or an expiry) and act on it."""
        pending = self.run.pending
        assert isinstance(pending, CallAwaitingApproval | EventAwaitingPerson)
        self.decision = ApprovalDecision(approval_id=ruling.approval.approval_id,
                                         decision=ruling.verdict, reviewer=ruling.reviewer,
                                         note=ruling.note, time=self.ctx.clock(),
                                         args=ruling.args)
        self._set(status="running", pending=None)
        detail: dict[str, Any] = {"decision": ruling.verdict,
                                  "approval_id": ruling.approval.approval_id}
        if ruling.verdict != "expired":
            detail["note"] = ruling.note
        if ruling.args is not None:
            # The request as asked stays in the pause event; the log adds what was approved.
            detail["amended"] = {"asked": pending.args, "approved": ruling.args}
            self._amend_record(pending, ruling.args)
        self.event("decision", reviewer=ruling.reviewer, tool=pending.tool, detail=detail)
        if isinstance(pending, CallAwaitingApproval):
            self._rule_on_call(pending, ruling)
        elif ruling.event is not None:
            said: dict[str, Any] = {"role": "user", "content": ruling.message}
            if ruling.args is not None:
                said["approved"] = ruling.args  # what the model must now use, as data
            self.message(said)
            if not self.fire(ruling.event, {}, by_model=False):
                # A guard refused the person's event: the run still waits for a person.
                self.entered(None)
        else:
            self.stop("handed_over", "approval expired")

    def _amend_record(self, pending: CallAwaitingApproval | EventAwaitingPerson,
                      approved: dict[str, Any]) -> None:
        """A waiting state's record becomes what the reviewer approved (a lower amount)."""
        if isinstance(pending, EventAwaitingPerson):
            facts = {k: (approved if k in bound_records(self.ctx.spec) and v == pending.args
                         else v) for k, v in self.run.facts.items()}
            self._set(facts=facts)

    def _rule_on_call(self, pending: CallAwaitingApproval, ruling: Ruling) -> None:
        if ruling.verdict == "approved":
            # The decision lands first; the engine then runs the approved call in its own
            # commit, so a crash in between resumes into that call, never into a new one.
            approved = ApprovedCall(
                tool=pending.tool, args=ruling.args or pending.args, key=pending.key,
                step=pending.step, approval_id=pending.approval_id, args_hash="")
            self._set(pending=approved.model_copy(
                update={"args_hash": fingerprint(approved.subject())}))
            if ruling.args is not None:
                self.message({"role": "user", "content": ruling.message, "runtime": True,
                              "approved": ruling.args})
        else:
            self.tool_result(pending.tool, error=ruling.message)

    # -- commit -------------------------------------------------------------------

    def commit(self, *, initial: bool = False) -> StepCommit:
        elapsed = 0.0 if initial else time.monotonic() - self.started
        self.run.used.active_seconds += elapsed
        first_message = self.run.message_count
        now = self.ctx.clock()
        if not math.isfinite(now):  # it would be stored as null, and the run unreadable
            raise ValueError(f"the engine's clock returned {now!r}, not a finite time; "
                             "nothing of this step was saved")
        self._set(step=max(self.run.step, self.step), updated_at=now,
                  message_count=first_message + len(self.messages))
        commit = StepCommit(
            run=self.run, expected_version=self.expected_version, messages=self.messages,
            view=self.view, events=self.events, effects_done=self.effects_done,
            new_approval=self.new_approval, decision=self.decision, artifacts=self.artifacts,
            owner=self.ctx.owner,
        )
        if commit.events:
            # The last event of the commit covers every other row it writes.
            last = commit.events[-1]
            last.detail = {**last.detail, "rows": covered_rows(commit, first_message)}
        return commit

    def save(self) -> RunState:
        transcripts = self.ctx.transcripts
        try:
            run = self.ctx.store.commit(self.commit())
        except Exception:
            # The step did not land: read the transcript from the store next time.
            transcripts.forget(self.run.run_id)
            raise
        transcripts.extend(self.run.run_id, self.messages)
        fault("after_commit", self.step)
        return run

    def create(self) -> RunState:
        """Insert the new run with what this (initial) step wrote."""
        return self.ctx.store.create_run(self.run, self.commit(initial=True))


def _recorded(tool: str, result: Any, error: str | None
              ) -> tuple[Any, str | None, str | None]:
    """A call's outcome as the store will read it back: the result's JSON form and its
    canonical text, and the error. A result no store could write and read back (an
    integer of more digits than a JSON reader takes, a value that contains itself)
    becomes an error the model reads."""
    if error is not None:
        return None, None, error
    try:
        recorded = json_value(result)
        text = canonical(recorded)
        text.encode()  # a lone surrogate (a file name from os.fsdecode) has no UTF-8
        return recorded, text, None
    except Exception as exc:  # a value whose __repr__ raises, too
        return None, None, f"the result of {tool} cannot be recorded: {describe(exc)}"


def _approved_call_problem(ctx: StepContext, run_id: str, pending: ApprovedCall) -> str | None:
    for a in ctx.store.approvals(run_id, pending_only=False):
        if a.approval_id != pending.approval_id:
            continue
        if a.decision != "approved":
            return f"approval {a.approval_id} is {a.decision or 'undecided'}, not approved"
        asked, granted = call_subject(a.tool, a.args), call_subject(a.tool, a.granted)
        if (a.tool, a.granted) != (pending.tool, pending.args) or \
                fingerprint(asked) != a.args_hash or pending.args_hash != fingerprint(granted):
            return (f"the approved call {pending.tool} differs from approval {a.approval_id}: "
                    "its arguments changed after the decision")
        return None
    return f"no approval record {pending.approval_id} for the approved call {pending.tool}"
