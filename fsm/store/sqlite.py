"""The SQLite store: one file, WAL, ``BEGIN IMMEDIATE``, one transaction per step.

Tables: ``runs`` (a small snapshot per run, with its version and lease), ``messages``
(the transcript, one row per message), ``views`` (what the model saw, per step),
``events`` (the hash-chained log), ``effects`` (write intents and results),
``approvals`` and ``artifacts``. Nothing grows with the length of a run except by
appending its own rows.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import urllib.parse
from types import TracebackType
from typing import Any

from fsm.errors import (
    RunError,
    RunLocked,
    RunNotFound,
    StoreError,
)
from fsm.records import (
    Approval,
    ApprovalDecision,
    Effect,
    Event,
    RunState,
    StepCommit,
    ViewRecord,
    canonical,
    chained,
)
from fsm.store.base import Claimed, Lease, Store
from fsm.store.columns import (
    ACCOUNT_COLUMNS,
    APPROVAL_COLUMNS,
    EVENT_COLUMNS,
    SQLReads,
    approval_from,
    decided_before,
    decision_update,
    outbox_insert,
    run_from,
    runs_where,
    waiting_query,
)
from fsm.store.lease import check_fence, expiry, lease_held, this_host_prefix
from fsm.store.people import Account, Notification, Refusal, account_not_saved
from fsm.store.schema import MIGRATIONS

_EVENT_COLS = EVENT_COLUMNS
_APPROVAL_COLS = APPROVAL_COLUMNS


_INSERT_EVENT = (f"INSERT INTO events ({', '.join(_EVENT_COLS)}) "
                 f"VALUES ({', '.join('?' * len(_EVENT_COLS))})")



#: Log heads a store keeps (see ``SQLiteStore._apply``); past this many, it starts over.
_HEADS_KEPT = 4096


def _update_run(status: bool, owner: bool) -> str:
    return ("UPDATE runs SET " + ("status = ?, " if status else "")
            + "version = ?, snapshot = ?, updated_at = ?, log_count = ?, log_head = ? "
            "WHERE run_id = ? AND version = ?" + (" AND lease_owner = ?" if owner else ""))


#: The UPDATE of a run's row by (status changed, lease checked). A status written again
#: unchanged still rewrites each of the four indexes that hold it, which costs a step
#: more than the rest of the row; so an unchanged status is left as it is.
_UPDATE_RUN = {(status, owner): _update_run(status, owner)
               for status in (True, False) for owner in (True, False)}


class SQLiteStore(SQLReads, Store):
    """A durable store in one SQLite file.

    ``readonly`` opens an existing fsm database and changes nothing in it. ``adopt=False``
    refuses a file that already holds other tables but no fsm schema, before anything in
    it changes (the command line opens files so); a file with another program's schema
    version is always refused.
    """

    MARK = "?"

    def __init__(self, path: str, *, synchronous: str = "FULL",
                 busy_timeout_ms: int = 10_000, readonly: bool = False,
                 adopt: bool = True) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = path
        self.location = path
        self.readonly = readonly
        self._lock = threading.RLock()
        #: run_id → (version, log count, log head, status) after this store's last commit
        #: of it.
        self._heads: dict[str, tuple[int, int, str, str]] = {}
        if readonly:
            self._db = _open_readonly(path, busy_timeout_ms)
            return
        try:
            self._db = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {path!r}: {exc}") from None
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Before anything changes the file: another program's database is left as it is.
            _refuse_foreign(self._db, path, adopt)
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._migrate()
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreError(f"cannot open database {path!r}: {_what(exc, path)}") from None
        except UnicodeDecodeError as exc:
            self._db.close()
            raise StoreError(f"cannot open database {path!r}: {_garbled(exc)}") from None
        except BaseException:
            self._db.close()
            raise

    # -- plumbing -------------------------------------------------------------------

    def _tx(self) -> _Transaction:
        """``with self._tx() as db``: one ``BEGIN IMMEDIATE`` … ``COMMIT`` under the
        store's lock; any failure rolls back, and SQLite's errors become ``StoreError``."""
        return _Transaction(self)

    def _rollback(self) -> None:
        """Roll back what is still open: SQLite itself ends a transaction a full disk or
        an I/O error broke, and a second ROLLBACK would fail."""
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                cur = self._db.execute(sql, args)
                cur.row_factory = sqlite3.Row  # type: ignore[assignment]
                return cur.fetchall()
            except sqlite3.Error as exc:
                if str(exc).startswith(_NOT_UTF8):
                    raise self._not_utf8(sql, str(exc)) from None
                raise StoreError(f"database {self.path!r}: {_what(exc)}") from None
            except UnicodeDecodeError as exc:
                raise StoreError(f"database {self.path!r}: {_garbled(exc)}") from None
            except OverflowError:
                raise StoreError(f"database {self.path!r}: a number in the query is too large "
                                 f"(at most {2**63 - 1})") from None

    def _damaged(self, table: str, run_id: str | None, exc: Exception) -> StoreError:
        whose = f"run {run_id!r}" if run_id is not None else "a run"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return StoreError(
            f"database {self.path!r}: a row of {whose} in table {table!r} is damaged and "
            f"cannot be read ({type(exc).__name__}: {first}); restore the database from a "
            "backup, or inspect it with fsm audit"
        )

    def _not_utf8(self, sql: str, message: str) -> StoreError:
        """A text value that is not UTF-8 (a damaged file): which table, column and runs,
        without the value itself (it may be long, and it is not text)."""
        table = re.search(r"\bFROM\s+(\w+)", sql)
        column = re.match(re.escape(_NOT_UTF8) + r" column '(\w+)'", message)
        if table is None or column is None:
            return StoreError(f"database {self.path!r}: a text value is not valid UTF-8 (the "
                              "file is damaged); restore the database from a backup")
        runs = self._not_utf8_runs(table.group(1), column.group(1))
        whose = f"run {runs[0]!r}" if len(runs) == 1 else \
            f"runs {', '.join(map(repr, runs[:5]))}" + (" …" if len(runs) > 5 else "") \
            if runs else "a run"
        return StoreError(
            f"database {self.path!r}: a row of {whose} in table {table.group(1)!r} is damaged "
            f"and cannot be read (its {column.group(1)!r} is not valid UTF-8 text); restore "
            "the database from a backup, or inspect it with fsm audit")

    def _not_utf8_runs(self, table: str, column: str) -> list[str]:
        try:
            rows = self._db.execute(
                f"SELECT CAST(run_id AS BLOB), CAST({column} AS BLOB) FROM {table}").fetchall()
        except sqlite3.Error:
            return []
        bad = []
        for run_id, value in rows:
            try:
                if value is not None:
                    value.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(run_id.decode("utf-8", "replace"))
        return sorted(set(bad))

    def _migrate(self) -> None:
        current = self._db.execute("PRAGMA user_version").fetchone()[0]
        if current > len(MIGRATIONS):
            raise StoreError(
                f"database {self.path!r} has schema version {current}, newer than this fsm "
                f"understands ({len(MIGRATIONS)}); upgrade fsm to open it"
            )
        for version, script in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            with self._tx() as db:
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {version}")

    @property
    def schema_version(self) -> int:
        return int(self._read("PRAGMA user_version")[0][0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- runs -----------------------------------------------------------------------

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        commit = commit or StepCommit(run=run, expected_version=0)
        with self._lock:  # as in commit()
            try:
                with self._tx() as db:
                    try:
                        db.execute(
                            "INSERT INTO runs (run_id, workflow, status, version, snapshot, "
                            "created_at, updated_at) VALUES (?, ?, ?, 0, '{}', ?, ?)",
                            (run.run_id, run.workflow, run.status, run.created_at,
                             run.updated_at),
                        )
                    except sqlite3.IntegrityError:
                        raise RunError(f"run {run.run_id!r} already exists",
                                       run_id=run.run_id) from None
                    return self._apply(db, commit, fence=False)
            except BaseException:
                self._heads.pop(run.run_id, None)
                raise

    def load_run(self, run_id: str) -> RunState:
        rows = self._read("SELECT snapshot, version FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        return self._run(rows[0], run_id)

    def _run(self, row: sqlite3.Row | dict[str, Any], run_id: str | None) -> RunState:
        try:
            return run_from(row["snapshot"], row["version"])
        except (ValueError, TypeError) as exc:  # JSONDecodeError and ValidationError too
            raise self._damaged("runs", run_id, exc) from None

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0,
                  newest_first: bool = False) -> list[RunState]:
        where, args = runs_where(status, workflow, "?")
        sql = "SELECT run_id, snapshot, version FROM runs" + where
        order = "DESC" if newest_first else "ASC"
        sql += f" ORDER BY created_at {order}, run_id {order} LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        return [self._run(row, row["run_id"]) for row in self._read(sql, tuple(args))]

    def commit(self, commit: StepCommit) -> RunState:
        # Under the lock until what the store knows of the run is right again: a failed
        # commit forgets its head before another thread can commit from it.
        with self._lock:
            try:
                with self._tx() as db:
                    return self._apply(db, commit)
            except BaseException:
                self._heads.pop(commit.run.run_id, None)
                raise

    def _apply(self, db: sqlite3.Connection, c: StepCommit, *, fence: bool = True) -> RunState:
        run_id = c.run.run_id
        owner = c.owner if fence else None
        # The run's log head as this store's last commit of it left it, while the run is
        # still at that version (every write of the run row adds one): the commit then
        # needs no read first, and the UPDATE's own condition is the check.
        known = self._heads.get(run_id)
        if known is None or known[0] != c.expected_version:
            row = db.execute("SELECT version, log_count, log_head, lease_owner, status "
                             "FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            check_fence(run_id, row and (row[0], row[3]), owner=owner,
                        version=c.expected_version)
            known = (row[0], row[1], row[2], row[4])
        version = c.expected_version + 1
        new = c.run.model_copy(update={"version": version})
        # The log continues from the head kept in the run row, not from the last row
        # found: a deleted tail then stays a gap the audit reports.
        events = chained(c.events, known[2], known[1])
        count, head = known[1] + len(events), events[-1].hash if events else known[2]
        status_changed = new.status != known[3]
        cur = db.execute(
            _UPDATE_RUN[status_changed, owner is not None],
            (*((new.status,) if status_changed else ()), version, c.snapshot, new.updated_at,
             count, head, run_id, c.expected_version, *(() if owner is None else (owner,))),
        )
        if cur.rowcount != 1:
            self._fence(db, run_id, owner, c.expected_version)
            raise StoreError(f"database {self.path!r}: the row of run {run_id!r} changed "
                             "during its commit")
        if events:
            db.executemany(_INSERT_EVENT, [e.row(_EVENT_COLS) for e in events])
        if len(self._heads) >= _HEADS_KEPT:
            self._heads.clear()
        self._heads[run_id] = (version, count, head, new.status)
        if c.messages:
            base = new.message_count - len(c.messages)
            db.executemany(
                "INSERT INTO messages (run_id, idx, body) VALUES (?, ?, ?)",
                [(run_id, base + i, body) for i, body in enumerate(c.message_bodies)],
            )
        if c.view is not None:
            db.execute("INSERT OR REPLACE INTO views (run_id, step, body) VALUES (?, ?, ?)",
                       (run_id, c.view.step, c.view_body))
        for key, (result, error) in c.effects_done.items():
            db.execute(
                "UPDATE effects SET status = 'DONE', result = ?, error = ?, finished_at = ? "
                "WHERE key = ?", (canonical(result), error, new.updated_at, key),
            )
        self._approvals(db, run_id, c)
        self._outbox(db, c)
        for sha, content in c.artifacts.items():
            db.execute("INSERT OR IGNORE INTO artifacts (sha256, content, size) VALUES (?, ?, ?)",
                       (sha, content, len(content)))
        return new

    def _approvals(self, db: sqlite3.Connection, run_id: str, c: StepCommit) -> None:
        if c.new_approval is not None:
            a = c.new_approval.model_dump(mode="json")
            a["args"] = canonical(a["args"])
            db.execute(
                f"INSERT INTO approvals ({', '.join(_APPROVAL_COLS)}) "
                f"VALUES ({', '.join('?' * len(_APPROVAL_COLS))})",
                tuple(a[k] for k in _APPROVAL_COLS),
            )
        if c.decision is not None:
            self._decide(db, run_id, c.decision)

    def _decide(self, db: sqlite3.Connection, run_id: str, d: ApprovalDecision) -> None:
        if db.execute(*decision_update(d, "?")).rowcount != 1:
            row = db.execute("SELECT decision, reviewer FROM approvals WHERE approval_id = ?",
                             (d.approval_id,)).fetchone()
            raise decided_before(run_id, d.approval_id, row)

    # -- reads ----------------------------------------------------------------------

    def messages(self, run_id: str, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            try:
                cur = self._db.execute(
                    "SELECT body FROM messages WHERE run_id = ? AND idx >= ? AND idx < ? "
                    "ORDER BY idx", (run_id, start, end if end is not None else 2**62),
                )
                bodies = [body for (body,) in cur]
                if not bodies:
                    self._exists(run_id)
            except sqlite3.Error as exc:
                if str(exc).startswith(_NOT_UTF8):
                    raise self._not_utf8("FROM messages", str(exc)) from None
                raise StoreError(f"database {self.path!r}: {_what(exc)}") from None
            except OverflowError:
                raise StoreError(f"database {self.path!r}: message index out of range") from None
        # One parse of the whole range: resuming a long run reads every message, and a
        # json.loads per message costs twice as much.
        try:
            loaded: list[dict[str, Any]] = json.loads("[" + ",".join(bodies) + "]")
        except ValueError as exc:
            raise self._damaged("messages", run_id, exc) from None
        return loaded

    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        if step is None:
            rows = self._read("SELECT body FROM views WHERE run_id = ? ORDER BY step DESC LIMIT 1",
                              (run_id,))
        else:
            rows = self._read("SELECT body FROM views WHERE run_id = ? AND step = ?",
                              (run_id, step))
        if not rows:
            self._exists(run_id)
            return None
        try:
            return ViewRecord.model_validate_json(rows[0]["body"])
        except ValueError as exc:
            raise self._damaged("views", run_id, exc) from None

    def events(self, run_id: str) -> list[Event]:
        rows = self._read(
            f"SELECT {', '.join(_EVENT_COLS)} FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        if not rows:
            self._exists(run_id)
        out = []
        for r in rows:
            d = dict(r)
            try:
                d["detail"] = json.loads(d["detail"] or "{}")
                out.append(Event.model_validate(d))
            except (ValueError, TypeError) as exc:
                raise self._damaged("events", run_id, exc) from None
        return out

    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None) -> Effect | None:
        with self._tx() as db:
            if owner is not None or version is not None:
                self._fence(db, effect.run_id, owner, version)
            try:
                db.execute(
                    "INSERT INTO effects (key, run_id, step, tool, args, status, started_at) "
                    "VALUES (?, ?, ?, ?, ?, 'STARTED', ?)",
                    (effect.key, effect.run_id, effect.step, effect.tool, canonical(effect.args),
                     effect.started_at),
                )
                return None
            except sqlite3.IntegrityError:
                pass
        return self.effect(effect.key)

    def _fence(self, db: sqlite3.Connection, run_id: str, owner: str | None,
               version: int | None) -> None:
        row = db.execute("SELECT version, lease_owner FROM runs WHERE run_id = ?",
                         (run_id,)).fetchone()
        check_fence(run_id, row, owner=owner, version=version)

    def effect(self, key: str) -> Effect | None:
        rows = self._read("SELECT * FROM effects WHERE key = ?", (key,))
        return self._effect(rows[0]) if rows else None

    def effects(self, run_id: str) -> list[Effect]:
        rows = self._read("SELECT * FROM effects WHERE run_id = ? ORDER BY key", (run_id,))
        return [self._effect(r) for r in rows]

    def _effect(self, row: sqlite3.Row) -> Effect:
        d = dict(row)
        try:
            d["args"] = json.loads(d["args"])
            d["result"] = json.loads(d["result"]) if d["result"] is not None else None
            return Effect.model_validate(d)
        except (ValueError, TypeError) as exc:
            raise self._damaged("effects", d.get("run_id"), exc) from None

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True) -> list[Approval]:
        sql = f"SELECT {', '.join(_APPROVAL_COLS)} FROM approvals WHERE 1 = 1"
        args: list[Any] = []
        if run_id is not None:
            sql += " AND run_id = ?"
            args.append(run_id)
        if pending_only:
            sql += " AND decision IS NULL"
        out = []
        for r in self._read(sql + " ORDER BY requested_at, approval_id", tuple(args)):
            try:
                out.append(approval_from(dict(r)))
            except (ValueError, TypeError) as exc:
                raise self._damaged("approvals", r["run_id"], exc) from None
        return out

    # -- leases ---------------------------------------------------------------------

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        with self._tx() as db:
            row = db.execute("SELECT lease_owner, lease_until FROM runs WHERE run_id = ?",
                             (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(run_id)
            held, until = row
            if held and held != owner and not force and lease_held(held, until, now):
                raise RunLocked(run_id, held)
            db.execute("UPDATE runs SET lease_owner = ?, lease_at = ?, lease_until = ? "
                       "WHERE run_id = ?", (owner, now, expiry(now, ttl), run_id))
            return held if held != owner else None

    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        with self._tx() as db:
            cur = db.execute("UPDATE runs SET lease_until = ? WHERE run_id = ? AND lease_owner = ?",
                             (now + ttl, run_id, owner))
            return cur.rowcount == 1

    def release(self, run_id: str, owner: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL "
                       "WHERE run_id = ? AND lease_owner = ?", (run_id, owner))

    def lease(self, run_id: str) -> Lease | None:
        rows = self._read("SELECT lease_owner, lease_until FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        owner, until = rows[0]
        return Lease(owner, until) if owner else None

    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1) -> list[Claimed]:
        out: list[Claimed] = []
        only = f" AND workflow IN ({', '.join('?' * len(workflows))})" if workflows else ""
        with self._tx() as db:
            rows = db.execute(
                "SELECT run_id, workflow, lease_owner, lease_until FROM runs "
                "WHERE status = 'running' AND (lease_owner IS NULL OR lease_until <= ? "
                f"OR lease_owner LIKE ?){only} "
                "ORDER BY lease_until IS NOT NULL, lease_until, updated_at LIMIT ?",
                (now, this_host_prefix() + "%", *(workflows or ()), limit * 2 + 16),
            ).fetchall()
            for run_id, workflow, held, until in rows:
                if len(out) >= limit:
                    break
                if lease_held(held, until, now):
                    continue
                db.execute("UPDATE runs SET lease_owner = ?, lease_at = ?, lease_until = ? "
                           "WHERE run_id = ?", (owner, now, now + ttl, run_id))
                out.append(Claimed(run_id, workflow, held))
        return out

    # -- the approval inbox: pages, accounts, refusals, the notification outbox --------

    def _outbox(self, db: sqlite3.Connection, c: StepCommit) -> None:
        """Write the commit's notifications in its own transaction (the outbox)."""
        sql, rows = outbox_insert(c, "?")
        if rows:
            db.executemany(sql, rows)

    def waiting(self, workflow: str | None = None, *, limit: int = 50,
                offset: int = 0) -> list[tuple[Approval, RunState]]:
        sql, args = waiting_query(workflow, "?")
        out = []
        for row in self._read(sql, (*args, int(limit), int(offset))):
            d = dict(row)
            out.append((approval_from(d), self._run(d, d["run_id"])))
        return out

    def add_account(self, account: Account) -> None:
        with self._tx() as db:
            try:
                db.execute(f"INSERT INTO accounts ({_ACCOUNT_SQL}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           _account_row(account))
            except sqlite3.IntegrityError:
                raise StoreError(f"account {account.name!r} already exists") from None

    def save_account(self, account: Account, *, was: float | None = None) -> None:
        with self._tx() as db:
            saved = db.execute(
                "UPDATE accounts SET role = ?, password_hash = ?, release_limit = ?, "
                "disabled = ?, updated_at = ? WHERE name = ?"
                + ("" if was is None else " AND updated_at = ?"),
                (account.role, account.password_hash, account.limit, int(account.disabled),
                 account.updated_at, account.name, *(() if was is None else (was,))),
            ).rowcount == 1
        if not saved:
            raise account_not_saved(account.name, self._has_account(account.name))

    def account(self, name: str) -> Account | None:
        rows = self._read(f"SELECT {_ACCOUNT_SQL} FROM accounts WHERE name = ?", (name,))
        return _account(rows[0]) if rows else None

    def accounts(self) -> list[Account]:
        return [_account(r) for r in self._read(f"SELECT {_ACCOUNT_SQL} FROM accounts "
                                                "ORDER BY name")]

    def add_refusal(self, refusal: Refusal) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO web_refusals (run_id, approval_id, account, action, code, reason, "
                "at, remote) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (refusal.run_id, refusal.approval_id, refusal.account, refusal.action,
                 refusal.code, refusal.reason, refusal.at, refusal.remote),
            )

    def refusals(self, run_id: str) -> list[Refusal]:
        rows = self._read("SELECT * FROM web_refusals WHERE run_id = ? ORDER BY refusal_id",
                          (run_id,))
        return [Refusal.model_validate(dict(r)) for r in rows]

    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        if approval_ids is not None:
            if not approval_ids:
                return []
            marks = ", ".join("?" * len(approval_ids))
            rows = self._read(f"SELECT * FROM notifications WHERE approval_id IN ({marks}) "
                              "ORDER BY created_at, key", tuple(approval_ids))
        else:
            rows = self._read("SELECT * FROM notifications WHERE run_id = ? "
                              "ORDER BY created_at, key", (run_id,))
        return [Notification.model_validate(dict(r)) for r in rows]

    def due_notifications(self, now: float, limit: int = 20) -> list[Notification]:
        rows = self._read("SELECT * FROM notifications WHERE status = 'pending' AND "
                          "next_attempt_at <= ? ORDER BY next_attempt_at, key LIMIT ?",
                          (now, int(limit)))
        return [Notification.model_validate(dict(r)) for r in rows]

    def save_notification(self, note: Notification) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE notifications SET status = ?, attempts = ?, next_attempt_at = ?, "
                "last_error = ?, delivered_at = ? WHERE key = ?",
                (note.status, note.attempts, note.next_attempt_at, note.last_error,
                 note.delivered_at, note.key),
            )


_ACCOUNT_SQL = ", ".join(ACCOUNT_COLUMNS)


def _account_row(a: Account) -> tuple[Any, ...]:
    return (a.name, a.role, a.password_hash, a.limit, int(a.disabled), a.created_at,
            a.updated_at)


def _account(row: sqlite3.Row) -> Account:
    d = dict(row)
    d["limit"] = d.pop("release_limit")
    d["disabled"] = bool(d["disabled"])
    return Account.model_validate(d)


#: How Python's sqlite3 begins the error of a text value that is not UTF-8.
_NOT_UTF8 = "Could not decode to UTF-8"


def _refuse_foreign(db: sqlite3.Connection, path: str, adopt: bool) -> None:
    """Refuse a database of another program: it has tables, but not fsm's schema. With
    ``adopt``, fsm adds its schema to a file whose tables carry no schema version (an
    application sharing its database with fsm on purpose)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = sorted(r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"))
    if version == 0 and (adopt or not tables):
        return  # a new (or empty, or shared) file: fsm creates its schema in it
    if version == 0 or not {"runs", "events"} <= set(tables):
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise StoreError(
            f"{path!r} is not an fsm database (it has no fsm tables"
            + (f", but tables of another program: {shown}" if tables else "")
            + "); give the --db file your runs are in, or the name of a new file")


def _garbled(exc: UnicodeDecodeError) -> str:
    """SQLite reported an error whose text is not even UTF-8: the file is damaged."""
    shown = exc.object[:80].decode("utf-8", "backslashreplace") \
        if isinstance(exc.object, bytes) else ""
    return (f"the database file is damaged (SQLite says: {shown}); restore it from a "
            "backup")


def _what(exc: sqlite3.Error, path: str | None = None) -> str:
    """SQLite's message, with what to do about the common ones."""
    text = str(exc)
    code = getattr(exc, "sqlite_errorname", "")
    if path is not None and code == "SQLITE_CANTOPEN" and _read_only_place(path):
        return f"{text} (the file or its folder is read-only: a read-only mount?)"
    if code == "SQLITE_FULL" or "database or disk is full" in text:
        return f"{text} (free some disk space, then resume the run)"
    if code.startswith("SQLITE_IOERR"):
        return f"{text} (is the disk full or failing?)"
    if code.startswith("SQLITE_READONLY") or "readonly database" in text:
        return f"{text} (the file or its folder cannot be written)"
    return text


def _read_only_place(path: str) -> bool:
    folder = os.path.dirname(os.path.abspath(path))
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY) or not os.access(folder, os.W_OK)
    except OSError:
        return False


def _uri(path: str, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{query}"


def _open_readonly(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open an existing fsm database for reading only: nothing in the file changes.

    A folder that cannot be written has no room for SQLite's shared-memory file; no
    writer can be working there either, so the file is then read as immutable.
    """
    if not os.path.isfile(path):
        raise StoreError(f"no database at {path!r} (give --db FILE or set FSM_DB)")
    db = None
    try:
        try:
            db = sqlite3.connect(_uri(path, mode="ro"), uri=True, check_same_thread=False,
                                 timeout=busy_timeout_ms / 1000, isolation_level=None)
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.OperationalError:
            if db is not None:
                db.close()
            db = sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True,
                                 check_same_thread=False, isolation_level=None)
            version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        if db is not None:
            db.close()
        raise StoreError(f"cannot read database {path!r}: {_what(exc)}") from None
    except UnicodeDecodeError as exc:
        if db is not None:
            db.close()
        raise StoreError(f"cannot read database {path!r}: {_garbled(exc)}") from None
    problem = _not_ours(path, version, tables)
    if problem is not None:
        db.close()
        raise StoreError(problem)
    return db


def _not_ours(path: str, version: int, tables: set[str]) -> str | None:
    if version == 0 or "runs" not in tables or "events" not in tables:
        return (f"{path!r} is not an fsm database (it has no fsm tables); "
                "give the --db file your runs are in")
    if version > len(MIGRATIONS):
        return (f"database {path!r} has schema version {version}, newer than this fsm "
                f"understands ({len(MIGRATIONS)}); upgrade fsm to read it")
    if version < len(MIGRATIONS):
        return (f"database {path!r} has the older schema version {version} (this fsm uses "
                f"{len(MIGRATIONS)}); a command that writes, e.g. fsm sweep, upgrades it")
    return None


class _Transaction:
    """A write transaction of a :class:`SQLiteStore` (a class, not a generator: every
    step commits through one, and a generator's context manager costs more than the
    transaction's own ``BEGIN``)."""

    __slots__ = ("store",)

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self.store
        store._lock.acquire()
        try:
            if store.readonly:
                raise StoreError(f"database {store.path!r} was opened read-only")
            try:
                store._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"database {store.path!r}: {exc}") from None
        except BaseException:
            store._lock.release()
            raise
        return store._db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        store = self.store
        try:
            if kind is None:
                try:
                    store._db.execute("COMMIT")
                    return
                except BaseException as failed:
                    exc = failed
            store._rollback()
            if isinstance(exc, UnicodeDecodeError):
                raise StoreError(f"database {store.path!r}: {_garbled(exc)}; nothing of this "
                                 "write was saved") from None
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"database {store.path!r}: {_what(exc)}; nothing of this "
                                 "write was saved") from None
            if isinstance(exc, OverflowError | ValueError):
                # A value SQLite cannot hold (an integer beyond 64 bits, a NUL in text).
                raise StoreError(f"database {store.path!r}: a value cannot be stored "
                                 f"({exc}); nothing of this write was saved") from None
            if exc is not None and kind is None:
                raise exc
        finally:
            store._lock.release()
