"""Every persisted shape, spelled once: the run row (:class:`RunState`, a small
snapshot, never the transcript), what a paused run waits for (:data:`Pending`), the rows
one step writes (:class:`Event`, :class:`Effect`, :class:`Approval`,
:class:`ViewRecord`, gathered in a :class:`StepCommit`), handovers and definitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fsm.records.conversation import AwaitingCustomer, Confirmation
from fsm.records.jsonic import (
    canonical,
    fingerprint,
    link_hash,
    new_id,
)
from fsm.records.transcript import Message

#: Bump when :class:`RunState` changes shape; add a step to ``_MIGRATIONS``.
SCHEMA_VERSION = 3

Status = Literal[
    "running",            # a step may be taken now: ask the policy, or run an approved call
    "awaiting_approval",  # paused for a person; nothing runs until a decision or an expiry
    "done",               # reached a terminal state, or gave a final answer where allowed
    "failed",             # the policy or the workflow's own code raised, or a repetition loop
    "budget_exhausted",   # a step, cost, token or time budget is spent (``reason`` says which)
    "handed_over",        # a person must take over: a hand-over state, an in-doubt write
    "model_unavailable",  # the model could not be reached; resuming continues the run
    "model_refused",      # the model server refuses this request every time; change the model
                          # or the server, then resume
    "awaiting_customer",  # waits for the customer's reply; nothing runs until it arrives
]
#: Statuses a run never leaves.
FINAL_STATUSES: frozenset[str] = frozenset(
    {"done", "failed", "budget_exhausted", "handed_over"})
#: Every status, in the order above.
STATUSES: tuple[str, ...] = get_args(Status)

EventKind = Literal[
    "start",       # the run was created in the initial state
    "policy",      # one policy call, with its usage
    "tool",        # a tool ran (or a recorded write was replayed)
    "refusal",     # the gate or the machine refused an action: an observation, not an error
    "transition",  # an event moved the workflow machine
    "pause",       # the run started to wait for a person
    "decision",    # a person approved or denied, or the approval expired
    "compaction",  # older turns of the view were replaced by a summary
    "stop",        # the run reached a final status (or model_unavailable)
    "resume",      # a run stopped as model_unavailable was continued
    "takeover",    # an operator took the run's lease from a holder that is gone
    "recover",     # a crash left a claimed write: its step is finished from the claim
    "budget",      # an operator raised the budgets of a run
    "take",        # a person at the desk took a handed-over run (it is assigned to them)
    "close",       # a person closed a handover: resolved outside fsm, resumed, or closed
    "migrated",    # an operator moved the run to another definition (both hashes, the map)
    "fallback",    # the model server failed on a request; the policy asks another way from now
    "policy_set",  # the run is driven by another policy or model from here on
    "ask",         # the run started to wait for its customer (the message or proposal shown)
    "reply",       # the run read a reply of its customer (the model reads it next)
    "unanswered",  # the customer did not reply in time: the workflow's expiry event fires
    "opening",     # the customer's opening message fired a customer event (``interpret``)
    "claim",       # a write was claimed (committed before it runs): tool, arguments' hash,
                   # state and what it is bound to; its effect row carries this event's hash
    "unavailable", # the infrastructure failed a step (a lost connection, a timeout): the
                   # step rolled back and the run is retried, or handed over after a bound
]

Verdict = Literal[
    "approved",   # a person approved the request
    "denied",     # a person denied it
    "expired",    # nobody decided before it expired
    "withdrawn",  # the run moved to another definition, which asks again (a migration)
]


#: The largest budget limit: what a 64-bit integer holds (a snapshot must read back).
MAX_LIMIT = 2**63 - 1


class Budgets(BaseModel):
    """Limits that hold across resumes. ``None`` means no limit."""

    model_config = ConfigDict(frozen=True)

    #: Policy calls.
    max_steps: int | None = Field(default=50, le=MAX_LIMIT)
    #: Model cost in micro-units of the price table's currency (1e-6 USD by default).
    max_cost_micros: int | None = Field(default=None, le=MAX_LIMIT)
    #: Input plus output tokens.
    max_tokens: int | None = Field(default=None, le=MAX_LIMIT)
    #: Seconds spent inside steps (time waiting for a person does not count).
    max_active_seconds: float | None = Field(default=None, allow_inf_nan=False)


class Used(BaseModel):
    """What the run has spent so far."""

    #: Policy calls made.
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Model cost, in micro-units of the price table's currency.
    cost_micros: int = 0
    #: Seconds spent inside steps.
    active_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def exhausted(self, b: Budgets) -> str | None:
        """The reason the budget is spent, or ``None``."""
        checks = (
            (b.max_steps, self.steps, "steps"),
            (b.max_cost_micros, self.cost_micros, "cost (micros)"),
            (b.max_tokens, self.tokens, "tokens"),
            (b.max_active_seconds, self.active_seconds, "active seconds"),
        )
        for limit, used, label in checks:
            if limit is not None and used >= limit:
                return f"{label} budget exhausted: used {used:g} of {limit:g}"
        return None


# -- what a paused run waits for ---------------------------------------------------------

def call_subject(tool: str | None, args: dict[str, Any]) -> dict[str, Any]:
    """What an approval of a call is about; its hash ties a decision to this exact call."""
    return {"kind": "call", "tool": tool, "args": args, "events": []}


class CallAwaitingApproval(BaseModel):
    """A validated write call that runs only once a person approves it."""

    kind: Literal["call"] = "call"
    #: The tool and the validated arguments the approval is bound to.
    tool: str
    args: dict[str, Any]
    #: The idempotency key the call will run under.
    key: str
    #: The step at which the pause began.
    step: int
    approval_id: str | None = None

    @property
    def events(self) -> list[str]:
        return []

    def subject(self) -> dict[str, Any]:
        """What an approval is about; its hash ties a decision to this exact request."""
        return call_subject(self.tool, self.args)


class EventAwaitingPerson(BaseModel):
    """A state only a person's event can leave."""

    kind: Literal["event"] = "event"
    #: The human events that may be fired.
    events: list[str]
    #: What the person is asked to decide on: the record of the event that entered the
    #: waiting state (empty when that event records nothing).
    args: dict[str, Any] = {}
    step: int
    approval_id: str | None = None

    @property
    def tool(self) -> None:
        return None

    def subject(self) -> dict[str, Any]:
        return {"kind": "event", "tool": None, "args": self.args, "events": self.events}


class ApprovedCall(BaseModel):
    """An approved call the engine runs next (the run is ``running``)."""

    kind: Literal["approved"] = "approved"
    tool: str
    #: Exactly the arguments approved; checked again immediately before the call runs.
    args: dict[str, Any]
    #: :func:`fingerprint` of the approved request (``CallAwaitingApproval.subject()``).
    args_hash: str
    key: str
    step: int
    approval_id: str | None = None

    @property
    def events(self) -> list[str]:
        return []

    def subject(self) -> dict[str, Any]:
        """The subject of the request that was approved (its hash is ``args_hash``)."""
        return call_subject(self.tool, self.args)


Pending = Annotated[
    CallAwaitingApproval | EventAwaitingPerson | ApprovedCall | AwaitingCustomer,
    Field(discriminator="kind")]


class Compaction(BaseModel):
    """A compaction in force: ``messages[1:upto]`` are replaced in the view by ``summary``."""

    model_config = ConfigDict(frozen=True)

    upto: int
    summary: str


class ForkOrigin(BaseModel):
    """Where a forked run came from: its parent, the step it was forked at, and the
    parent's log head there (the seq and hash of the parent's last event of that step),
    which the fork's start event records and the audit checks against the parent."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    step: int
    seq: int
    hash: str


class RunState(BaseModel):
    """The run row. Small and constant in size: the transcript lives elsewhere."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    workflow: str
    #: The hash of the workflow definition the run started under.
    definition_hash: str
    #: The person the run serves (a reviewer may not be this person).
    user: str = ""
    status: Status = "running"
    #: The workflow machine's state.
    state: str
    #: Policy calls made (the step number of the last committed step).
    step: int = 0
    used: Used = Field(default_factory=Used)
    budgets: Budgets = Field(default_factory=Budgets)
    #: What the workflow's tools and event records remembered; guards read it.
    facts: dict[str, Any] = {}
    pending: Pending | None = None
    #: Why the run stopped (budget, failure, hand-over, model unavailable).
    reason: str | None = None
    answer: str | None = None
    #: Optimistic-concurrency version; every commit adds one.
    version: int = 0
    #: Messages in the transcript so far.
    message_count: int = 0
    #: Fingerprints of the recent calls in the current state (repeat detection).
    recent_calls: list[str] = []
    #: Repeated calls refused in a row.
    repeat_refusals: int = 0
    compaction: Compaction | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    #: The customer's yes to a proposal, which one write of exactly that call may use.
    confirmation: Confirmation | None = None
    #: Tries in a row that the infrastructure failed (a lost connection, a timeout); the
    #: next step that lands sets it back to 0 (see ``fsm.runtime.retry.Retry``).
    unavailable: int = 0
    #: The run this one was forked from (``fsm fork``), else ``None``.
    forked_from: ForkOrigin | None = None

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema_version", 1) != SCHEMA_VERSION:
            return migrate(dict(data))
        return data


def _v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
    # v1 kept spend as flat fields and had no compaction.
    used = {
        "steps": d.pop("steps_used", d.get("step", 0)),
        "input_tokens": d.pop("tokens_in", 0),
        "output_tokens": d.pop("tokens_out", 0),
        "cost_micros": d.pop("cost_micros_used", 0),
        "active_seconds": d.pop("active_seconds", 0.0),
    }
    d.setdefault("used", used)
    d.setdefault("compaction", None)
    return d


def _v2_to_v3(d: dict[str, Any]) -> dict[str, Any]:
    # v2 kept one Pending model for three kinds; v3 keeps only each kind's own fields.
    p = d.get("pending")
    if isinstance(p, dict):
        keep = {"call": ("tool", "args", "key", "step", "approval_id"),
                "event": ("events", "args", "step", "approval_id"),
                "approved": ("tool", "args", "key", "step", "approval_id")}[p["kind"]]
        new = {"kind": p["kind"], **{k: p[k] for k in keep if k in p}}
        if p["kind"] == "approved":
            new["args_hash"] = fingerprint(call_subject(p.get("tool"), p.get("args", {})))
        d["pending"] = new
    return d


_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(d: dict[str, Any]) -> dict[str, Any]:
    """Bring an older run snapshot up to :data:`SCHEMA_VERSION`."""
    version = int(d.get("schema_version", 1))
    while version < SCHEMA_VERSION:
        d = _MIGRATIONS[version](d)
        version += 1
    d["schema_version"] = version
    return d


# -- the rows a step writes ----------------------------------------------------------

GENESIS = "0" * 64


class ViewRecord(BaseModel):
    """Enough to rebuild exactly what the model saw at one step, in constant space."""

    step: int
    state: str
    #: Names of the tools offered (their schemas come from the pinned definition).
    tools: list[str]
    #: Events offered through the ``advance`` tool.
    events: list[str]
    #: The view showed ``messages[:message_count]`` (after compaction, below).
    message_count: int
    compaction: Compaction | None = None


class Event(BaseModel):
    """One row of the append-only, hash-chained event log."""

    run_id: str
    #: Position in the run's log, from 0.
    seq: int = 0
    step: int
    time: float
    kind: EventKind
    state_before: str | None = None
    state_after: str | None = None
    tool: str | None = None
    event: str | None = None
    reason: str | None = None
    cost_micros: int = 0
    tokens: int = 0
    reviewer: str | None = None
    #: Kind-specific facts (arguments, keys, the decision and note, compaction sizes).
    detail: dict[str, Any] = {}
    #: The hash of the previous row (:data:`GENESIS` for the first).
    prev_hash: str = GENESIS
    #: SHA-256 over ``prev_hash`` and the canonical JSON of this row without its hash.
    hash: str = ""

    def body(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"hash"})

    def compute_hash(self) -> str:
        return link_hash(self.prev_hash, self.body())


class Effect(BaseModel):
    """The intent record and claim of one write tool call."""

    key: str
    run_id: str
    step: int
    tool: str
    args: dict[str, Any]
    #: STARTED: claimed, maybe running or crashed; DONE: the result is recorded.
    status: Literal["STARTED", "DONE"]
    result: Any = None
    #: Set when the tool raised: the ``"TypeName: message"`` the model reads.
    error: str | None = None
    started_at: float
    finished_at: float | None = None
    #: The hash of the ``claim`` event logged with this row (``None``: a row no logged
    #: claim covers, e.g. one written by an earlier fsm, or outside fsm).
    claim: str | None = None


class Approval(BaseModel):
    """A request for a person's decision, bound to one pending request and run version."""

    approval_id: str
    run_id: str
    step: int
    tool: str | None
    #: The arguments (or, for a waiting state, what is asked) the approval is bound to.
    args: dict[str, Any]
    #: :func:`fingerprint` of the pending request's subject.
    args_hash: str
    run_version: int
    requested_at: float
    expires_at: float
    decision: Verdict | None = None
    reviewer: str | None = None
    note: str | None = None
    decided_at: float | None = None
    #: The arguments approved, when the reviewer changed what was asked (a lower amount);
    #: ``None``: approved as asked.
    approved_args: dict[str, Any] | None = None

    @property
    def granted(self) -> dict[str, Any]:
        """What was approved: the amended arguments, else the arguments as asked."""
        return self.approved_args if self.approved_args is not None else self.args

    @classmethod
    def request(cls, pending: CallAwaitingApproval | EventAwaitingPerson, *, run_id: str,
                run_version: int, now: float, ttl: float) -> Approval:
        """The approval row for a new pause."""
        return cls(
            approval_id=new_id(), run_id=run_id, step=pending.step, tool=pending.tool,
            args=pending.args, args_hash=fingerprint(pending.subject()),
            run_version=run_version, requested_at=now, expires_at=now + ttl,
        )


class ApprovalDecision(BaseModel):
    """A decision to record on an approval row; refused if the row was decided before."""

    model_config = ConfigDict(frozen=True)

    approval_id: str
    decision: Verdict
    reviewer: str | None = None
    note: str | None = None
    time: float
    #: The arguments approved, when the reviewer changed what was asked.
    args: dict[str, Any] | None = None


# -- the desk: handed-over runs ------------------------------------------------------

#: Why the agent stopped and handed a run over, read from its log (see
#: :mod:`fsm.runtime.handover`), in words no workflow chose.
HandoverCause = Literal[
    "model_event",    # the model fired an event that hands the run over (e.g. cannot_verify)
    "transferred",    # the model called a tool that transfers the run to a person
    "in_doubt",       # a write may or may not have happened: its result was not recorded
    "expired",        # nobody decided a request in time, and the workflow hands it over
    "write_failed",   # a write failed, and the workflow hands the run over
    "partial_write",  # a write failed after another write of the run succeeded
    "person",         # a person's decision led to the hand-over state
    "changed",        # what a person approved changed before it ran
    "other",          # another reason (the run's own reason says which)
    "unwitnessed",    # a claimed write the log does not witness, or the tables no longer
                      # allow, was refused: nothing ran
    "unavailable",    # the infrastructure failed the run's steps too many tries in a row
]
#: How a person at the desk ends a handover.
Outcome = Literal[
    "resolved",  # resolved outside fsm (the customer was helped another way)
    "resumed",   # the run continues: the workflow lets a person fire an event out of the
                 # hand-over state it stopped in
    "closed",    # closed without more being done
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


class Handover(BaseModel):
    """A run handed over to a person, as the desk's queue shows it. The log is the
    record (the ``stop``, ``take`` and ``close`` events); this row is what the queue
    reads, and the audit compares the two."""

    handover_id: str
    run_id: str
    workflow: str
    #: The customer the run serves, and what they asked (the first message, cut short).
    user: str = ""
    request: str = ""
    #: The run's state when it was handed over.
    state: str
    handed_at: float
    cause: HandoverCause
    #: The reason in plain words ("cannot verify", "in doubt after a write: ...").
    reason: str
    taken_by: str | None = None
    taken_at: float | None = None
    outcome: Outcome | None = None
    note: str | None = None
    closed_by: str | None = None
    closed_at: float | None = None


def snapshot_json(run: RunState) -> str:
    """A run row's snapshot as stored: the run's JSON (pydantic's, in field order)
    without the version, which is the store's. (Stores before this one wrote canonical
    JSON; the audit hashes the stored text, so either form verifies.)"""
    # A run that is no fork stores no ``forked_from``: its snapshot reads as before forks.
    return run.model_dump_json(exclude={"version"} if run.forked_from is not None
                               else {"version", "forked_from"})


@dataclass
class StepCommit:
    """Everything one step writes, applied in one transaction."""

    run: RunState
    expected_version: int
    #: The step's new messages, typed (:mod:`fsm.records.transcript`); stored as their
    #: :meth:`body`.
    messages: list[Message] = field(default_factory=list)
    view: ViewRecord | None = None
    events: list[Event] = field(default_factory=list)
    #: Effects to mark DONE: key → (result, error).
    effects_done: dict[str, tuple[Any, str | None]] = field(default_factory=dict)
    new_approval: Approval | None = None
    decision: ApprovalDecision | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    #: The lease owner writing the step: the store refuses the commit (``LeaseLost``)
    #: unless this owner still holds the run's lease. ``None``: no check.
    owner: str | None = None
    #: The desk's row of a handover this commit opens, takes or closes (written whole).
    handover: Handover | None = None
    #: What the run's request is about (``Presentation.subject``), kept in the store's
    #: index of subjects so that requests about the same thing are shown together.
    subject: str | None = None
    #: The step moves the run to another definition (a migration): the store also writes
    #: the run row's definition column, which the queue reads.
    moves_definition: bool = False
    #: The ``seq`` of each customer reply this step gave to the run (marked read).
    replies_read: list[int] = field(default_factory=list)
    #: The hash of the run's reply token, kept when the run is created.
    token_hash: str | None = None

    # The text of each row, encoded on first use and then kept: the log's row hashes and
    # the store both use it. (Not functools.cached_property: on Python 3.11 it takes one
    # lock for all instances, and a worker's threads commit at once.)
    _texts: dict[str, Any] = field(default_factory=dict, init=False, repr=False,
                                   compare=False)

    @property
    def snapshot(self) -> str:
        """The run row's snapshot (:func:`snapshot_json`)."""
        text = self._texts.get("snapshot")
        if text is None:
            text = self._texts["snapshot"] = snapshot_json(self.run)
        return text  # type: ignore[no-any-return]

    @property
    def message_bodies(self) -> list[str]:
        """The canonical JSON of each new message."""
        bodies = self._texts.get("messages")
        if bodies is None:
            bodies = self._texts["messages"] = [canonical(m) for m in self.message_dicts]
        return bodies  # type: ignore[no-any-return]

    @property
    def message_dicts(self) -> list[dict[str, Any]]:
        """Each new message's JSON object, as stored (:meth:`body`, made once)."""
        dicts = self._texts.get("message_dicts")
        if dicts is None:
            dicts = self._texts["message_dicts"] = [m.body() for m in self.messages]
        return dicts  # type: ignore[no-any-return]

    @property
    def view_body(self) -> str | None:
        """The canonical JSON of the view record."""
        if "view" not in self._texts:
            self._texts["view"] = (None if self.view is None
                                   else canonical(self.view.model_dump(mode="json")))
        body: str | None = self._texts["view"]
        return body


# -- definitions ------------------------------------------------------------------------

class DefinitionRecord(BaseModel):
    """A workflow definition as a store keeps it, recorded the first time the store sees
    it: what the hash covers, the states, the tools' schemas and the invariants, as JSON.
    Runs name it by ``definition_hash``; audits and listings read it without the code."""

    model_config = ConfigDict(frozen=True)

    definition_hash: str
    workflow: str
    #: The version label the definition carried when first recorded (may be empty).
    version: str = ""
    #: The definition as JSON (``fsm.definition.versions.definition_body``).
    body: dict[str, Any] = {}
    recorded_at: float = 0.0

    @property
    def label(self) -> str:
        """The version label, else the hash."""
        return self.version or self.definition_hash


class DefinitionCount(NamedTuple):
    """How many runs of a definition are in one status."""

    workflow: str
    definition_hash: str
    status: str
    runs: int
    #: One of those runs (the smallest id): where a worker reads how it was started.
    sample: str
