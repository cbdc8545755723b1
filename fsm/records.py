"""The persisted shape of a run: a small snapshot, never the transcript."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Bump when :class:`RunState` changes shape; add a step to ``_MIGRATIONS``.
SCHEMA_VERSION = 2

Status = Literal[
    "running", "awaiting_approval", "done", "failed", "budget_exhausted", "handed_over",
    "model_unavailable",
]
#: Statuses a run never leaves.
FINAL_STATUSES = frozenset({"done", "failed", "budget_exhausted", "handed_over"})


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def fingerprint(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


class Budgets(BaseModel):
    """Limits that hold across resumes. ``None`` means no limit."""

    model_config = ConfigDict(frozen=True)

    #: Policy calls.
    max_steps: int | None = 50
    #: Model cost in micro-units of the price table's currency (1e-6 USD by default).
    max_cost_micros: int | None = None
    #: Input plus output tokens.
    max_tokens: int | None = None
    #: Seconds spent inside steps (time waiting for a person does not count).
    max_active_seconds: float | None = None


class Used(BaseModel):
    """What the run has spent so far."""

    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
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


class Pending(BaseModel):
    """What a paused run waits for."""

    #: ``call``: a tool call needing approval; ``event``: a state only a person can leave;
    #: ``approved``: an approved call the engine runs next (the run is ``running``).
    kind: Literal["call", "event", "approved"]
    tool: str | None = None
    args: dict[str, Any] = {}
    key: str | None = None
    #: The human events that may be fired (``kind == "event"``).
    events: list[str] = []
    #: The step at which the pause began.
    step: int = 0
    approval_id: str | None = None

    def subject(self) -> dict[str, Any]:
        """What an approval is about; its hash ties a decision to this exact request."""
        return {"kind": self.kind, "tool": self.tool, "args": self.args, "events": self.events}


class RunState(BaseModel):
    """The run row. Small and constant in size: the transcript lives elsewhere."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    workflow: str
    definition_hash: str
    user: str = ""
    status: Status = "running"
    #: The workflow machine's state.
    state: str
    #: Policy calls made (the step number of the last committed step).
    step: int = 0
    used: Used = Field(default_factory=Used)
    budgets: Budgets = Field(default_factory=Budgets)
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
    #: Compaction in force: ``{"upto": n, "summary": text}`` replaces messages[1:n].
    compaction: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        if isinstance(data, dict):
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


_MIGRATIONS = {1: _v1_to_v2}


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
    #: Compaction in force: messages[1:upto] were replaced by ``summary``.
    compaction: dict[str, Any] | None = None


class Event(BaseModel):
    """One row of the append-only, hash-chained event log."""

    run_id: str
    seq: int = 0
    step: int
    time: float
    #: policy, tool, refusal, transition, pause, decision, compaction, stop, start, resume
    kind: str
    state_before: str | None = None
    state_after: str | None = None
    tool: str | None = None
    event: str | None = None
    reason: str | None = None
    cost_micros: int = 0
    tokens: int = 0
    reviewer: str | None = None
    detail: dict[str, Any] = {}
    prev_hash: str = GENESIS
    hash: str = ""

    def body(self) -> dict[str, Any]:
        return self.model_dump(exclude={"hash"})

    def compute_hash(self) -> str:
        return hashlib.sha256((self.prev_hash + canonical(self.body())).encode()).hexdigest()


class Effect(BaseModel):
    """The intent record and claim of one write tool call."""

    key: str
    run_id: str
    step: int
    tool: str
    args: dict[str, Any]
    status: Literal["STARTED", "DONE"]
    result: Any = None
    #: Set when the tool raised: the ``"TypeName: message"`` the model reads.
    error: str | None = None
    started_at: float
    finished_at: float | None = None


class Approval(BaseModel):
    approval_id: str
    run_id: str
    step: int
    tool: str | None
    args: dict[str, Any]
    args_hash: str
    run_version: int
    requested_at: float
    expires_at: float
    decision: Literal["approved", "denied", "expired"] | None = None
    reviewer: str | None = None
    note: str | None = None
    decided_at: float | None = None


@dataclass
class StepCommit:
    """Everything one step writes, applied in one transaction."""

    run: RunState
    expected_version: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    view: ViewRecord | None = None
    events: list[Event] = field(default_factory=list)
    #: Effects to mark DONE: key → (result, error).
    effects_done: dict[str, tuple[Any, str | None]] = field(default_factory=dict)
    new_approval: Approval | None = None
    #: (approval_id, decision, reviewer, note, time) — refused if already decided.
    decision: tuple[str, str, str | None, str | None, float] | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    #: The lease owner writing the step: the store refuses the commit (``LeaseLost``)
    #: unless this owner still holds the run's lease. ``None``: no check.
    owner: str | None = None


def chain(events: list[Event], prev_hash: str, next_seq: int) -> list[Event]:
    """Give events their sequence numbers and hashes, continuing a run's chain."""
    out = []
    for i, ev in enumerate(events):
        ev = ev.model_copy(update={"seq": next_seq + i, "prev_hash": prev_hash})
        ev = ev.model_copy(update={"hash": ev.compute_hash()})
        prev_hash = ev.hash
        out.append(ev)
    return out


def verify_chain(events: list[Event]) -> str | None:
    """The first problem in a run's hash chain, or ``None`` when it is intact."""
    prev = GENESIS
    for i, ev in enumerate(events):
        if ev.seq != i:
            return f"event seq {i} is missing (found seq {ev.seq}: rows deleted or reordered)"
        if ev.prev_hash != prev:
            return f"event seq {ev.seq}: prev_hash does not match the previous row"
        if ev.compute_hash() != ev.hash:
            return f"event seq {ev.seq}: hash does not match its contents (row altered)"
        prev = ev.hash
    return None
