"""The engine's side of a conversation: starting one, taking replies, reading them, and
letting a wait that nobody answers expire.

A reply is kept the moment it arrives (:meth:`Conversations.accept_reply`), whatever the
run is doing: in the middle of a step, crashed, or waiting for it. The run reads its
replies in the order they were kept, in its own commits: at once when it waits for its
customer and nobody else holds it (:meth:`Conversations.deliver`), else before its next
step, whoever drives it then. A process that lets go of a run waiting for its customer
looks once more for a reply that arrived while it held the run, so none is left unread.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fsm.errors import (
    ConcurrentUpdate,
    DefinitionChanged,
    FSMError,
    InvalidRunState,
    ReplyRefused,
    RowDamaged,
    RunLocked,
    RunNotFound,
)
from fsm.records import FINAL_STATUSES, RunState
from fsm.records.conversation import Reply, new_token, reply_problem, token_hash, token_matches
from fsm.runtime.conversation import writes as conversation_writes
from fsm.runtime.conversation.judging import asked_hash, waiting_request
from fsm.runtime.driving import Driving, finished
from fsm.runtime.step import Step
from fsm.runtime.swept import Swept

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.records import Budgets
    from fsm.runtime.context import Clock
    from fsm.store.base import Store

#: How often a reply is tried again when the run moved on while it was being kept.
_KEEP_ATTEMPTS = 100
#: How often a process that lets go of a waiting run looks again for a reply.
_SETTLE_ROUNDS = 20


@dataclass(frozen=True)
class Conversation:
    """A run that talks with its customer, and the customer's reply token.

    The token is shown once: only its hash is kept. Give it to the customer's chat front
    end, which sends it with each reply (``Authorization: Bearer TOKEN``).
    """

    run: RunState
    token: str


class Conversations(ABC):
    """Conversation methods of :class:`~fsm.runtime.engine.Engine`, over what the engine
    gives (its abstract methods below)."""

    spec: WorkflowSpec
    store: Store
    clock: Clock
    policy: Any

    # -- given by the engine --------------------------------------------------------------

    @abstractmethod
    def _begin(self, goal: str, *, user: str, run_id: str | None, budgets: Budgets | None,
               drive: bool, meta: dict[str, Any] | None,
               token_hash: str | None = None) -> RunState:
        """Start a run (see :meth:`~fsm.runtime.engine.Engine.start`)."""

    @abstractmethod
    def _load(self, run_id: str) -> tuple[RunState, Any]:
        """The run and the definition it lives on."""

    @abstractmethod
    def _lease(self, run_id: str, *, force: bool = False, kind: str = "resume") -> Any:
        """Hold the run for a step (a context manager)."""

    @abstractmethod
    def _driving(self, run: RunState, b: Any) -> Driving[RunState]:
        """Drive the run until it stops or waits (the generator's value: the run)."""

    @abstractmethod
    def definition_of(self, run: RunState) -> WorkflowSpec:
        """The kept version ``run`` lives on."""

    # -- public API -------------------------------------------------------------------

    def start_conversation(self, goal: str, *, user: str = "", run_id: str | None = None,
                           budgets: Budgets | None = None, drive: bool = True,
                           meta: dict[str, Any] | None = None) -> Conversation:
        """Start a run as :meth:`~fsm.runtime.engine.Engine.start` does, and give out its
        reply token (only the token's hash is kept, in the run's start commit)."""
        token = new_token()
        digest = token_hash(token)
        run = self._begin(goal, user=user, run_id=run_id, budgets=budgets, drive=drive,
                          meta={**(meta or {}), "reply_token_sha256": digest},
                          token_hash=digest)
        return Conversation(run=run, token=token)

    def reply(self, run_id: str, text: str, *, token: str | None = None,
              asked: str | None = None, drive: bool = True) -> RunState:
        """Give the customer's reply to a run: keep it, then let the run read it and go on.

        The reply is kept first (:meth:`accept_reply`, which refuses a bad reply with
        :class:`~fsm.errors.ReplyRefused` and keeps nothing). A run that waits for its
        customer reads it at once and, with ``drive`` and a policy, continues until it
        stops; a run in the middle of a step (or crashed) reads it before its next step.
        """
        self.accept_reply(run_id, text, token=token, asked=asked)
        return self.deliver(run_id, drive=drive)

    def accept_reply(self, run_id: str, text: str, *, token: str | None = None,
                     asked: str | None = None) -> Reply:
        """Keep the customer's reply as the run's next one, and return it as kept.

        ``token``, when given, must be the run's reply token (a chat front end's reply);
        ``asked``, when given, the fingerprint of the request the customer was shown: a
        reply to a request the run no longer waits on is refused as stale. Refused with
        :class:`~fsm.errors.ReplyRefused` (nothing kept): empty or blank text, more than
        ``fsm.records.conversation.REPLY_MAX`` characters, a NUL, text that is not Unicode, an
        unknown run, a wrong token, a finished run, a run that is not talking with its
        customer.
        """
        problem = reply_problem(text)
        if problem is not None:
            raise ReplyRefused(problem[0], f"run {run_id!r}: {problem[1]}; nothing was kept",
                               run_id=run_id)
        for _ in range(_KEEP_ATTEMPTS):
            run = self._open_to_replies(run_id, token)
            pending = waiting_request(run)
            shown = asked_hash(pending) if pending is not None else None
            if asked is not None and asked != shown:
                raise ReplyRefused(
                    "stale", f"run {run_id!r} no longer waits on request {asked[:12]}"
                    + (f"; it now asks {shown[:12]}" if shown else "")
                    + ": read what the run asks now and reply again; nothing was kept",
                    run_id=run_id, state=run.state)
            reply = Reply(run_id=run_id, text=text, received_at=self.clock(),
                          asked_hash=shown, run_version=run.version)
            try:
                return self.store.add_reply(reply, version=run.version)
            except ConcurrentUpdate:
                continue  # the run committed a step meanwhile: look at it again
        raise ReplyRefused("busy", f"run {run_id!r} changed {_KEEP_ATTEMPTS} times while the "
                           "reply was being kept; send it again; nothing was kept",
                           run_id=run_id)

    def deliver(self, run_id: str, *, drive: bool = True) -> RunState:
        """Let a run that waits for its customer read the replies kept for it, then (with
        ``drive`` and a policy) drive it until it stops. A run another process holds is
        left alone: that process reads them."""
        return finished(self._delivering(run_id, drive=drive), self.policy)

    def _delivering(self, run_id: str, *, drive: bool) -> Driving[RunState]:
        run = self.store.load_run(run_id)
        for _ in range(_SETTLE_ROUNDS):
            try:
                with self._lease(run_id):
                    run, b = self._load(run_id)
                    if drive and self.policy is not None:
                        run = yield from self._driving(run, b)
                    elif run.status == "awaiting_customer":
                        run = self.read_replies(run, b)
            except RunLocked:
                return self.store.load_run(run_id)
            if not self._unread_while_waiting(run):
                return run
        return run

    # -- inside a lease -----------------------------------------------------------------

    def read_replies(self, run: RunState, b: Any) -> RunState:
        """Read the run's unread replies, in order, in one commit (the run holds its
        lease; ``b`` is what the engine drives it with); those that arrive after it stops
        are left unread."""
        unread = self.store.replies(run.run_id, unread_only=True)
        if not unread:
            return run
        with Step(b.ctx, run, step=run.step) as s:
            for reply in unread:
                if s.run.status not in ("running", "awaiting_customer"):
                    break
                conversation_writes.read_reply(s, reply)
        return s.landed

    def unanswered_if_due(self, run: RunState, b: Any) -> RunState:
        """Let a wait for the customer that has passed its time expire (a reply kept in
        time is read instead)."""
        pending = waiting_request(run)
        if pending is None or pending.expires_at is None or pending.expires_at > self.clock():
            return run
        if self.store.replies(run.run_id, unread_only=True):
            return self.read_replies(run, b)
        with Step(b.ctx, run, step=run.step) as s:
            conversation_writes.unanswered(s)
        return s.landed

    def settled(self, run: RunState) -> RunState:
        """After letting go of ``run``: if it waits for its customer and a reply arrived
        while it was held, read it now (and drive on, with a policy)."""
        return finished(self._settling(run), self.policy)

    def _settling(self, run: RunState) -> Driving[RunState]:
        if self._unread_while_waiting(run):
            return (yield from self._delivering(run.run_id, drive=self.policy is not None))
        return run

    def sweep_conversations(self, skipped: list[tuple[str, str]] | None = None, *,
                            failed: list[tuple[str, str]] | None = None,
                            problems: list[FSMError] | None = None,
                            damaged: list[RowDamaged] | None = None) -> list[str]:
        """Deprecated: :meth:`Engine.sweep` sweeps the conversations too, and gives a
        ``Swept``. The runs whose wait it expired or whose unread replies it read; what
        stopped the others goes to the lists given, else the first problem is raised."""
        warnings.warn("Engine.sweep_conversations is deprecated; Engine.sweep() sweeps the "
                      "conversations too and returns a Swept", DeprecationWarning,
                      stacklevel=2)
        swept = Swept()
        self._sweep_conversations(swept)
        swept.fill(skipped, failed, damaged)
        if failed is None and problems is not None:
            problems += swept.errors
        first = swept.first_problem(damaged=damaged is None,
                                    failed=failed is None and problems is None)
        if first is not None:
            raise first
        return list(swept)

    def _sweep_conversations(self, swept: Swept) -> None:
        """Expire the waits for customers of this workflow that passed their time, and
        read replies left unread by a process that died; the runs touched, and what
        stopped the others, go to ``swept`` (as :meth:`Engine.sweep` keeps them)."""
        if not any(v.converses for v in self.spec.versions):
            return
        now = self.clock()
        waiting = self.store.list_runs("awaiting_customer", workflow=self.spec.name,
                                       skip_damaged=True)
        swept.damaged += waiting.damaged
        for run in waiting:
            try:
                if self._sweep_conversation(run, now):
                    swept.append(run.run_id)
            except (RunLocked, DefinitionChanged) as exc:
                swept.skipped.append((run.run_id, str(exc)))
            except RowDamaged as exc:
                swept.damaged.append(exc)  # named with the other damaged rows
            except FSMError as exc:
                swept.fail(run.run_id, exc)

    def _sweep_conversation(self, run: RunState, now: float) -> bool:
        """Expire ``run``'s wait if it is due, or read the replies it left unread; whether
        the run moved."""
        pending = waiting_request(run)
        due = pending is not None and pending.expires_at is not None \
            and pending.expires_at <= now
        if not due and not self.store.replies(run.run_id, unread_only=True):
            return False
        with self._lease(run.run_id):
            loaded, b = self._load(run.run_id)
            after = self.unanswered_if_due(loaded, b)
            if after is loaded and loaded.status == "awaiting_customer":
                after = self.read_replies(loaded, b)
        return after is not loaded

    # -- checks -------------------------------------------------------------------------

    def _unread_while_waiting(self, run: RunState) -> bool:
        return (run.status == "awaiting_customer"
                and bool(self.store.replies(run.run_id, unread_only=True)))

    def _open_to_replies(self, run_id: str, token: str | None) -> RunState:
        """The run, if it takes a reply now (with this token, when one is given)."""
        try:
            run = self.store.load_run(run_id)
        except RunNotFound:
            raise ReplyRefused("unknown_run", f"run {run_id!r} not found; nothing was kept",
                               run_id=run_id) from None
        if token is not None and not token_matches(token, self.store.reply_token(run_id)):
            raise ReplyRefused("token", f"run {run_id!r}: the reply token is wrong (or the "
                               "run was given none); nothing was kept", run_id=run_id)
        if run.workflow != self.spec.name:
            raise InvalidRunState(
                f"run {run_id!r} belongs to workflow {run.workflow!r}, not {self.spec.name!r}",
                run_id=run_id, state=run.state)
        why = _closed(self.definition_of(run), run)
        if why is not None:
            code, text = why
            raise ReplyRefused(code, f"run {run_id!r} {text}; nothing was kept",
                               run_id=run_id, state=run.state)
        return run


def _closed(spec: WorkflowSpec, run: RunState) -> tuple[str, str] | None:
    """Why ``run`` takes no reply now, or ``None`` when it does."""
    if not spec.converses:
        return "not_waiting", (f"is not waiting for its customer: workflow {spec.name!r} does "
                               "not talk with its customer")
    if run.status in FINAL_STATUSES:
        more = (" (raise its budget to continue it)" if run.status == "budget_exhausted"
                else "")
        return "finished", f"has finished ({run.status}){more}: it takes no more replies"
    if run.status == "awaiting_approval":
        return "not_waiting", (f"is not waiting for its customer: it waits for a person's "
                               f"decision in state {run.state!r}")
    return None
