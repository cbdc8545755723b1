"""What the approval inbox keeps beside the runs: accounts, refused attempts, notifications.

These rows live in the same database as the runs, so a pause and its notification
commit together (a transactional outbox) and an auditor reads refusals next to the log.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from fsm.errors import StoreError
from fsm.records import ApprovalDecision, StepCommit, canonical, text_hash

Role = Literal["approver", "auditor"]
#: ``pending``: not delivered yet (retried with backoff); ``delivered``: every webhook
#: answered 2xx; ``failed``: gave up after the last attempt; ``unsent``: no webhook was
#: configured when it was due.
DeliveryStatus = Literal["pending", "delivered", "failed", "unsent"]
#: ``waiting``: a run started to wait for a person; ``expired``: its approval expired.
NotificationKind = Literal["waiting", "expired"]


class Account(BaseModel):
    """A person who signs in to the inbox."""

    name: str
    role: Role
    #: argon2 hash of the password (never the password).
    password_hash: str
    #: Release limit in the workflow's minor units; ``None``: no limit (approvers only).
    limit: int | None = None
    disabled: bool = False
    created_at: float = 0.0
    #: When the row last changed; signing out of the inbox moves it too, which ends every
    #: session of the account.
    updated_at: float = 0.0


def account_not_saved(name: str, exists: bool) -> StoreError:
    """Why an account's row was not saved: it does not exist, or it changed since read."""
    if not exists:
        return StoreError(f"no account {name!r}")
    return StoreError(f"account {name!r} changed while this change was being made; nothing "
                      "was changed: make the change again")


class Refusal(BaseModel):
    """A decision attempt the inbox refused: who, what, why, when, from where."""

    refusal_id: int = 0
    run_id: str
    approval_id: str | None = None
    #: The signed-in account, or what the request claimed when nobody was signed in.
    account: str | None = None
    #: What was attempted: ``approve`` or ``deny``.
    action: str
    #: A short code (``csrf``, ``stale``, ``mismatch``, ``decided``, ``busy``, ``expired``,
    #: ``self``, ``limit``, ``amount``, ``role``, ``session``, ``note``) and the message the
    #: person was shown.
    code: str
    reason: str
    at: float
    #: The client address the request came from.
    remote: str = ""
    #: :func:`refusal_link` of the run's previous refused attempt's hash and this one:
    #: the run's refused attempts form a chain whose length and head the run row keeps.
    #: ``None``: recorded before refused attempts were chained.
    hash: str | None = None


def refusal_link(prev_hash: str, refusal: Refusal) -> str:
    """The hash of ``refusal`` chained after ``prev_hash`` (over everything it records but
    its id, which the database gives, and its own hash)."""
    return text_hash(prev_hash + canonical(refusal.model_dump(
        mode="json", exclude={"refusal_id", "hash"})))


class Notification(BaseModel):
    """An outbox row: someone must be told that a run waits (or stopped waiting)."""

    #: The dedupe key, also sent to receivers: ``{approval_id}:{kind}``.
    key: str
    run_id: str
    approval_id: str
    kind: NotificationKind
    created_at: float
    status: DeliveryStatus = "pending"
    attempts: int = 0
    next_attempt_at: float = 0.0
    last_error: str | None = None
    delivered_at: float | None = None


def notification_key(approval_id: str, kind: str) -> str:
    return f"{approval_id}:{kind}"


def outbox_keys(commit: StepCommit) -> list[str]:
    """The keys of the notifications a store writes with ``commit`` (its outbox): its last
    event records them, so that the audit finds a removed one."""
    new = commit.new_approval.approval_id if commit.new_approval is not None else None
    return [notification_key(aid, kind) for aid, kind in outbox_rows(new, commit.decision)]


def outbox_rows(new_approval_id: str | None,
                decision: ApprovalDecision | None) -> list[tuple[str, NotificationKind]]:
    """(approval id, kind) of the notifications a commit must write with it."""
    rows: list[tuple[str, NotificationKind]] = []
    if new_approval_id is not None:
        rows.append((new_approval_id, "waiting"))
    if decision is not None and decision.decision == "expired":
        rows.append((decision.approval_id, "expired"))
    return rows
