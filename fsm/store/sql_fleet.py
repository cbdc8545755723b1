"""The leases, the queue, people and the outbox of both SQL stores, written once.

The statements are spelled with the store's dialect (``MARK``, ``DIALECT``); each write
is one short transaction of the store's own (``_tx``), and a lease change locks the run
row first, as every writer of a run does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from fsm.errors import RowDamaged, RunLocked, RunNotFound, StoreError
from fsm.store.columns import (
    ACCOUNT_COLUMNS,
    NOTIFICATION_COLUMNS,
    REFUSAL_COLUMNS,
    SQLReads,
    refusal_insert,
)
from fsm.store.dialect import Database
from fsm.store.lease import Claimed, Lease, expiry, lease_held, this_host_prefix
from fsm.store.page import Page, read_rows
from fsm.store.people import Account, Notification, Refusal, account_not_saved

_ACCOUNTS = ", ".join(ACCOUNT_COLUMNS)
_REFUSALS = ", ".join(REFUSAL_COLUMNS)
_NOTIFICATIONS = ", ".join(NOTIFICATION_COLUMNS)


class SQLFleet(Database):
    """Leases and the queue of runnable runs."""

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        m = self.MARK
        with self._tx() as db:
            row = db.execute(f"SELECT lease_owner, lease_until FROM runs WHERE run_id = {m}"
                             f"{self.DIALECT.lock}", (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(run_id)
            held, until = row
            if held and held != owner and not force and lease_held(held, until, now):
                raise RunLocked(run_id, held)
            db.execute(f"UPDATE runs SET lease_owner = {m}, lease_at = {m}, lease_until = {m} "
                       f"WHERE run_id = {m}", (owner, now, expiry(now, ttl), run_id))
            return str(held) if held and held != owner else None

    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        m = self.MARK
        with self._tx() as db:
            return bool(db.execute(f"UPDATE runs SET lease_until = {m} WHERE run_id = {m} "
                                   f"AND lease_owner = {m}", (now + ttl, run_id, owner)
                                   ).rowcount == 1)

    def release(self, run_id: str, owner: str) -> None:
        m = self.MARK
        with self._tx() as db:
            db.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL "
                       f"WHERE run_id = {m} AND lease_owner = {m}", (run_id, owner))

    def lease(self, run_id: str) -> Lease | None:
        rows = self._read(f"SELECT lease_owner, lease_until FROM runs WHERE run_id = {self.MARK}",
                          (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        owner, until = rows[0]
        return Lease(owner, until) if owner else None

    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1,
                       definitions: list[str] | None = None,
                       exclude: Collection[str] = ()) -> list[Claimed]:
        out: list[Claimed] = []
        if definitions is not None and not definitions:
            return out
        d = self.DIALECT
        m = d.mark
        only = f" AND workflow IN ({d.marks(len(workflows))})" if workflows else ""
        if definitions is not None:
            only += f" AND definition_hash IN ({d.marks(len(definitions))})"
        with self._tx() as db:
            rows = db.execute(
                "SELECT run_id, workflow, lease_owner, lease_until FROM runs "
                f"WHERE status = 'running' AND (lease_owner IS NULL OR lease_until <= {m} "
                f"OR lease_owner LIKE {m}){only} "
                f"ORDER BY {d.unleased_first}, updated_at LIMIT {m}{d.skip_locked}",
                (now, this_host_prefix() + "%", *(workflows or ()), *(definitions or ()),
                 limit * 2 + 16 + len(exclude)),
            ).fetchall()
            for run_id, workflow, held, until in rows:
                if len(out) >= limit:
                    break
                if run_id in exclude or lease_held(held, until, now):
                    continue
                db.execute(f"UPDATE runs SET lease_owner = {m}, lease_at = {m}, "
                           f"lease_until = {m} WHERE run_id = {m}",
                           (owner, now, now + ttl, run_id))
                out.append(Claimed(run_id, workflow, held))
        return out


class SQLPeople(SQLReads):
    """Accounts, refused attempts and the notification outbox."""

    def _account_row(self, a: Account) -> tuple[Any, ...]:
        return (a.name, a.role, a.password_hash, a.limit, self.DIALECT.boolean(a.disabled),
                a.created_at, a.updated_at)

    def add_account(self, account: Account) -> None:
        with self._tx() as db:
            if db.execute(f"INSERT INTO accounts ({_ACCOUNTS}) VALUES "
                          f"({self.DIALECT.marks(len(ACCOUNT_COLUMNS))}) ON CONFLICT DO NOTHING",
                          self._account_row(account)).rowcount != 1:
                raise StoreError(f"account {account.name!r} already exists")

    def save_account(self, account: Account, *, was: float | None = None) -> None:
        m = self.MARK
        with self._tx() as db:
            saved = db.execute(
                f"UPDATE accounts SET role = {m}, password_hash = {m}, release_limit = {m}, "
                f"disabled = {m}, updated_at = {m} WHERE name = {m}"
                + ("" if was is None else f" AND updated_at = {m}"),
                (account.role, account.password_hash, account.limit,
                 self.DIALECT.boolean(account.disabled), account.updated_at, account.name,
                 *(() if was is None else (was,))),
            ).rowcount == 1
        if not saved:
            raise account_not_saved(account.name, self._has_account(account.name))

    def account(self, name: str) -> Account | None:
        rows = self._read(f"SELECT {_ACCOUNTS} FROM accounts WHERE name = {self.MARK}", (name,))
        return _account(rows[0]) if rows else None

    def accounts(self) -> list[Account]:
        return [_account(r) for r in self._read(f"SELECT {_ACCOUNTS} FROM accounts "
                                                "ORDER BY name")]

    def add_refusal(self, refusal: Refusal) -> None:
        with self._tx() as db:
            head = db.execute(f"SELECT refusal_count, refusal_head FROM runs WHERE run_id = "
                              f"{self.MARK}{self.DIALECT.lock}", (refusal.run_id,)).fetchone()
            sql, args, update = refusal_insert(refusal, head, self.MARK)
            db.execute(sql, args)
            if update is not None:
                db.execute(*update)

    def refusals(self, run_id: str) -> list[Refusal]:
        rows = self._read(f"SELECT {_REFUSALS} FROM web_refusals WHERE run_id = {self.MARK} "
                          "ORDER BY refusal_id", (run_id,))
        return [self._row(Refusal, "web_refusals", dict(zip(REFUSAL_COLUMNS, r, strict=True)))
                for r in rows]

    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        if approval_ids is not None:
            if not approval_ids:
                return []
            rows = self._read(f"SELECT {_NOTIFICATIONS} FROM notifications WHERE approval_id "
                              f"IN ({self.DIALECT.marks(len(approval_ids))}) "
                              "ORDER BY created_at, key", tuple(approval_ids))
        else:
            rows = self._read(f"SELECT {_NOTIFICATIONS} FROM notifications WHERE run_id = "
                              f"{self.MARK} ORDER BY created_at, key", (run_id,))
        return [self._notification(r) for r in rows]

    def due_notifications(self, now: float, limit: int = 20, *, skip_damaged: bool = False,
                          damaged: list[RowDamaged] | None = None) -> Page[Notification]:
        m = self.MARK
        rows = self._read(f"SELECT {_NOTIFICATIONS} FROM notifications WHERE status = "
                          f"'pending' AND next_attempt_at <= {m} ORDER BY next_attempt_at, key "
                          f"LIMIT {m}", (now, int(limit)))
        return read_rows(rows, self._notification, skip_damaged=skip_damaged, damaged=damaged,
                         what="due_notifications")

    def _notification(self, row: Sequence[Any]) -> Notification:
        values = dict(zip(NOTIFICATION_COLUMNS, row, strict=True))
        return self._row(Notification, "notifications", values,  # type: ignore[no-any-return]
                         key=values["key"])

    def save_notification(self, note: Notification) -> None:
        m = self.MARK
        with self._tx() as db:
            db.execute(f"UPDATE notifications SET status = {m}, attempts = {m}, "
                       f"next_attempt_at = {m}, last_error = {m}, delivered_at = {m} "
                       f"WHERE key = {m}", (note.status, note.attempts, note.next_attempt_at,
                                            note.last_error, note.delivered_at, note.key))


def _account(row: Sequence[Any]) -> Account:
    name, role, password_hash, limit, disabled, created, updated = tuple(row)
    return Account(name=name, role=role, password_hash=password_hash, limit=limit,
                   disabled=bool(disabled), created_at=created, updated_at=updated)
