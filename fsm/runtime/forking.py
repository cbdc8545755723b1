"""Forking a run: a new run from what another had committed at one of its steps.

The parent's state at step N is re-derived, not guessed: its recorded actions are driven
again in a :class:`~fsm.runtime.recording.Sandbox` (tools answered from the recording,
nothing run, nothing written to the store) up to step N, and the result must give back
the parent's transcript and state of that step exactly, or no fork is made. The fork
then starts with that state, facts and transcript, the parent's budgets and usage, and a
start event that records the parent, the step and the parent's log head there
(``forked_from``), which ``fsm audit`` checks against the parent's log, and the steps and
cost used by then (``used_at_fork``).

- Writes the parent made up to step N are in the transcript as done and are never made
  again: the fork's step counter goes on from N, so its own writes get its own keys
  (``"{fork}:{step}"``). The start event lists the writes it carries over.
- A person's decision, or a customer's reply, given while the parent waited at step N is
  not carried: the fork waits again, with a new request of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fsm.errors import ForkRefused
from fsm.records import (
    CallAwaitingApproval,
    EventAwaitingPerson,
    ForkOrigin,
    RunState,
    Used,
    fingerprint,
    new_id,
)
from fsm.records.conversation import AwaitingCustomer
from fsm.records.transcript import read_all
from fsm.runtime.conversation import writes as conversation_writes
from fsm.runtime.recording import RecordedPolicy, Recording, Sandbox, cut, sandbox_budgets
from fsm.runtime.step import Step

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec

__all__ = ["fork", "rederive"]

#: Statuses a run can be forked in: it still had something to do at that step.
_GOING = ("running", "awaiting_approval", "awaiting_customer")


def check_step(run: RunState, step: int, verb: str = "fork") -> None:
    """Refuse a step the run did not commit (one clear line)."""
    if not 0 <= step <= run.step:
        raise ForkRefused(
            f"cannot {verb} run {run.run_id!r} at step {step}: it committed steps 0 to "
            f"{run.step} (give --at/--from between 0 and {run.step})", run_id=run.run_id,
            state=run.state)


def rederive(engine_cls: Any, spec: WorkflowSpec, rec: Recording, step: int, *,
             clock: Any) -> tuple[RunState, list[dict[str, Any]]]:
    """The run of ``rec`` as it had committed step ``step``, re-derived in a sandbox, and
    its transcript then; :class:`ForkRefused` when the sandbox does not give back the
    recorded transcript and state."""
    box = Sandbox(spec, rec)
    with engine_cls(box.spec, box.store, RecordedPolicy(rec, upto=step),
                    budgets=sandbox_budgets(rec.run, step), clock=clock,
                    resources=box.resources) as engine:
        run = engine.start(rec.goal, user=rec.run.user, run_id=rec.run.run_id,
                           budgets=sandbox_budgets(rec.run, step))
        run = box.answer(engine, run, upto=step)
    messages = box.store.messages(run.run_id)[:run.message_count]
    n = cut(rec.events, step)
    recorded_state = rec.events[n - 1].state_after
    problem = None
    if rec.messages[:len(messages)] != messages:
        problem = "its transcript differs from the recorded one"
    elif run.step != step:
        problem = f"the sandbox stopped at step {run.step} ({run.status}: {run.reason})"
    elif run.state != recorded_state:
        problem = f"it reaches state {run.state!r}, the recording {recorded_state!r}"
    if problem is not None:
        raise ForkRefused(f"cannot re-derive run {rec.run.run_id!r} at step {step} from its "
                          f"recording: {problem}; nothing was made", run_id=rec.run.run_id)
    box.store.close()
    return run, messages


def _used_at(rec: Recording, step: int, sandboxed: Used) -> Used:
    """The parent's usage at ``step``: the tokens and cost its log records to there."""
    events = rec.events[:cut(rec.events, step)]
    used = sandboxed.model_copy()
    used.cost_micros = sum(e.cost_micros for e in events)
    used.input_tokens = sum(int(e.detail.get("input_tokens", 0) or 0) for e in events
                            if e.kind in ("policy", "compaction"))
    used.output_tokens = sum(int(e.detail.get("output_tokens", 0) or 0) for e in events
                             if e.kind in ("policy", "compaction"))
    return used


def fork(engine: Any, run_id: str, *, at: int, new_run_id: str | None = None) -> RunState:
    """A new run from what run ``run_id`` had committed at step ``at`` of the store of
    ``engine`` (an :class:`~fsm.runtime.engine.Engine` of the run's workflow), not driven:
    resume it to continue. See the module's docstring."""
    store = engine.store
    parent = store.load_run(run_id)
    check_step(parent, at)
    new_id_ = new_run_id or new_id()
    if any(r.run_id == new_id_ for r in [_maybe(store, new_id_)] if r is not None):
        raise ForkRefused(f"cannot fork run {run_id!r} as {new_id_!r}: a run of that id "
                          "exists; give another --run-id", run_id=run_id)
    spec = engine.definition_of(parent)
    rec = Recording.of(store, run_id)
    # The sandbox is driven by an engine of the same kind (this module does not import the
    # engine, which imports it).
    state, messages = rederive(type(engine), spec, rec, at, clock=engine.clock)
    if state.status not in _GOING and state.status != "budget_exhausted":
        raise ForkRefused(f"cannot fork run {run_id!r} at step {at}: it had stopped there "
                          f"({state.status}); fork it at an earlier step", run_id=run_id)
    seq, head = rec.head_at(at)
    origin = ForkOrigin(run_id=run_id, step=at, seq=seq, hash=head)
    now = engine.clock()
    waiting = state.pending if state.status in ("awaiting_approval", "awaiting_customer") \
        else None
    run = state.model_copy(update={
        "run_id": new_id_, "status": "running", "reason": None, "answer": None,
        "pending": None, "version": 0, "message_count": 0, "created_at": now,
        "updated_at": now, "budgets": parent.budgets, "unavailable": 0,
        "used": _used_at(rec, at, state.used), "forked_from": origin,
        "definition_hash": parent.definition_hash,
    })
    carried = [{"key": e.key, "tool": e.tool, "args_hash": fingerprint(e.args)}
               for e in store.effects(run_id) if e.status == "DONE" and e.step <= at]
    with Step(engine.context_for(spec), run, step=at, new_run=True) as s:
        s.messages.extend(read_all(messages))
        # The parent's reply token is the parent's: a conversation forked takes its replies
        # through fsm reply (or the engine), not through that token.
        started = {k: v for k, v in rec.start().items() if k != "reply_token_sha256"}
        # What the run had used by the step, so that the fork's own part of its log can be
        # counted alone should the parent's log be gone (a pruned parent).
        at_fork = {"steps": run.used.steps, "cost_micros": run.used.cost_micros}
        detail = {**started, "user": parent.user, "forked_from": origin.model_dump(),
                  "carried": carried, "used_at_fork": at_fork}
        s.event("start", state_after=run.state, detail=detail)
        _wait_again(s, waiting)
    return s.landed


def _maybe(store: Any, run_id: str) -> RunState | None:
    from fsm.errors import RunNotFound

    try:
        return store.load_run(run_id)  # type: ignore[no-any-return]
    except RunNotFound:
        return None


def _wait_again(s: Step, waiting: Any) -> None:
    """What the parent waited for at the step is asked again, under the fork's own key."""
    if isinstance(waiting, CallAwaitingApproval):
        s.request_again(waiting.model_copy(update={"key": s.key, "approval_id": None}))
    elif isinstance(waiting, EventAwaitingPerson):
        s.request_again(waiting.model_copy(update={"approval_id": None}))
    elif isinstance(waiting, AwaitingCustomer):
        conversation_writes.wait_for_customer(s, waiting.message, args=dict(waiting.args),
                                  record=waiting.record)
