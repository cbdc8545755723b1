"""Migration plans: runs, the version they move to, a state map, and every reason a run
cannot move, found before anything changes.

A plan is checked as a whole before it runs, with one line for every problem:

- every state a selected run is in is mapped to a state of the target (equal names map
  by default; ``state_map`` maps the others);
- a waiting state maps to a state that waits the same way (:data:`WAIT_KINDS`), and a
  state that does not wait maps to one that does not;
- a call waiting for approval names a tool the target state allows, with arguments valid
  under the target's schema; it is asked for again there (the old request is withdrawn:
  approvals are bound to the run's version). A call the target refuses goes back to the
  model, and the plan says so;
- the facts the target's guards read on the way out of the mapped state exist in the run,
  when that state has no tool that could still add them;
- the verifier proves the target's invariants on from the mapped state, for a run whose
  path so far is the run's own (:func:`fsm.auditor.verify.verify_from`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from fsm.auditor.verify import verify_from
from fsm.definition.spec import WorkflowSpec
from fsm.errors import validation_summary
from fsm.migration.moves import history_moves
from fsm.records import (
    FINAL_STATUSES,
    ApprovedCall,
    CallAwaitingApproval,
    Event,
    EventAwaitingPerson,
    RunState,
)
from fsm.records.conversation import AwaitingCustomer
from fsm.runtime.context import RunMove


@dataclass(frozen=True)
class WaitKind:
    """One way a run waits in a state of its tables: for whom, how to tell that a run
    waits so, and how to tell that a definition's state does."""

    #: Who the run waits for, as the plan's lines say it ("a person").
    name: str
    run_waits: Callable[[RunState], bool]
    state_waits: Callable[[WorkflowSpec, str], bool]


#: Every way a run can wait in a state. A new kind of waiting is one more entry here.
WAIT_KINDS: tuple[WaitKind, ...] = (
    WaitKind("a person",
             lambda run: run.status == "awaiting_approval"
             and isinstance(run.pending, EventAwaitingPerson),
             lambda spec, state: spec.waits_for_person(state)),
    # A run waiting for its customer: in a state that waits on a proposal, or one whose
    # model asked a question. A state of the target must ask the customer too.
    WaitKind("the customer",
             lambda run: run.status == "awaiting_customer",
             lambda spec, state: spec.talks_to_customer(state)),
)


def run_waits_for(run: RunState) -> str | None:
    """Whom ``run`` waits for in its state (``None``: its state does not wait)."""
    return next((k.name for k in WAIT_KINDS if k.run_waits(run)), None)


def state_waits_for(spec: WorkflowSpec, state: str) -> str | None:
    """Whom a run in ``state`` of ``spec`` waits for (``None``: the state does not wait)."""
    return next((k.name for k in WAIT_KINDS if k.state_waits(spec, state)), None)


@dataclass
class RunVerdict:
    """What a plan does with one run, or why it cannot."""

    run_id: str
    version: int
    from_hash: str
    from_label: str
    state: str
    mapped: str
    #: Why the run cannot move (each refuses the plan).
    problems: list[str] = field(default_factory=list)
    #: What moving it does besides the move (a request asked again, a call withdrawn).
    notes: list[str] = field(default_factory=list)
    #: Why the run is left as it is (already on the target).
    skipped: str | None = None
    #: Why the target refuses the call the run waits to have approved (it is withdrawn).
    refused_call: str | None = None
    move: RunMove | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Plan:
    """A migration of runs of one workflow to one of its kept versions."""

    workflow: str
    target: WorkflowSpec
    state_map: dict[str, str]
    by: str
    #: Problems of the plan itself (a map to a state the target lacks).
    problems: list[str] = field(default_factory=list)
    runs: list[RunVerdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(v.ok for v in self.runs)

    @property
    def moving(self) -> list[RunVerdict]:
        return [v for v in self.runs if v.ok and v.move is not None]

    def all_problems(self) -> list[str]:
        return self.problems + [p for v in self.runs for p in v.problems]

    def lines(self) -> list[str]:
        """The verdict of each run, then the plan's own problems: one line each."""
        to = self.target.label
        out = []
        for v in self.runs:
            if v.skipped is not None:
                out.append(f"skip    {v.run_id}: {v.skipped}")
            elif v.ok:
                out.append(f"migrate {v.run_id}: version {v.from_label} → {to}, "
                           f"{v.state} → {v.mapped}")
            else:
                out.append(f"refuse  {v.run_id}: version {v.from_label} → {to}, "
                           f"{v.state} → {v.mapped}")
            out += [f"  - {p}" for p in v.problems]
            out += [f"  note: {n}" for n in v.notes]
        return out + [f"plan: {p}" for p in self.problems]


def check_plan(workflow: WorkflowSpec, target: WorkflowSpec, runs: list[tuple[RunState,
               list[Event], str]], state_map: Mapping[str, str], by: str, *,
               unfinished: Mapping[str, str] | None = None) -> Plan:
    """The plan moving ``runs`` (each with its log and the label of its version) to
    ``target``, one of ``workflow``'s kept versions, with every problem found.
    ``unfinished`` names the runs whose next step claimed a write and never committed
    (run id → tool). Pure: it reads what it is given and changes nothing."""
    plan = Plan(workflow.name, target, dict(state_map), by)
    claims = dict(unfinished or {})
    for old, new in sorted(state_map.items()):
        if new not in target.states:
            plan.problems.append(f"--map {old}={new}: version {target.label} has no state "
                                 f"{new!r} (states: {', '.join(target.states)})")
    plan.runs = [_verdict(plan, run, events, label, claims.get(run.run_id))
                 for run, events, label in runs]
    return plan


def _verdict(plan: Plan, run: RunState, events: list[Event], label: str,
             claimed: str | None) -> RunVerdict:
    target = plan.target
    mapped = plan.state_map.get(run.state, run.state)
    v = RunVerdict(run.run_id, run.version, run.definition_hash, label, run.state, mapped)
    if run.workflow != plan.workflow:
        v.problems.append(f"the run is of workflow {run.workflow!r}, not {plan.workflow!r}")
        return v
    if run.definition_hash == target.definition_hash:
        v.skipped = f"already on version {target.label}"
        return v
    if run.status in FINAL_STATUSES:
        v.problems.append(f"the run is {run.status}: only runs that have not ended move")
        return v
    if claimed is not None:
        v.problems.append(f"its step {run.step + 1} claimed a write of {claimed} and never "
                          f"committed (a crash): resume it on version {label} first, which "
                          "finishes that write or hands the run over")
        return v
    for check in (_mapped, _waiting, _pending, _facts, _proved):
        v.problems += list(check(target, run, mapped, v, events, plan))
        if v.problems and check in (_mapped, _waiting):
            return v  # the later checks need a state the run can live in
    if v.ok:
        v.move = _move(plan, run, v)
    return v


def _move(plan: Plan, run: RunState, v: RunVerdict) -> RunMove:
    target = plan.target
    effective = {**plan.state_map, run.state: v.mapped}
    detail: dict[str, Any] = {
        "from_hash": run.definition_hash, "to_hash": target.definition_hash,
        "from_version": v.from_label, "to_version": target.label, "map": effective,
        "by": plan.by,
    }
    why = "" if v.refused_call is None else (
        f"withdrawn before anyone decided: the workflow moved to version {target.label}, "
        f"where {v.refused_call}; decide again")
    return RunMove(to=target, state=v.mapped, by=plan.by, detail=detail,
                   ask_again=v.refused_call is None, why=why)


Check = Iterator[str]


def _mapped(target: WorkflowSpec, run: RunState, mapped: str, v: RunVerdict,
            events: list[Event], plan: Plan) -> Check:
    if mapped not in target.states:
        yield (f"state {run.state!r} is not mapped: version {target.label} has no state "
               f"{mapped!r} (map it with --map {run.state}=STATE; states: "
               f"{', '.join(target.states)})")
    elif mapped in target.terminal:
        yield (f"state {run.state!r} maps to {mapped!r}, which ends runs in version "
               f"{target.label}: a run that has not ended maps to a state it can leave")


def _waiting(target: WorkflowSpec, run: RunState, mapped: str, v: RunVerdict,
             events: list[Event], plan: Plan) -> Check:
    was, will = run_waits_for(run), state_waits_for(target, mapped)
    if was == will:
        return
    if was is None:
        yield (f"state {run.state!r} does not wait, but {mapped!r} in version "
               f"{target.label} waits for {will}: map it to a state that does not wait")
    elif will is None:
        yield (f"state {run.state!r} waits for {was}, but {mapped!r} in version "
               f"{target.label} is a model state: map a waiting state to a state that "
               f"waits for {was}")
    else:
        yield (f"state {run.state!r} waits for {was}, but {mapped!r} in version "
               f"{target.label} waits for {will}")


def _pending(target: WorkflowSpec, run: RunState, mapped: str, v: RunVerdict,
             events: list[Event], plan: Plan) -> Check:
    pending = run.pending
    if isinstance(pending, EventAwaitingPerson):
        v.notes.append(f"waits for a person again in {mapped!r} (events: "
                       f"{', '.join(target.events_from(mapped))}): request "
                       f"{pending.approval_id} is withdrawn and asked again under version "
                       f"{target.label}")
        return
    if isinstance(pending, AwaitingCustomer):
        v.notes.append(f"waits for its customer again in {mapped!r}: the request is asked "
                       f"again under version {target.label}, and a reply to the earlier one "
                       "fires no event")
        return
    if not isinstance(pending, CallAwaitingApproval | ApprovedCall):
        return
    why = call_problem(target, mapped, pending.tool, pending.args)
    if isinstance(pending, ApprovedCall):
        if why is not None:
            yield (f"an approved call {pending.tool} waits to run, but {why}: let it run "
                   f"on version {v.from_label} first")
    elif why is None:
        v.notes.append(f"the call {pending.tool} waiting for approval is asked for again "
                       f"under version {target.label} (request {pending.approval_id} is "
                       "withdrawn)")
    else:
        v.refused_call = why
        v.notes.append(f"its call {pending.tool} waiting for approval is refused under "
                       f"version {target.label}: {why}; request {pending.approval_id} is "
                       "withdrawn and the model decides again (a new call is approved anew)")


def call_problem(target: WorkflowSpec, state: str, tool: str,
                 args: dict[str, Any]) -> str | None:
    """Why ``target`` would refuse the call in ``state``, or ``None``."""
    spec = target.tools.get(tool)
    if spec is None:
        return f"version {target.label} has no tool {tool!r}"
    allowed = target.allowed_tools(state)
    if tool not in allowed:
        return (f"{tool!r} is not allowed in {state!r} (allowed: "
                f"{', '.join(allowed) or 'none'})")
    try:
        valid = spec.args.model_validate(args).model_dump(mode="json")
    except ValidationError as exc:
        return f"its arguments are not valid under the schema of {tool}: " \
               f"{validation_summary(exc)}"
    if valid != args:
        return f"its arguments read differently under the schema of {tool}: {valid}"
    return None


def _facts(target: WorkflowSpec, run: RunState, mapped: str, v: RunVerdict,
           events: list[Event], plan: Plan) -> Check:
    if target.allowed_tools(mapped):
        return  # a tool there can still add what a guard reads
    for event in target.events_from(mapped):
        guard = target.guards.get(event)
        if guard is None:
            continue
        missing = sorted(set(read_by(guard.fn, run.facts)) - set(run.facts))
        if missing:
            yield (f"the guard of {event!r} in version {target.label} ({guard.description}) "
                   f"reads {', '.join(map(repr, missing))}, which the run lacks, and "
                   f"{mapped!r} has no tool that could add it")


class _Reads(Mapping[str, Any]):
    """The run's facts, noting every key a guard looks up."""

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts
        self.keys_read: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.keys_read.append(key)
        return self.facts[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.keys_read.append(key)
        return key in self.facts

    def get(self, key: str, default: Any = None) -> Any:
        self.keys_read.append(key)
        return self.facts.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


def read_by(fn: Callable[[Any, dict[str, Any]], Any], facts: Mapping[str, Any]) -> list[str]:
    """The fact keys ``fn(facts, payload)`` looks up, called with an empty payload (a guard
    that fails or raises on it still shows what it read first)."""
    reads = _Reads(facts)
    try:
        fn(reads, {})
    except Exception:  # noqa: BLE001 - workflow code; what it read is what counts
        pass
    return reads.keys_read


def _proved(target: WorkflowSpec, run: RunState, mapped: str, v: RunVerdict,
            events: list[Event], plan: Plan) -> Check:
    history = history_moves(target, events, plan.state_map)
    for verdict in verify_from(target, mapped, history):
        if not verdict.proved:
            steps = "; ".join(mv.describe() for mv in verdict.counterexample)
            yield (f"version {target.label} breaks its invariant "
                   f"'{verdict.invariant.title.replace('`', '')}' on from {mapped!r}: "
                   f"{verdict.why.replace('`', '')} ({steps})")
