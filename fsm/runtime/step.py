"""A step: the only writer of a run while the step lasts.

A :class:`Step` records what happens (messages, log events, spend), moves the
workflow machine, calls an effect, applies a person's decision or an expiry, and
commits it all in one transaction. Other modules compute values (a gate decision, a
review verdict, a compaction plan) and the step applies them.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
import traceback
from types import MappingProxyType
from typing import Any, assert_never

from pydantic import BaseModel

from fsm._bridge import called
from fsm.definition.machine import machine_for
from fsm.definition.spec import ADVANCE
from fsm.definition.tools import ToolContext, ToolSpec
from fsm.errors import (
    HandoverRefused,
    PartlyApplied,
    TransitionRefused,
    Unavailable,
    WorkflowCodeError,
    is_transient,
)
from fsm.observability.hooks import ToolCallInfo
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
    Handover,
    RunState,
    Status,
    StepCommit,
    ViewRecord,
    call_subject,
    canonical,
    check_plain_json,
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
from fsm.records.conversation import AwaitingCustomer
from fsm.records.transcript import (
    ApprovalNote,
    AssistantText,
    CustomerAnswer,
    FinalAnswer,
    Message,
    RuntimeNote,
    ToolCall,
    ToolError,
    ToolResult,
    UserMessage,
)
from fsm.runtime import claims, desk, gate, observe
from fsm.runtime.context import RunMove, StepContext
from fsm.runtime.conversation import writes as conversation_writes
from fsm.runtime.conversation.judging import customer_message
from fsm.runtime.review import Ruling, approved_binding, bound_records
from fsm.store.people import outbox_keys

#: Event columns that may hold text from the model or an exception (a refused tool name).
_FREE_TEXT = ("tool", "event", "reason", "reviewer")
#: The end of a traceback of workflow code kept in the log (characters).
TRACEBACK_CHARS = 8_000
#: The keys of a start or ``policy_set`` event that name the policy a run is driven with.
_POLICY_KEYS = ("policy", "base_url", "timeout", "settings")


class Step:
    """Collects what one step writes, then commits it in one transaction when the
    ``with`` block that holds it ends::

        with Step(ctx, run, step=run.step) as s:
            s.stop("handed_over", "a person takes over")
        run = s.landed
    """

    def __init__(self, ctx: StepContext, run: RunState, *, step: int,
                 started: float | None = None, new_run: bool = False) -> None:
        self.ctx = ctx
        #: The step creates its run: its commit inserts the run row (see :meth:`create`).
        self.new_run = new_run
        self._landed: RunState | None = None
        # The step's own copy, changed in place: the caller's run stays as it was loaded.
        self.run = run.model_copy()
        self.run.used = run.used.model_copy()
        self.step = step
        self.expected_version = run.version
        self.started = started if started is not None else time.monotonic()
        self.messages: list[Message] = []
        self.events: list[Event] = []
        self.view: ViewRecord | None = None
        self.effects_done: dict[str, tuple[Any, str | None]] = {}
        self.new_approval: Approval | None = None
        self.decision: ApprovalDecision | None = None
        self.artifacts: dict[str, str] = {}
        #: The desk's row this step writes (a handover opened, taken or closed).
        self.handover: Handover | None = None
        #: The status the run had when the step began (a hand-over opens a desk row).
        self.was = run.status
        #: The step moves the run to another definition (see :meth:`migrate`).
        self.moves_definition = False
        self.replies_read: list[int] = []
        self.token_hash: str | None = None
        #: The model's text beside its action: shown to the customer when the action asks
        #: them to confirm a proposal.
        self.said = ""
        #: What a write of this step is bound to: the approved call it runs, or the
        #: approval of a waiting state whose record the run holds.
        self._approved: ApprovedCall | None = None
        self._bound: Approval | None = None
        #: Set when this step records an infrastructure failure (see :meth:`unavailable`).
        self._fault = False
        #: Set when this step has claimed a write's key (committed) and not yet called it.
        self._claimed = False

    # -- the step as a block ---------------------------------------------------------

    def __enter__(self) -> Step:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """A block that ends without an exception commits the step (an exception rolls
        nothing forward: the step is not written, and the exception goes on)."""
        if kind is None:
            self._landed = self.create() if self.new_run else self.save()

    @property
    def landed(self) -> RunState:
        """The run as the step's commit left it (read after the step's ``with`` block)."""
        if self._landed is None:
            raise RuntimeError("the step has not landed: read Step.landed after its "
                               "with block")
        return self._landed

    # -- record -------------------------------------------------------------------

    @property
    def key(self) -> str:
        """The idempotency key of a write made in this step."""
        return f"{self.run.run_id}:{self.step}"

    def spend(self, usage: Usage, *, policy_call: bool, uses_step: bool = True,
              request: dict[str, Any] | None = None) -> None:
        """Add ``usage`` to the run; a policy call counts a step unless the model never
        answered (``uses_step=False``). ``request`` is how a model adapter sent the call
        (logged with it); each of its ``fallbacks`` is logged as a ``fallback`` event."""
        used = self.run.used  # the step's own copy
        used.steps += 1 if policy_call and uses_step else 0
        used.input_tokens += usage.input_tokens
        used.output_tokens += usage.output_tokens
        used.cost_micros += usage.cost_micros
        if not policy_call:
            return
        sent = _plain(request)
        for fallback in (sent or {}).get("fallbacks") or []:
            if isinstance(fallback, dict):
                self.event("fallback", reason=str(fallback.get("reason") or "") or None,
                           detail=fallback)
        self.event("policy", cost_micros=usage.cost_micros,
                   tokens=usage.input_tokens + usage.output_tokens,
                   detail={"input_tokens": usage.input_tokens,
                           "output_tokens": usage.output_tokens, "calls": usage.calls,
                           **usage.notes(),
                           **({} if uses_step else {"step_used": False}),
                           **({"request": sent} if sent else {})})

    def stop(self, status: Status, reason: str | None, *, error: str | None = None) -> None:
        """End the run (or pause it as model_unavailable/model_refused) with ``reason``,
        one line; ``error`` is the whole text behind it (a server's answer), kept in the
        log."""
        reason = None if reason is None else storable(reason)
        self.run.status = status
        self.run.reason = reason
        detail: dict[str, Any] = {"status": status}
        if error:
            detail["error"] = storable(error)
        self.event("stop", reason=reason, detail=detail)

    def hand_over_waiting(self, reason: str) -> None:
        """A run that waits for a person on a request nobody can decide any more (its
        approval row says decided, the log does not): it waits no longer, and a person
        takes it over with ``reason``."""
        self.run.status = "running"
        self.run.pending = None
        self.stop("handed_over", reason)

    def policy_set(self, record: dict[str, Any], previous: dict[str, Any]) -> None:
        """From here on the run is driven by the policy ``record`` names (logged)."""
        self.event("policy_set", detail={**record, "previous": {
            k: v for k, v in previous.items() if k in _POLICY_KEYS}})

    def unavailable(self, reason: str, lost: Usage, *, tries: int, limit: int,
                    retry_in: float) -> None:
        """Record that the infrastructure failed a step, which rolled back: what its model
        calls cost (``lost``; no step is counted), and the tries failed in a row. At
        ``limit`` the run is handed over; else it is tried again in ``retry_in`` seconds."""
        reason = storable(reason)
        self._fault = True
        self.spend(lost, policy_call=False)
        self.run.unavailable = tries
        self.event("unavailable", reason=reason, cost_micros=lost.cost_micros,
                   tokens=lost.input_tokens + lost.output_tokens,
                   detail={"tries": tries, "limit": limit, "retry_in": round(retry_in, 3)})
        if tries >= limit:
            self.stop("handed_over", f"the infrastructure failed {tries} tries in a row: "
                                     f"{reason}")

    def crash(self, where: str, exc: BaseException, reason: str | None = None) -> None:
        """A bug in the workflow's own code (``where``): the run fails at once, with a
        one-line reason and the exception's traceback in the log's stop event."""
        reason = storable(reason or f"{where} raised {describe(exc)}")
        trace = "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:]
        self.run.status = "failed"
        self.run.reason = reason
        self.event("stop", reason=reason, detail={
            "status": "failed", "bug": {"in": where, "traceback": storable(trace)}})

    def continue_after(self, kind: EventKind, **detail: Any) -> None:
        """Make a stopped (model unavailable) or raised-budget run runnable again."""
        self.run.status = "running"
        self.run.reason = None
        self.event(kind, detail=detail)

    def raise_budgets(self, budgets: Budgets, by: str, changes: dict[str, list[Any]]) -> None:
        """New budgets from an operator; a run they stopped runs again if none is spent."""
        exhausted = self.run.status == "budget_exhausted"
        self.run.budgets = budgets
        self.event("budget", reviewer=by, detail={"by": by, "changes": changes})
        if exhausted and self.run.used.exhausted(budgets) is None:
            self.run.status = "running"
            self.run.reason = None

    def message(self, msg: Message) -> None:
        """Append ``msg`` to the step's new messages."""
        self.messages.append(msg)

    # The two messages of nearly every step: made from the framework's own values, which
    # need no validation (``make``).

    def assistant(self, action: Action, *, to_customer: bool = False) -> None:
        said = self.messages.append
        if action.final is not None and to_customer:
            said(CustomerAnswer.make(content=action.final))
        elif action.final is not None:
            said(FinalAnswer.make(final=action.final))
        elif action.tool is not None:
            if action.text:
                said(ToolCall.make(tool=action.tool, args=action.args, text=action.text))
            else:
                said(ToolCall.make(tool=action.tool, args=action.args))
        else:
            said(AssistantText.make(content=action.text or ""))

    def tool_result(self, tool: str, *, result: Any = None, error: str | None = None,
                    text: str | None = None) -> None:
        if error is not None:
            self.messages.append(ToolError.make(tool=tool, error=error))
        else:
            self.messages.append(ToolResult.make(tool=tool, result=self._cap(result, text)))

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
            self.run.compaction = compaction
        self.event("compaction", cost_micros=usage.cost_micros,
                   tokens=usage.input_tokens + usage.output_tokens, detail=detail)

    # -- act on the policy's action -------------------------------------------------

    def act(self, action: Action) -> None:
        """Gate the action and apply the decision."""
        self.assistant(action, to_customer=action.problem is None and action.final is not None
                       and self.run.state in self.ctx.spec.asks_customer)
        self.said = action.text or ""
        if self._binding_broken(action):
            return
        decision = gate.check(self.ctx, self.run, action)
        match decision:
            case gate.Refuse():
                self._count_repeats(decision.repeat_refusals)
                self._refuse(decision)
            case gate.Finish():
                self.run.answer = decision.text
                self.stop("done", None)
            case gate.Fire():
                self.fire(decision.event, decision.payload, by_model=True)
            case gate.Pause():
                self._count_repeats(decision.repeat_refusals)
                self._pause_call(decision.tool, decision.args)
            case gate.Broken():
                self.tool_result(decision.tool, error=_BUG)
                self.crash(decision.where, decision.error)
            case gate.AskCustomer():
                conversation_writes.wait_for_customer(self, decision.text)
            case gate.Call():
                self._count_repeats(decision.repeat_refusals)
                self.execute(decision.tool, decision.args, key=self.key)
            case _:
                assert_never(decision)

    def _count_repeats(self, counter: int | None) -> None:
        """The gate's count of repeated calls refused in a row, when it gave one."""
        if counter is not None:
            self.run.repeat_refusals = counter

    def _refuse(self, refusal: gate.Refuse) -> None:
        reason = storable(refusal.reason)  # a tool's check may return any text
        if refusal.tool is not None:
            self.message(ToolError.make(tool=refusal.tool, error=reason))
        else:
            self.message(RuntimeNote.make(content=reason))
        self.event("refusal", tool=refusal.tool, event=refusal.event, reason=reason)
        if refusal.remember is not None:
            self.run.recent_calls = (self.run.recent_calls
                                     + [refusal.remember])[-gate.RECENT_WINDOW:]
        if refusal.fail is not None:
            self.stop("failed", refusal.fail)
        elif refusal.hand_over is not None:
            self.stop("handed_over", refusal.hand_over)

    def _binding_broken(self, action: Action) -> bool:
        """Before a write, what a person approved must still be what the run holds.

        Checked before the tool's own check, so the model is never told a changed value.
        """
        tool = self.ctx.spec.tools.get(action.tool or "")
        if tool is None or not tool.write or not self.run.facts:
            return False
        self._bound, problem = approved_binding(self.ctx.spec, self.ctx.store, self.run)
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
        confirmed = self._to_call(tool, args, args_dict, key, existing)
        if confirmed is None:
            return
        ctx = ToolContext(run_id=self.run.run_id, user=self.run.user, step=self.step,
                          facts=MappingProxyType(self.run.facts),
                          key=key if tool.write else None,
                          resources=self.ctx.resources)
        result, error, partly = self._call(tool, args, ctx, args_dict, key)
        self._settle(tool_name, tool, args, args_dict, key, confirmed, result, error, partly)

    def _to_call(self, tool: ToolSpec, args: BaseModel, args_dict: dict[str, Any],
                 key: str | None, existing: Effect | None) -> dict[str, Any] | None:
        """What the log says of the customer's confirmation of a call that is to run now;
        ``None`` when it is not to run (a confirmation refused, or a write claimed before,
        whose recorded outcome the step has taken instead)."""
        confirmed: dict[str, Any] = {}
        if tool.confirmed_by is not None:
            confirmed, refused = conversation_writes.use_confirmation(self, tool, args_dict,
                                                                      existing)
            if refused:
                return None
        if tool.write:
            assert key is not None
            if self._claimed_before(tool, args, key, existing, confirmed):
                return None
        return confirmed

    def _settle(self, tool_name: str, tool: ToolSpec, args: BaseModel,
                args_dict: dict[str, Any], key: str | None, confirmed: dict[str, Any],
                result: Any, error: str | None, partly: bool) -> None:
        """Record a call that ran (or failed) and give the model its outcome; a write in
        doubt hands the run over."""
        ran = error is None
        recorded, text, error = _recorded(tool_name, result, error)
        if tool.write and key is not None:
            self.effects_done[key] = (recorded, error)
        self.event("tool", tool=tool_name,
                   detail={"args": args_dict, "key": key, "error": error, **confirmed})
        self._remember_call(tool_name, args_dict, failed=error is not None)
        if tool.write and not ran and self._half_done(tool_name, key, error, partly):
            return
        if tool.write and ran and error is not None:
            # The write happened, but what it returned cannot be kept: told it failed, the
            # model could call it again under a new key. A person takes over instead.
            self.tool_result(tool_name, error=error)
            self.stop("handed_over", f"{tool_name} ran ({key}), but {error}")
            return
        self._finish_call(tool, args, recorded, error, text)

    def _call(self, tool: ToolSpec, args: BaseModel, ctx: ToolContext,
              args_dict: dict[str, Any], key: str | None) -> tuple[Any, str | None, bool]:
        """Call the tool (its hooks around it): its result, or the error the model reads,
        and whether the tool said it partly applied (:class:`~fsm.errors.PartlyApplied`)."""
        call = self._before_tool(tool, args_dict, key)
        try:
            result = called(tool.fn, args, ctx)
        except concurrent.futures.CancelledError as exc:
            # An async tool's call that its event loop cancelled (it is stopping): not the
            # tool's answer, and what it did is unknown, as after a crash.
            self._after_tool(call, "cancelled")
            raise Unavailable(f"{tool.name}: its call was cancelled before it answered (the "
                              "event loop that ran it is stopping)") from exc
        except Exception as exc:
            error = describe(exc)
            self._after_tool(call, error)
            if is_transient(exc):
                # Not the tool's answer: the step rolls back and the run is tried again
                # (a write claimed above is then in doubt, or called again if retry-safe).
                raise Unavailable(f"{tool.name}: {error}") from exc
            return None, error, isinstance(exc, PartlyApplied)
        self._after_tool(call, None)
        return result, None, False

    def _before_tool(self, tool: ToolSpec, args_dict: dict[str, Any],
                     key: str | None) -> ToolCallInfo | None:
        """The call as the hooks see it, given to ``before_tool``; ``None`` when no hook
        looks at tool calls (the view is then never built)."""
        hooks = self.ctx.hooks
        if hooks is None or not (hooks.wants("before_tool") or hooks.wants("after_tool")):
            return None
        call = observe.tool_call(self, tool.name, args_dict, key, write=tool.write,
                                 claimed=self._claimed)
        hooks.call("before_tool", call)
        return call

    def _after_tool(self, call: ToolCallInfo | None, error: str | None) -> None:
        hooks = self.ctx.hooks
        if hooks is not None and call is not None:
            hooks.call("after_tool", observe.tool_result(call, error))

    def _remember_call(self, tool: str, args: dict[str, Any], *, failed: bool) -> None:
        """The call joins the window the repetition rule reads (a failed one as failed)."""
        if self.ctx.max_repeats is not None:
            self.run.recent_calls = gate.remembered(self.run.recent_calls, tool, args,
                                                    failed=failed)

    def _half_done(self, tool: str, key: str | None, error: str | None, partly: bool) -> bool:
        """A failed write that may have left the world half done hands the run to a
        person (the model could neither finish nor undo it): one the tool says partly
        applied, or, where the workflow's writes depend on one another, one that failed
        after an earlier write of this run succeeded. Any other failed write is the
        tool's refusal, which changed nothing: an observation for the model."""
        if partly:
            self.tool_result(tool, error=error)
            self.stop("handed_over", f"{tool} partly applied ({error}, {key}); a person "
                                     "finishes or undoes it")
            return True
        if not self.ctx.spec.dependent_writes:
            return False
        done = [e for e in self.ctx.store.effects(self.run.run_id)
                if e.status == "DONE" and e.error is None and e.key != key]
        if not done:
            return False
        last = max(done, key=lambda e: e.step)
        self.tool_result(tool, error=error)
        self.stop("handed_over", f"{tool} failed ({error}) after {last.tool} of this run "
                                 f"succeeded ({last.key}); a person finishes or undoes it")
        return True

    def _claimed_before(self, tool: ToolSpec, args: BaseModel, key: str,
                        existing: Effect | None, confirmed: dict[str, Any]) -> bool:
        """Claim the write's key; ``True`` when it was claimed before and is dealt with
        here: refused (its claim cannot be trusted), its recorded result replayed, or the
        run handed over as in doubt."""
        if existing is None:
            existing = self._claim(tool.name, args.model_dump(mode="json"), key, confirmed)
            if existing is not None and self._untrusted(existing, confirmed):
                return True
        return existing is not None and self._settled(tool, args, existing, confirmed)

    def _claim(self, tool: str, args: dict[str, Any], key: str,
               confirmed: dict[str, Any]) -> Effect | None:
        """Commit the call's effect row and its ``claim`` event; the row found instead
        when the key was claimed before (nothing is then written)."""
        ctx = self.ctx
        now = ctx.clock()
        bound = claims.binding(self._approved, self._bound, confirmed.get("confirmed"))
        event = claims.claim_event(self.run, step=self.step, time=now, tool=tool, key=key,
                                   args=args, bound=bound)
        existing = ctx.store.claim_effect(
            Effect(key=key, run_id=self.run.run_id, step=self.step, tool=tool, args=args,
                   status="STARTED", started_at=now),
            owner=ctx.owner, version=self.expected_version, claim=event)
        if existing is None:
            self.expected_version += 1  # the claim's commit wrote the run row
            self._claimed = True
        return existing

    def _untrusted(self, existing: Effect, confirmed: dict[str, Any]) -> bool:
        """The key was claimed before this step claimed it: the row is acted on only if
        the log witnesses its claim and the tables still allow its call."""
        problem = claims.claim_problem(self.ctx, self.run, existing, approved=self._approved,
                                       confirmed=confirmed.get("confirmed"))
        if problem is None:
            return False
        self.tool_result(existing.tool, error="this call was claimed before, and the claim "
                                              "cannot be trusted; a person takes over")
        self.refuse_claim(existing, problem)
        return True

    def _settled(self, tool: ToolSpec, args: BaseModel, existing: Effect,
                 confirmed: dict[str, Any]) -> bool:
        """A claim found from before: the world is asked (a tool that declares a lookup),
        its recorded result replayed (done, and a signed commit recorded it), or the run
        is handed over (in doubt, or a result no signed commit recorded); False: call it
        again."""
        if tool.lookup is not None:
            return self._asked_world(tool, args, existing, confirmed)
        if existing.status == "DONE":
            events = self.ctx.store.events(self.run.run_id)
            if not claims.result_covered(existing, events,
                                         claims.signed(self.ctx.store, self.run.run_id, events)):
                self.refuse_claim(existing, f"effect {existing.key} ({existing.tool}) is done, "
                                            "but no signed commit recorded its result; nothing "
                                            "is replayed")
                return True
            self.event("tool", tool=tool.name,
                       detail={"key": existing.key, "replayed": True, **confirmed})
            self._finish_call(tool, args, existing.result, existing.error)
            return True
        if not tool.retry_safe:
            self.stop("handed_over", f"in doubt: {tool.name} {existing.key}")
            return True
        return False

    def _asked_world(self, tool: ToolSpec, args: BaseModel, existing: Effect,
                     confirmed: dict[str, Any]) -> bool:
        """Recovery of a write whose tool looks its outcome up by key: the world's outcome
        is the result (recorded now); none there, the call is made again under the same
        key (False); a row the world contradicts hands the run over."""
        assert tool.lookup is not None
        ctx = ToolContext(run_id=self.run.run_id, user=self.run.user, step=self.step,
                          facts=MappingProxyType(self.run.facts), key=existing.key,
                          resources=self.ctx.resources)
        try:
            found = tool.lookup(existing.key, ctx)
        except Exception as exc:
            if is_transient(exc):
                raise Unavailable(f"{tool.name}: looking up {existing.key}: "
                                  f"{describe(exc)}") from exc
            self.stop("handed_over", f"in doubt: {tool.name} {existing.key} (its lookup "
                                     f"raised {describe(exc)})")
            return True
        if found is None and existing.status != "DONE":
            return False  # the world never saw the key: the call is made now, once
        recorded, text, error = _recorded(tool.name, found, None)
        if found is None or error is not None or (
                existing.status == "DONE" and (existing.error, existing.result)
                != (None, recorded)):
            said = "has no outcome" if found is None else f"says {shown(text or found)}"
            self.refuse_claim(existing, f"effect {existing.key} ({existing.tool}) says "
                                        f"{existing.status}, but the world {said} under its "
                                        "key; nothing is replayed")
            return True
        self.effects_done[existing.key] = (recorded, None)
        self.event("tool", tool=tool.name,
                   detail={"key": existing.key, "looked_up": True, **confirmed})
        self._finish_call(tool, args, recorded, None, text)
        return True

    def refuse_claim(self, effect: Effect, problem: str) -> None:
        """A claimed row the log does not witness, or that the tables no longer allow:
        nothing runs, and a person takes over with the reason."""
        self.event("refusal", tool=effect.tool, reason=problem,
                   detail={"key": effect.key, "status": effect.status})
        self.stop("handed_over", problem)

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
        where = f"the remember hook of {tool.name!r}"
        try:
            if tool.remember is not None:
                facts = {**self.run.facts,
                         **tool.remember(args, result, MappingProxyType(self.run.facts))}
                problem = unreadable(facts)
                if problem is not None:
                    self.stop("failed", f"{tool.name}: its remember hook returned facts that "
                                        f"cannot be stored: {problem}")
                    return
                self.run.facts = facts
            where = f"the emits hook of {tool.name!r}"
            event = tool.emits(result) if tool.emits is not None else None
            if event and event not in tool.emits_events:
                # Only declared events: the tables, the diagrams and the verifier say
                # which tool fires what, and the run must not do otherwise.
                self.stop("failed", f"{tool.name}: emits returned {shown(event)!r}, not one "
                                    f"of its emits_events ({', '.join(tool.emits_events)})")
                return
        except Exception as exc:
            # The tool ran (its result is recorded); the workflow's own code failed on it.
            self.crash(where, exc, f"{tool.name}: {where} raised {describe(exc)} reading "
                                   "its result")
            return
        if tool.always_emits and not event:
            # The verifier assumed the run leaves this state after the call.
            self.stop("failed", f"{tool.name} declares always_emits, but its result fired "
                                "no event")
            return
        if event:
            self.fire(event, {}, by_model=False)

    def run_approved(self, pending: ApprovedCall) -> None:
        """Run the call a person approved, with the key it was requested under.

        Its arguments are checked against the approval row first: a changed argument
        hands the run over. A claim left by a process that died here is replayed
        (done), called again (retry-safe) or handed over as in doubt.
        """
        self.run.pending = None
        self._approved = pending
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
        """Fire ``event`` through the machine; a refusal is logged, never raised. An event
        the model fired (``by_model``, through the advance tool) gets its result as the
        advance tool's: the new state, or why it was refused."""
        spec = self.ctx.spec
        before = self.run.state
        try:
            after = machine_for(spec).fire(before, event, MappingProxyType(self.run.facts),
                                           payload, run_id=self.run.run_id)
        except WorkflowCodeError as exc:
            if by_model:
                self.tool_result(ADVANCE, error=_BUG)
            assert exc.__cause__ is not None
            self.crash(exc.where, exc.__cause__, str(exc))
            return False
        except TransitionRefused as exc:
            reason = storable(str(exc))  # a guard's error is the workflow's text
            if by_model:
                self.tool_result(ADVANCE, error=reason)
            self.event("refusal", event=event, reason=reason)
            return False
        facts = self.run.facts
        if event in spec.records:
            facts = {**facts, spec.records[event]: payload}
        if by_model:
            self.tool_result(ADVANCE, result={"event": event, "state": after})
        self.run.state = after
        self.run.facts = facts
        self.run.recent_calls = []
        self.event("transition", event=event, state_before=before, state_after=after)
        self.entered(event)
        return True

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
        elif spec.waits_for_customer(state):
            record = spec.records.get(event or "")
            asks = self.run.facts.get(record, {}) if record is not None else {}
            # A new proposal: a yes given to an earlier one no longer counts.
            self.run.confirmation = None
            # What the customer confirms is rendered from the exact call, never the
            # model's words (a plain question keeps them).
            message = customer_message(spec, self.said, dict(asks), self.run.facts)
            conversation_writes.wait_for_customer(self, message, args=dict(asks), record=record)

    def _pause_call(self, tool: str, args: BaseModel) -> None:
        self._pause(CallAwaitingApproval(tool=tool, args=args.model_dump(mode="json"),
                                         key=self.key, step=self.step))

    def request_again(self, pending: CallAwaitingApproval | EventAwaitingPerson) -> None:
        """Wait for a person on ``pending`` with a new request (a fork asks again what
        its parent waited for; a decision is never carried over)."""
        self._pause(pending)

    def _pause(self, pending: CallAwaitingApproval | EventAwaitingPerson) -> None:
        try:
            # People read the request through these; one that raises is a bug to fix
            # now, not a request shown without its amount (and so without a limit).
            self.ctx.spec.presentation.probe(pending.tool, pending.args, self.run.facts)
        except Exception as exc:
            self.crash("the presentation", exc)
            return
        approval = Approval.request(
            pending, run_id=self.run.run_id, run_version=self.expected_version + 1,
            now=self.ctx.clock(), ttl=self.ctx.spec.approval_ttl_seconds,
        )
        pending = pending.model_copy(update={"approval_id": approval.approval_id})
        self.run.status = "awaiting_approval"
        self.run.pending = pending
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
        self.run.status = "running"
        self.run.pending = None
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
            # With what was approved, when it changed: what the model must now use, as data.
            self.message(UserMessage.make(content=ruling.message) if ruling.args is None
                         else ApprovalNote.make(content=ruling.message, approved=ruling.args))
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
            self.run.facts = facts

    def _rule_on_call(self, pending: CallAwaitingApproval, ruling: Ruling) -> None:
        if ruling.verdict == "approved":
            # The decision lands first; the engine then runs the approved call in its own
            # commit, so a crash in between resumes into that call, never into a new one.
            approved = ApprovedCall(
                tool=pending.tool, args=ruling.args or pending.args, key=pending.key,
                step=pending.step, approval_id=pending.approval_id, args_hash="")
            self.run.pending = approved.model_copy(
                update={"args_hash": fingerprint(approved.subject())})
            if ruling.args is not None:
                self.message(RuntimeNote.make(content=ruling.message, approved=ruling.args))
        else:
            self.tool_result(pending.tool, error=ruling.message)

    def resume_from_desk(self, person: str, note: str, event: str) -> None:
        """A person at the desk continues a handed-over run with ``event`` (a human event
        out of its hand-over state); the model reads the note."""
        self.run.status = "running"
        self.run.reason = None
        self.run.pending = None
        self.message(UserMessage.make(content=f"{person} took the run over from the desk and "
                                      f"resumed it ({event}): {note}"))
        if not self.fire(event, {}, by_model=False):
            raise HandoverRefused(self.run.run_id, "event", f"the workflow's guard refused "
                                  f"{event!r} in state {self.run.state!r}; nothing was "
                                  "changed")

    # -- migrations -------------------------------------------------------------------

    def migrate(self, move: RunMove, approval: Approval | None) -> None:
        """Move the run to ``move.to`` in ``move.state`` (this step's context is on the
        target): withdraw the request it waited on (``approval``), log the move, and wait
        again in the target's terms, or give the model back a call the target refuses."""
        pending, before, by = self.run.pending, self.run.state, move.by
        if approval is not None and approval.decision is None:
            note = f"moved to version {move.to.label}; asked again there"
            self.decision = ApprovalDecision(approval_id=approval.approval_id,
                                             decision="withdrawn", reviewer=by, note=note,
                                             time=self.ctx.clock())
            asked_again = move.ask_again or not isinstance(pending, CallAwaitingApproval)
            self.event("decision", reviewer=by, tool=approval.tool, detail={
                "decision": "withdrawn", "approval_id": approval.approval_id, "note": note,
                "asked_again": asked_again})
        self.run.definition_hash = move.to.definition_hash
        self.run.state = move.state
        self.run.recent_calls = []
        self.run.repeat_refusals = 0
        self.moves_definition = True
        self.event("migrated", state_before=before, state_after=move.state, reviewer=by,
                   detail=move.detail)
        match pending:
            case EventAwaitingPerson():
                self._pause(EventAwaitingPerson(events=list(move.to.events_from(move.state)),
                                                args=pending.args, step=pending.step))
            case AwaitingCustomer():
                # Asked again in the target's terms, at the run's new version: a reply is
                # bound to the request as the target shows it.
                conversation_writes.wait_for_customer(self, pending.message,
                                                      args=pending.args,
                                                      record=pending.record)
            case CallAwaitingApproval() if move.ask_again:
                self._pause(CallAwaitingApproval(tool=pending.tool, args=pending.args,
                                                 key=pending.key, step=pending.step))
            case CallAwaitingApproval():
                self.run.status = "running"
                self.run.pending = None
                self.tool_result(pending.tool, error=move.why)
            case ApprovedCall() | None:
                pass  # nothing is asked again: an approved call runs, on the target version
            case _:
                assert_never(pending)

    # -- commit -------------------------------------------------------------------

    def _desk_rows(self) -> str | None:
        """Open the desk's row of a run this step hands over; what its request is about."""
        spec, run = self.ctx.spec, self.run
        if self.handover is None and run.status == "handed_over" and \
                self.was != "handed_over":
            log = self.ctx.store.events(run.run_id) if self.expected_version else []
            first = (self.ctx.transcripts.of(run.run_id)[:1] if self.expected_version
                     else [m.body() for m in self.messages[:1]])
            self.handover = desk.opened(spec, run, log, self.events,
                                        first[0] if first else None)
        if self.new_approval is not None:
            return desk.request_subject(spec, run, self.new_approval.tool,
                                        self.new_approval.args)
        writes = [e for e in self.events if e.kind == "tool" and e.tool in spec.tools
                  and spec.tools[e.tool].write and isinstance(e.detail.get("args"), dict)]
        if writes:
            return desk.request_subject(spec, run, writes[-1].tool, writes[-1].detail["args"])
        return None

    def commit(self, *, initial: bool = False) -> StepCommit:
        elapsed = 0.0 if initial else time.monotonic() - self.started
        self.run.used.active_seconds += elapsed
        first_message = self.run.message_count
        now = self.ctx.clock()
        if not math.isfinite(now):  # it would be stored as null, and the run unreadable
            raise ValueError(f"the engine's clock returned {now!r}, not a finite time; "
                             "nothing of this step was saved")
        self.run.step = max(self.run.step, self.step)
        self.run.updated_at = now
        self.run.message_count = first_message + len(self.messages)
        if self.run.unavailable and not self._fault:
            self.run.unavailable = 0  # a step landed: the infrastructure works again
        subject = self._desk_rows()
        commit = StepCommit(
            run=self.run, expected_version=self.expected_version, messages=self.messages,
            view=self.view, events=self.events, effects_done=self.effects_done,
            new_approval=self.new_approval, decision=self.decision, artifacts=self.artifacts,
            owner=self.ctx.owner, handover=self.handover, subject=subject,
            moves_definition=self.moves_definition,
            replies_read=self.replies_read, token_hash=self.token_hash,
        )
        if commit.events:
            # The last event of the commit covers every other row it writes.
            last = commit.events[-1]
            rows = covered_rows(commit, first_message)
            notes = outbox_keys(commit)  # the notifications the store writes with it
            if notes:
                rows["notifications"] = notes
            last.detail = {**last.detail, "rows": rows}
        return commit

    def save(self) -> RunState:
        transcripts, hooks = self.ctx.transcripts, self.ctx.hooks
        try:
            commit = self.commit()
            if hooks is not None and hooks.wants("before_commit"):
                hooks.call("before_commit", observe.commit_info(self, commit))
            run = self.ctx.store.commit(commit)
        except Exception:
            # The step did not land: read the transcript from the store next time.
            transcripts.forget(self.run.run_id)
            raise
        transcripts.extend(self.run.run_id, commit.message_dicts)
        if hooks is not None:
            observe.committed(hooks, self, commit, run)
        return run

    def create(self) -> RunState:
        """Insert the new run with what this (initial) step wrote."""
        commit, hooks = self.commit(initial=True), self.ctx.hooks
        if hooks is not None and hooks.wants("before_commit"):
            hooks.call("before_commit", observe.commit_info(self, commit, initial=True))
        run = self.ctx.store.create_run(self.run, commit)
        if hooks is not None:
            observe.committed(hooks, self, commit, run, initial=True)
        return run


#: What the model reads when the workflow's own code failed on its action.
_BUG = "the workflow's own code failed on this call; the run stops for its author to fix"


def _plain(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A policy's request record as plain JSON for the log; one that is not is dropped
    (its call still counts), since the log must stay readable."""
    if not value:
        return None
    try:
        check_plain_json(value)
    except (TypeError, ValueError, RecursionError):
        return {"unreadable": "the policy's request record is not plain JSON"}
    return value


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
