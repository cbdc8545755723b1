"""Accounts of the inbox: argon2 password hashes, kept in the run database."""

from __future__ import annotations

import re
import time
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from fsm.errors import AccountError, StoreError
from fsm.store.people import Account, Role
from fsm.store.roles import People

_HASHER = PasswordHasher()
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
#: Shortest password accepted.
MIN_PASSWORD = 8
ROLES: tuple[Role, ...] = ("approver", "auditor")




def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise AccountError(f"the password must have at least {MIN_PASSWORD} characters")
    return _HASHER.hash(password)


def check_password(account: Account, password: str) -> bool:
    try:
        return _HASHER.verify(account.password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


#: Verified against when the name is unknown, so a wrong name costs as long as a wrong
#: password and the timing does not tell which names exist.
_DUMMY = _HASHER.hash("not a password of anyone")


def authenticate(store: People, name: str, password: str) -> Account | None:
    """The enabled account with this name and password, else ``None``."""
    account = store.account(name)
    if account is None:
        try:
            _HASHER.verify(_DUMMY, password)
        except VerificationError:
            pass
        return None
    if not check_password(account, password) or account.disabled:
        return None
    return account


def add_account(store: People, name: str, role: str, password: str,
                limit: int | None = None) -> Account:
    if not _NAME.match(name):
        raise AccountError(f"account name {name!r} is not allowed (letters, digits and . _ @ -, "
                           "starting with a letter or digit, at most 64)")
    if role not in ROLES:
        raise AccountError(f"unknown role {role!r} (allowed: {', '.join(ROLES)})")
    if limit is not None and role != "approver":
        raise AccountError("--limit is a release limit: only approvers have one")
    if limit is not None and limit < 0:
        raise AccountError(f"--limit must be a non-negative amount in minor units, not {limit}")
    now = time.time()
    account = Account(name=name, role=role,  # type: ignore[arg-type]
                      password_hash=hash_password(password), limit=limit,
                      created_at=now, updated_at=now)
    store.add_account(account)
    return account


def _existing(store: People, name: str) -> Account:
    account = store.account(name)
    if account is None:
        raise AccountError(f"no account {name!r}; create it with fsm users add")
    return account


def _changed(store: People, name: str, **changes: Any) -> Account:
    """Save ``changes`` to the account, unless its row changed since it was read (then
    nothing is changed, and the error says so). A new ``updated_at`` ends its sessions."""
    was = _existing(store, name)
    account = was.model_copy(update={**changes,
                                     "updated_at": max(time.time(), was.updated_at + 1e-3)})
    try:
        store.save_account(account, was=was.updated_at)
    except StoreError as exc:
        raise AccountError(str(exc)) from None
    return account


def set_password(store: People, name: str, password: str) -> Account:
    return _changed(store, name, password_hash=hash_password(password))


def sign_out(store: People, name: str) -> None:
    """End every session of the account: they carry a stamp of the account row, which
    this changes (its ``updated_at``). A change made at the same moment ends them too."""
    try:
        _changed(store, name)
    except AccountError:
        pass  # gone, or changed meanwhile: either way no session of it is valid now


def set_limit(store: People, name: str, limit: int | None) -> Account:
    """Set an approver's release limit (minor units; ``None``: no limit)."""
    account = _existing(store, name)
    if account.role != "approver":
        raise AccountError(f"{name} is an {account.role}: only approvers have a release limit")
    if limit is not None and limit < 0:
        raise AccountError(f"a release limit is not negative, not {limit}")
    return _changed(store, name, limit=limit)


def set_disabled(store: People, name: str, disabled: bool = True) -> Account:
    return _changed(store, name, disabled=disabled)
