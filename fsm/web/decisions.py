"""Deciding from the inbox: the account's rights, then the same ``Engine.decide`` as the CLI.

The web adds only what a signed-in person brings: the reviewer is the account, an
auditor never decides, an approver's release limit, and that the page the person
saw is still the request (its args hash and run version). Everything else — decided
once, bound to the request, refused when expired or stale, nobody approves their own
run — is :meth:`fsm.runtime.engine.Engine.decide`, exactly as ``fsm approve`` runs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fsm.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalRefused,
    ApprovalStale,
    ConcurrentUpdate,
    DefinitionChanged,
    FSMError,
    InboxRefused,
    NothingPending,
    RunLocked,
)
from fsm.presentation import PLAIN
from fsm.records import (
    Approval,
    RunState,
    start_detail,
    started_as,
)
from fsm.records import utc as iso
from fsm.registry import load_workflow
from fsm.runtime.compaction import Compactor
from fsm.runtime.engine import Engine
from fsm.runtime.review import row_problem, waiting_on
from fsm.spec import WorkflowSpec
from fsm.store.base import Store
from fsm.store.people import Account
from fsm.web.forms import clip

# -- the workflow of a run, and what its pause asks ---------------------------------------

def workflow_ref(store: Store, run: RunState) -> str:
    """How the run's workflow was named when it started (as ``fsm run`` records it)."""
    return started_as(store.events(run.run_id), run.workflow)


class Workflows:
    """Workflow specs by name, loaded once (the first run of a workflow says how)."""

    def __init__(self) -> None:
        self._specs: dict[str, WorkflowSpec | None] = {}
        self._lock = threading.Lock()

    def spec(self, store: Store, run: RunState) -> WorkflowSpec | None:
        with self._lock:
            if run.workflow not in self._specs:
                try:
                    self._specs[run.workflow] = load_workflow(workflow_ref(store, run))
                except FSMError:
                    self._specs[run.workflow] = None
            return self._specs[run.workflow]


@dataclass(frozen=True)
class Ask:
    """What a pause asks a person, in the workflow's words."""

    summary: str
    #: The amount the workflow says the request releases (minor units), if any.
    amount: int | None
    amount_text: str


def money(spec: WorkflowSpec | None, amount: int | None) -> str:
    if amount is None:
        return ""
    shown = spec.presentation if spec is not None else PLAIN
    return str(shown.money(amount))


def describe(spec: WorkflowSpec | None, run: RunState, approval: Approval) -> Ask:
    """What the pause asks, through the workflow's :class:`~fsm.presentation.Presentation`."""
    shown = spec.presentation if spec is not None else PLAIN
    summary = shown.describe(approval.tool, approval.args, run.facts,
                             run.pending.events if run.pending else ())
    amount = shown.amount_of(approval.tool, approval.args)
    return Ask(summary=summary, amount=amount, amount_text=money(spec, amount))


# -- deciding -------------------------------------------------------------------------------

_ERRORS: list[tuple[type[Exception], str, int]] = [
    (ApprovalRefused, "self", 403),
    (ApprovalExpired, "expired", 409),
    (ApprovalStale, "stale", 409),
    (ApprovalAlreadyDecided, "decided", 409),
    (NothingPending, "decided", 409),
    (ConcurrentUpdate, "stale", 409),
    (DefinitionChanged, "definition", 409),
]


def _check_page(approval: Approval, run: RunState, seen_hash: str, seen_version: str) -> None:
    """The person saw this exact request, and it is still the one waiting."""
    if approval.decision is not None:
        raise InboxRefused("decided", f"this request was already {approval.decision}"
                      + (f" by {approval.reviewer}" if approval.reviewer else "")
                      + f" at {iso(approval.decided_at)}; nothing was changed")
    if seen_hash != approval.args_hash or seen_version != str(approval.run_version):
        raise InboxRefused("stale", "the page you decided on does not show this request's "
                      "arguments and version; reload it and read the request again")
    pending = waiting_on(run, approval)
    if pending is None or run.version != approval.run_version:
        raise InboxRefused("stale", f"the run moved on since this page was loaded (it is at "
                      f"version {run.version}, status {run.status}); nothing was decided")
    problem = row_problem(approval, pending)
    if problem is not None:
        raise InboxRefused("mismatch", problem)


def decide(store: Store, workflows: Workflows, account: Account, approval_id: str,
           action: str, note: str, seen_hash: str, seen_version: str, *,
           clock: Callable[[], float],
           amount: str = "") -> RunState:
    """Check the account's rights on this request, then ``Engine.decide`` it."""
    if account.role != "approver":
        raise InboxRefused("role", f"{account.name} is an {account.role}: auditors read, they "
                      "do not decide", 403)
    if action not in ("approve", "deny"):
        raise InboxRefused("action", f"unknown action {clip(repr(action))} (allowed: approve, "
                           "deny)", 400)
    if not note.strip():
        raise InboxRefused("note", "a decision needs a note saying why", 400)
    approval = store.approval(approval_id)
    if approval is None:
        raise InboxRefused("missing", f"no approval {clip(repr(approval_id))}", 404)
    run = store.load_run(approval.run_id)
    _check_page(approval, run, seen_hash, seen_version)
    spec = workflows.spec(store, run)
    if spec is None:
        raise InboxRefused("definition", f"workflow {run.workflow!r} cannot be loaded here")
    ask = describe(spec, run, approval)
    amend = _lowered(spec, approval, ask, action, amount)
    if amend is not None:
        ask = replace(ask, amount=next(iter(amend.values())))
        ask = replace(ask, amount_text=money(spec, ask.amount))
    if (action == "approve" and account.limit is not None and ask.amount is not None
            and ask.amount > account.limit):
        raise InboxRefused("limit", f"{ask.amount_text} is above your release limit of "
                      f"{money(spec, account.limit)}; ask an approver with a higher limit",
                      403)
    from fsm.adapters.recorded import recorded_policy  # imports the model adapter

    events = store.events(run.run_id)
    policy = recorded_policy(started_as(events, run.workflow), spec, start_detail(events))
    engine = Engine(spec, store, policy, clock=clock, compactor=Compactor())
    try:
        return engine.decide(run.run_id, action == "approve", account.name, note.strip(),
                             amend=amend)
    except RunLocked:
        raise InboxRefused("busy", "another decision of this run is being recorded right "
                           "now; nothing was decided by you; reload the page") from None
    except tuple(e for e, _, _ in _ERRORS) as exc:
        code, status = next((c, s) for e, c, s in _ERRORS if isinstance(exc, e))
        raise InboxRefused(code, str(exc), status) from None


def _lowered(spec: WorkflowSpec, approval: Approval, ask: Ask, action: str,
             amount: str) -> dict[str, Any] | None:
    """The change a reviewer asked for in the form's amount field, or ``None``: a whole
    number from 1 to the amount asked (checked before any release limit)."""
    if not amount.strip():
        return None
    field_name = spec.presentation.amount_field
    if spec.amend is None or field_name is None:
        raise InboxRefused("amount", "this workflow lets no reviewer change the amount", 400)
    if action != "approve":
        raise InboxRefused("amount", "only an approval can change the amount; deny without "
                           "one", 400)
    text = amount.strip()
    asked = approval.args.get(field_name)
    if not isinstance(asked, int) or isinstance(asked, bool):
        raise InboxRefused("amount", "this request has no amount to lower; approve or deny "
                           "it as it is", 400)
    allowed = (f"a whole number of minor units from 1 to {asked} (the amount asked, "
               f"{ask.amount_text or money(spec, asked)})")
    if not (text.isascii() and text.isdigit()) or len(text) > 30:
        raise InboxRefused("amount", f"the amount must be {allowed}, not {clip(repr(text))}; "
                           "nothing was decided", 400)
    value = int(text)
    if not 1 <= value <= asked:
        raise InboxRefused("amount", f"the amount may only be lowered: {allowed}, not "
                           f"{value}; nothing was decided", 400)
    return {field_name: value}
