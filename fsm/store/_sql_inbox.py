"""The inbox's rows in both SQL stores, written once: accounts, refused attempts and the
notification outbox, and the pages of the approval inbox and the runs list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fsm.errors import RowDamaged, StoreError
from fsm.records import Approval, RunState
from fsm.store._columns import (
    ACCOUNT_COLUMNS,
    APPROVAL_COLUMNS,
    NOTIFICATION_COLUMNS,
    REFUSAL_COLUMNS,
    refusal_insert,
    runs_where,
    waiting_query,
)
from fsm.store.database import Database, Role
from fsm.store.page import Page, read_rows
from fsm.store.people import Account, Notification, Refusal, account_not_saved
from fsm.store.roles import RunReads

__all__ = ["SQLInbox"]

_ACCOUNTS = ", ".join(ACCOUNT_COLUMNS)
_REFUSALS = ", ".join(REFUSAL_COLUMNS)
_NOTIFICATIONS = ", ".join(NOTIFICATION_COLUMNS)


class SQLInbox(Role):
    """The inbox: accounts, refused attempts, the notification outbox (a commit that
    requests or decides an approval writes its notification row in the same transaction),
    and its pages, answered by the database (paged, counted, indexed)."""

    def __init__(self, db: Database, runs: RunReads) -> None:
        super().__init__(db)
        self.runs = runs

    def _account_row(self, a: Account) -> tuple[Any, ...]:
        return (a.name, a.role, a.password_hash, a.limit, self.dialect.boolean(a.disabled),
                a.created_at, a.updated_at)

    def add_account(self, account: Account) -> None:
        with self.db.tx() as db:
            if db.execute(f"INSERT INTO accounts ({_ACCOUNTS}) VALUES "
                          f"({self.dialect.marks(len(ACCOUNT_COLUMNS))}) ON CONFLICT DO NOTHING",
                          self._account_row(account)).rowcount != 1:
                raise StoreError(f"account {account.name!r} already exists")

    def save_account(self, account: Account, *, was: float | None = None) -> None:
        m = self.mark
        with self.db.tx() as db:
            saved = db.execute(
                f"UPDATE accounts SET role = {m}, password_hash = {m}, release_limit = {m}, "
                f"disabled = {m}, updated_at = {m} WHERE name = {m}"
                + ("" if was is None else f" AND updated_at = {m}"),
                (account.role, account.password_hash, account.limit,
                 self.dialect.boolean(account.disabled), account.updated_at, account.name,
                 *(() if was is None else (was,))),
            ).rowcount == 1
        if not saved:
            raise account_not_saved(account.name, self._has_account(account.name))

    def account(self, name: str) -> Account | None:
        rows = self._read(f"SELECT {_ACCOUNTS} FROM accounts WHERE name = {self.mark}", (name,))
        return _account(rows[0]) if rows else None

    def accounts(self) -> list[Account]:
        return [_account(r) for r in self._read(f"SELECT {_ACCOUNTS} FROM accounts "
                                                "ORDER BY name")]

    def add_refusal(self, refusal: Refusal) -> None:
        with self.db.tx() as db:
            head = db.execute(f"SELECT refusal_count, refusal_head FROM runs WHERE run_id = "
                              f"{self.mark}{self.dialect.lock}", (refusal.run_id,)).fetchone()
            sql, args, update = refusal_insert(refusal, head, self.mark)
            db.execute(sql, args)
            if update is not None:
                db.execute(*update)

    def refusals(self, run_id: str) -> list[Refusal]:
        rows = self._read(f"SELECT {_REFUSALS} FROM web_refusals WHERE run_id = {self.mark} "
                          "ORDER BY refusal_id", (run_id,))
        return [self._row(Refusal, "web_refusals", dict(zip(REFUSAL_COLUMNS, r, strict=True)))
                for r in rows]

    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        if approval_ids is not None:
            if not approval_ids:
                return []
            rows = self._read(f"SELECT {_NOTIFICATIONS} FROM notifications WHERE approval_id "
                              f"IN ({self.dialect.marks(len(approval_ids))}) "
                              "ORDER BY created_at, key", tuple(approval_ids))
        else:
            rows = self._read(f"SELECT {_NOTIFICATIONS} FROM notifications WHERE run_id = "
                              f"{self.mark} ORDER BY created_at, key", (run_id,))
        return [self._notification(r) for r in rows]

    def due_notifications(self, now: float, limit: int = 20, *, skip_damaged: bool = False,
                          damaged: list[RowDamaged] | None = None) -> Page[Notification]:
        m = self.mark
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
        m = self.mark
        with self.db.tx() as db:
            db.execute(f"UPDATE notifications SET status = {m}, attempts = {m}, "
                       f"next_attempt_at = {m}, last_error = {m}, delivered_at = {m} "
                       f"WHERE key = {m}", (note.status, note.attempts, note.next_attempt_at,
                                            note.last_error, note.delivered_at, note.key))

    def _has_account(self, name: str) -> bool:
        return bool(self._read(f"SELECT 1 FROM accounts WHERE name = {self.mark}", (name,)))

    def refusal_head(self, run_id: str) -> tuple[int, str] | None:
        row = self._run_row("refusal_count, refusal_head", run_id)
        return int(row[0]), str(row[1])

    def count_waiting(self, workflow: str | None = None) -> int:
        sql, args = waiting_query(workflow, self.mark, count=True)
        return int(self._read(sql, tuple(args))[0][0])

    def count_runs(self, status: str | None = None, workflow: str | None = None) -> int:
        where, args = runs_where(status, workflow, self.mark)
        return int(self._read(f"SELECT COUNT(*) FROM runs{where}", tuple(args))[0][0])

    def workflow_names(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT workflow FROM runs ORDER BY workflow")]

    def waiting(self, workflow: str | None = None, *, limit: int = 50, offset: int = 0,
                skip_damaged: bool = False, damaged: list[RowDamaged] | None = None
                ) -> Page[tuple[Approval, RunState]]:
        sql, args = waiting_query(workflow, self.mark)
        n = len(APPROVAL_COLUMNS)

        def parse(row: Sequence[Any]) -> tuple[Approval, RunState]:
            values = dict(zip(APPROVAL_COLUMNS, tuple(row)[:n], strict=True))
            return self._approval(values), self._run((row[n], row[n + 1]), values["run_id"])

        return read_rows(self._read(sql, (*args, int(limit), int(offset))), parse,
                         skip_damaged=skip_damaged, damaged=damaged, what="waiting")

    def runs_page(self, status: str | None = None, workflow: str | None = None, *,
                  limit: int = 50, offset: int = 0) -> list[RunState]:
        return self.runs.list_runs(status, workflow=workflow, limit=limit, offset=offset,
                                   newest_first=True)


def _account(row: Sequence[Any]) -> Account:
    name, role, password_hash, limit, disabled, created, updated = tuple(row)
    return Account(name=name, role=role, password_hash=password_hash, limit=limit,
                   disabled=bool(disabled), created_at=created, updated_at=updated)
