"""Deciding from the inbox: the account's rights, then the same ``Engine.decide`` as the CLI.

The web adds only what a signed-in person brings: the reviewer is the account, an
auditor never decides, an approver's release limit, and that the page the person
saw is still the request (its args hash and run version). Everything else — decided
once, bound to the request, refused when expired or stale, nobody approves their own
run — is :meth:`fsm.runtime.engine.Engine.decide`, exactly as ``fsm approve`` runs it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from fsm._names import is_blank
from fsm.definition.presentation import PLAIN
from fsm.definition.registry import load_workflow
from fsm.definition.spec import WorkflowSpec
from fsm.errors import (
    AmountError,
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
from fsm.observability.hooks import Hooks, in_scope
from fsm.records import (
    Approval,
    RunState,
    canonical,
    policy_record,
    started_as,
)
from fsm.records import utc as iso
from fsm.runtime.compaction import Compactor
from fsm.runtime.engine import Engine
from fsm.runtime.review import row_problem, waiting_on
from fsm.settings import Settings
from fsm.store.base import Store
from fsm.store.people import Account
from fsm.store.roles import Requests, RunReads
from fsm.web.forms import clip

log = logging.getLogger("fsm.web")


# -- the workflow of a run, and what its pause asks ---------------------------------------

def workflow_ref(store: RunReads, run: RunState) -> str:
    """How the run's workflow was named when it started (as ``fsm run`` records it)."""
    return started_as(store.events(run.run_id), run.workflow)


class Workflows:
    """Workflow specs by name, loaded once (the first run of a workflow says how), and
    whether the policy each run recorded can be built here.

    A workflow this server cannot load is logged once, with the reason, on the ``fsm.web``
    logger; :meth:`problem` gives the reason to the pages."""

    def __init__(self, settings: Settings | None = None,
                 hooks: Iterable[Hooks] | None = None) -> None:
        #: What builds a model's policy here (its key, prices, tool choice).
        self.settings = settings
        #: The hooks of every engine the pages make (default: those in scope where this
        #: is made, see :func:`fsm.observability.hooks.scope`), whatever thread serves the request.
        self.hooks = tuple(in_scope() if hooks is None else hooks)
        self._specs: dict[str, WorkflowSpec | None] = {}
        self._spec_problems: dict[str, str] = {}
        #: (workflow reference, the run's policy record) → why it cannot be built
        #: (``None``: it can).
        self._policy_problems: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def spec(self, store: RunReads, run: RunState) -> WorkflowSpec | None:
        with self._lock:
            if run.workflow not in self._specs:
                ref = workflow_ref(store, run)
                try:
                    self._specs[run.workflow] = load_workflow(ref)
                except Exception as exc:  # noqa: BLE001 - the workflow's own code failed
                    self._specs[run.workflow] = None
                    self._spec_problems[run.workflow] = _one_line(exc)
                    log.warning("workflow %s (run %s started it as %s) cannot be loaded by "
                                "this server: %s", run.workflow, run.run_id, ref,
                                _one_line(exc))
            return self._specs[run.workflow]

    def unloadable(self, run: RunState) -> str:
        """That ``run``'s workflow cannot be loaded by this server, and why (once
        :meth:`spec` gave ``None`` for it)."""
        why = self._spec_problems.get(run.workflow, "it cannot be loaded")
        return f"workflow {run.workflow!r} cannot be loaded by this server ({why})"

    def problem(self, store: RunReads, run: RunState) -> str | None:
        """Why a decision on ``run`` cannot be carried out by this server (its workflow, or
        the policy it recorded, cannot be loaded here), or ``None``."""
        spec = self.spec(store, run)
        if spec is None:
            return f"{self.unloadable(run)}, so it cannot carry out a decision on this run"
        events = store.events(run.run_id)
        record = policy_record(events)
        key = canonical([started_as(events, run.workflow), record.get("policy"),
                         record.get("base_url"), record.get("timeout"),
                         record.get("settings")])
        with self._lock:
            if key not in self._policy_problems:
                self._policy_problems[key] = self._policy_problem(spec, events, run)
            unbuilt = self._policy_problems[key]
        if unbuilt is None:
            return None
        return (f"this server cannot build the policy run {run.run_id!r} recorded ({unbuilt}), "
                "which drives the run on after a decision: decide it where the policy can be "
                "imported (fsm approve / fsm deny), or fix the server's Python path and "
                "restart it")


    def policy(self, spec: WorkflowSpec, run: RunState, events: list[Any]) -> Any:
        """The policy ``run`` recorded, built here to drive it on."""
        from fsm.adapters.recorded import recorded_policy  # imports the model adapter

        return recorded_policy(started_as(events, run.workflow), spec, policy_record(events),
                               events=events, config=self.settings)

    def _policy_problem(self, spec: WorkflowSpec, events: list[Any],
                        run: RunState) -> str | None:
        try:
            self.policy(spec, run, events)
        except Exception as exc:  # noqa: BLE001 - user code: any failure is the reason
            return _one_line(exc)
        return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if isinstance(exc, FSMError) else f"{type(exc).__name__}: {text}"


def own_version(spec: WorkflowSpec, run: RunState) -> WorkflowSpec:
    """The version of ``spec`` the run lives on, when the code keeps it; else ``spec``."""
    return spec.version_for(run.definition_hash) or spec


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
    return shown.show_money(amount)


def describe(spec: WorkflowSpec | None, run: RunState, approval: Approval) -> Ask:
    """What the pause asks, through the workflow's
    :class:`~fsm.definition.presentation.Presentation`."""
    shown = spec.presentation if spec is not None else PLAIN
    summary = shown.describe(approval.tool, approval.args, run.facts,
                             run.pending.events if run.pending else ())
    amount = shown.amount_of(approval.tool, approval.args)
    return Ask(summary=summary, amount=amount, amount_text=money(spec, amount))


def beyond_limit(spec: WorkflowSpec | None, ask: Ask, limit: int | None) -> str | None:
    """Why an approver with release limit ``limit`` may not approve ``ask``, or ``None``.

    A limit fails closed: a request whose amount the workflow does not give (its
    presentation reads none, or reads none from these arguments) is beyond every limit,
    since nothing says it is within one. Only an approver without a limit may approve it."""
    if limit is None:
        return None
    if ask.amount is None:
        return (f"this request shows no amount that your release limit of "
                f"{money(spec, limit)} could be compared with")
    if ask.amount > limit:
        return f"{ask.amount_text} is above your release limit of {money(spec, limit)}"
    return None


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


def _may_decide(account: Account, action: str, note: str) -> None:
    if account.role != "approver":
        raise InboxRefused("role", f"{account.name} is an {account.role}: auditors read, they "
                      "do not decide", 403)
    if action not in ("approve", "deny"):
        raise InboxRefused("action", f"unknown action {clip(repr(action))} (allowed: approve, "
                           "deny)", 400)
    if is_blank(note):
        raise InboxRefused("note", "a decision needs a note saying why (spaces and invisible "
                           "characters alone are no note)", 400)


def decide(store: Store, workflows: Workflows, account: Account, approval_id: str,
           action: str, note: str, seen_hash: str, seen_version: str, *,
           clock: Callable[[], float],
           amount: str = "") -> RunState:
    """Check the account's rights on this request, then ``Engine.decide`` it."""
    _may_decide(account, action, note)
    approval = store.approval(approval_id)
    if approval is None:
        raise InboxRefused("missing", f"no approval {clip(repr(approval_id))}", 404)
    run = store.load_run(approval.run_id)
    _check_page(approval, run, seen_hash, seen_version)
    family = workflows.spec(store, run)
    problem = workflows.problem(store, run)
    if family is None or problem is not None:
        raise InboxRefused("unloadable", f"{problem or 'the workflow cannot be loaded here'}; "
                           "nothing was decided", 409)
    spec = own_version(family, run)  # what a reviewer may change is the run's version's
    ask = describe(spec, run, approval)
    amend = _lowered(spec, approval, ask, action, amount)
    if amend is not None:
        ask = replace(ask, amount=next(iter(amend.values())))
        ask = replace(ask, amount_text=money(spec, ask.amount))
    beyond = beyond_limit(spec, ask, account.limit) if action == "approve" else None
    if beyond is not None:
        who = "without a release limit" if ask.amount is None else "with a higher limit"
        raise InboxRefused("limit", f"{beyond}; ask an approver {who}", 403)
    policy = workflows.policy(spec, run, store.events(run.run_id))
    engine = Engine(family, store, policy, clock=clock, compactor=Compactor(),
                    hooks=workflows.hooks)
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
    """The change a reviewer asked for in the form's amount field, or ``None``: one amount
    in the workflow's currency, typed in major units (``"1,200"`` is ₹1,200), above zero
    and at most the amount asked (checked before any release limit)."""
    if not amount.strip():
        return None
    field_name = spec.presentation.amount_field
    if spec.amend is None or field_name is None:
        raise InboxRefused("amount", "this workflow lets no reviewer change the amount", 400)
    if action != "approve":
        raise InboxRefused("amount", "only an approval can change the amount; deny without "
                           "one", 400)
    asked = approval.args.get(field_name)
    if not isinstance(asked, int) or isinstance(asked, bool):
        raise InboxRefused("amount", "this request has no amount to lower; approve or deny "
                           "it as it is", 400)
    shown = spec.presentation
    try:
        value = shown.parse_money(amount, "the form field 'amount'")
    except AmountError as exc:
        raise InboxRefused("amount", f"{exc}; nothing was decided", 400) from None
    if not 1 <= value <= asked:
        raise InboxRefused("amount", f"the form field 'amount' may only lower the amount: "
                           f"above {shown.show_money(0)} and at most {money(spec, asked)} (the "
                           f"amount asked), not {money(spec, value)}; nothing was decided", 400)
    return {field_name: value}


@dataclass(frozen=True)
class Understood:
    """A lower amount as the inbox read it, shown to the reviewer before it is recorded."""

    #: What the reviewer typed.
    typed: str
    #: The amount in minor units, and as people read it.
    minor: int
    text: str
    #: The amount asked, as people read it.
    asked_text: str
    #: The name of the minor unit (``paise``).
    unit: str


def understood(store: Requests, workflows: Workflows, account: Account, approval_id: str,
               amount: str, note: str) -> Understood | None:
    """The lower amount a reviewer typed, as it would be approved (checked as a decision
    checks it), or ``None`` when none was typed; nothing is decided."""
    if not amount.strip():
        return None
    _may_decide(account, "approve", note)
    approval = store.approval(approval_id)
    if approval is None:
        raise InboxRefused("missing", f"no approval {clip(repr(approval_id))}", 404)
    run = store.load_run(approval.run_id)
    spec = workflows.spec(store, run)
    if spec is None:
        raise InboxRefused("definition", f"workflow {run.workflow!r} cannot be loaded here")
    ask = describe(spec, run, approval)
    change = _lowered(spec, approval, ask, "approve", amount)
    assert change is not None
    value = next(iter(change.values()))
    if account.limit is not None and value > account.limit:
        raise InboxRefused("limit", f"{money(spec, value)} is above your release limit of "
                           f"{money(spec, account.limit)}; nothing was decided", 403)
    return Understood(typed=amount.strip(), minor=value, text=money(spec, value),
                      asked_text=ask.amount_text, unit=spec.presentation.unit.minor)
