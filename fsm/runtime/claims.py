"""Claims: a write runs only from a claim that the hash-chained log witnessed.

Before a write tool runs, its step commits a ``claim`` event (the tool, the hash of the
arguments, the state, the step and the approval the call is bound to) in the same
transaction as the call's effect row, which keeps the event's hash. A claimed row found
later (left by a process that crashed, or written into the table by someone else) is
trusted only when the log witnesses it, and the call it holds runs only if the tables
still allow it now: the tool in this state, its arguments, its check, its approval rule
and the same binding. The functions here read and judge; the step writes.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from fsm.errors import validation_summary
from fsm.records import (
    GENESIS,
    Approval,
    ApprovedCall,
    Effect,
    Event,
    RunState,
    describe,
    effect_hash,
    fingerprint,
    shown,
    verify_chain,
)
from fsm.runtime import review
from fsm.runtime.context import StepContext
from fsm.runtime.conversation.judging import confirmation_problem
from fsm.signing import Signature
from fsm.store.roles import RunReads


def binding(approved: ApprovedCall | None, approval: Approval | None,
            confirmed: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What a write is bound to: the approved call it is (its approval and the hash of
    what was approved), else the approval of a waiting state whose record the run holds;
    and the customer's confirmation it uses (its reply and the confirmed call's hash).
    ``None``: nothing (a call no person and no customer had to agree to)."""
    out: dict[str, Any] = {}
    if approved is not None:
        out = {"approval": approved.approval_id, "hash": approved.args_hash}
    elif approval is not None:
        out = {"approval": approval.approval_id, "hash": fingerprint(approval.granted)}
    if confirmed is not None:
        out["confirmation"] = confirmed
    return out or None


def claim_event(run: RunState, *, step: int, time: float, tool: str, key: str,
                args: dict[str, Any], bound: dict[str, Any] | None) -> Event:
    """The ``claim`` event a step commits before ``tool`` runs under ``key``."""
    return Event(run_id=run.run_id, step=step, time=time, kind="claim", tool=tool,
                 state_before=run.state, state_after=run.state,
                 detail={"key": key, "args_hash": fingerprint(args), "bound": bound})


def covers(claim: Event, effect: Effect) -> bool:
    """Whether ``claim`` is the logged claim of ``effect``: its hash, key, tool, step and
    arguments."""
    return (claim.kind == "claim" and claim.hash == effect.claim
            and claim.detail.get("key") == effect.key and claim.tool == effect.tool
            and claim.step == effect.step and claim.run_id == effect.run_id
            and claim.detail.get("args_hash") == fingerprint(effect.args))


def signed(store: RunReads, run_id: str, events: list[Event]) -> Signature | str:
    """The signature of the run's log head when it signs exactly ``events`` (the log as
    read) with a key of the store's keyring, else why not (see :mod:`fsm.signing`)."""
    count, head, text = store.signed_head(run_id)
    last = events[-1].hash if events else GENESIS
    if (count, head) != (len(events), last):
        return (f"the run row records {count} events up to {head[:12]}…, the log has "
                f"{len(events)} up to {last[:12]}…")
    return store.keys.check(run_id, count, head, text)


def witness(effect: Effect, events: list[Event], signature: Signature | str) -> Event | str:
    """The claim event of ``effect`` in a run's log, or why the log does not witness it:
    the chain is intact, and a signed commit wrote the claim."""
    broken = verify_chain(events)
    if broken is not None:
        return f"the run's log is broken ({broken})"
    if isinstance(signature, str):
        return f"the run's log head is not signed by the deployment's key ({signature})"
    if effect.claim is None:
        return "no claim in the log records it"
    found = next((e for e in reversed(events) if e.hash == effect.claim), None)
    if found is None:
        return "the claim it names is not in the run's log"
    if not covers(found, effect):
        return (f"event seq {found.seq} is not a claim of this call (its key, tool, step "
                "or arguments differ)")
    if not signature.covers(found.seq):
        return f"its claim (event seq {found.seq}) was written by no signed commit"
    return found


def result_covered(effect: Effect, events: list[Event], signature: Signature | str) -> bool:
    """Whether a signed commit recorded ``effect``'s status, result and error as the row
    holds them."""
    if isinstance(signature, str):
        return False
    digest = effect_hash(effect.result, effect.error)
    for e in events:
        rows = e.detail.get("rows")
        done = rows.get("effects") if isinstance(rows, dict) else None
        if isinstance(done, dict) and done.get(effect.key) == digest \
                and signature.covers(e.seq):
            return True
    return False


def claim_problem(ctx: StepContext, run: RunState, effect: Effect, *,
                  approved: ApprovedCall | None = None,
                  confirmed: dict[str, Any] | None = None) -> str | None:
    """Why the claimed call ``effect`` may not run (or be replayed) now, in one line;
    ``None`` when the log witnesses its claim and the tables still allow it.

    ``approved``: the approved call the claim was made for; its approval was checked
    already, so the tool's approval rule is not asked again. ``confirmed``: the
    customer's confirmation this step spent on the call (checked already); without it,
    a call that needs one must still hold the run's.
    """
    events = ctx.store.events(run.run_id)
    found = witness(effect, events, signed(ctx.store, run.run_id, events))
    if isinstance(found, str):
        return (f"effect {effect.key} ({effect.tool}, {effect.status}) is not witnessed by "
                f"the log: {found}; nothing ran")
    problem = _recheck(ctx, run, effect, found, approved, confirmed)
    if problem is not None:
        return (f"the claimed call {effect.key} ({effect.tool}) is refused: {problem}; "
                "nothing ran")
    return None


def _recheck(ctx: StepContext, run: RunState, effect: Effect, claim: Event,
             approved: ApprovedCall | None, confirmed: dict[str, Any] | None) -> str | None:
    """The gate, the state and the binding, for a call found claimed."""
    spec = ctx.spec
    tool = spec.tools.get(effect.tool)
    if tool is None or not tool.write:
        return f"{effect.tool!r} is not a write tool of workflow {spec.name!r}"
    if claim.state_after != run.state:
        return f"it was claimed in state {claim.state_after!r}, the run is in {run.state!r}"
    problem = _gate(spec.allowed_tools(run.state), run, tool, effect.args,
                    ask_approval=approved is None)
    if problem is not None:
        return problem
    if tool.confirmed_by is not None and confirmed is None:
        unconfirmed = confirmation_problem(run, tool, effect.args)
        if unconfirmed is not None:
            return unconfirmed
        c = run.confirmation
        confirmed = None if c is None else {"reply": c.reply, "hash": c.args_hash}
    approval, changed = (None, None) if approved is not None else \
        review.approved_binding(spec, ctx.store, run)
    if changed is not None:
        return changed
    bound = binding(approved, approval, confirmed)
    if claim.detail.get("bound") != bound:
        return (f"it was claimed bound to {claim.detail.get('bound')}, the run is now bound "
                f"to {bound}")
    return None


def _gate(allowed: Any, run: RunState, tool: Any, raw: dict[str, Any], *,
          ask_approval: bool) -> str | None:
    """The gate's checks of a call, as a model's call passes them: the tool in the state,
    its arguments, its own check, and (``ask_approval``) its approval rule."""
    if tool.name not in allowed:
        return (f"tool {tool.name!r} is not allowed in state {run.state!r} "
                f"(allowed: {', '.join(allowed) or 'none'})")
    try:
        args = tool.args.model_validate(raw)
    except ValidationError as exc:
        return f"bad arguments: {validation_summary(exc)}"
    facts = MappingProxyType(run.facts)
    try:
        said = tool.check(args, facts) if tool.check is not None else None
        needs_person = ask_approval and tool.needs_approval(args, facts)
    except Exception as exc:
        return f"its check raised {describe(exc)}"
    if said:
        return f"its check says: {shown(said)}"
    if needs_person:
        return "it needs a person's approval, and none is recorded for it"
    return None
