"""The PostgreSQL store: the same contract as SQLite, for many workers on many machines.

psycopg 3 with a connection pool; one transaction per step; the run row is locked
(``SELECT ... FOR UPDATE``) by every commit, effect claim and lease change, so the
fence (this writer still holds the lease, at this version) is checked in the same
transaction as the write. Runnable runs are claimed with ``FOR UPDATE SKIP LOCKED``;
a trigger ``NOTIFY``-es the workers when a run becomes runnable.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from fsm.errors import (
    FSMError,
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
    EFFECT_COLUMNS,
    EVENT_COLUMNS,
    NOTIFICATION_COLUMNS,
    REFUSAL_COLUMNS,
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
from fsm.store.pg_schema import CHANNEL, MIGRATION_LOCK, MIGRATIONS, SWEEP_LOCK

_EVENT_COLS = EVENT_COLUMNS
_APPROVAL_COLS = APPROVAL_COLUMNS
_EFFECT_COLS = EFFECT_COLUMNS
_INSERT_EVENT = (f"INSERT INTO events ({', '.join(_EVENT_COLS)}) "
                 f"VALUES ({', '.join(['%s'] * len(_EVENT_COLS))})")
_INSERT_APPROVAL = (f"INSERT INTO approvals ({', '.join(_APPROVAL_COLS)}, args_doc) "
                    f"VALUES ({', '.join(['%s'] * len(_APPROVAL_COLS))}, %s::jsonb)")



def _doc(text: str) -> str:
    """The JSONB copy of JSON ``text``: JSONB cannot hold U+0000 (U+FFFD stands in), nor
    NaN or an infinity (null stands in; the text column keeps them)."""
    if "NaN" in text or "Infinity" in text:
        text = canonical(json.loads(text, parse_constant=lambda _: None))
    return text.replace("\\u0000", "\\ufffd")


def _line(exc: Exception) -> str:
    """libpq's message on one line (it puts a hint on a line of its own)."""
    return "; ".join(part.strip() for part in str(exc).splitlines() if part.strip()) or \
        type(exc).__name__


def _names_a_database(url: str, shown: str) -> None:
    """Refuse a URL that names no database (``postgresql://``): libpq would pick one."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise StoreError(f"database URL {shown} cannot be read: {_line(exc)}") from None
    if not str(params.get("dbname") or "").strip():
        raise StoreError(f"database URL {shown} names no database: use "
                         "postgresql://user@host/dbname")


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class PostgresStore(SQLReads, Store):
    """A durable store in a PostgreSQL database, shared by any number of processes.

    ``pool_size`` (default ``$FSM_PG_POOL``, else 10) bounds the connections this
    process opens; a worker needs about one per run it drives at once, plus two.
    """

    MARK = "%s"

    def __init__(self, url: str, *, pool_size: int | None = None,
                 application_name: str | None = None, connect_timeout: float = 10.0,
                 readonly: bool = False) -> None:
        self.url = url
        self.location = url
        self.name = redact(url)
        self.readonly = readonly
        _names_a_database(url, self.name)
        size = pool_size or int(os.environ.get("FSM_PG_POOL") or 10)
        self.pool_size = size
        # Named after the process, so an operator (or a test) can find its sessions.
        self._kwargs: dict[str, Any] = {
            "autocommit": True, "application_name": application_name or f"fsm-{os.getpid()}"}
        if readonly:
            self._check_schema(connect_timeout)
        else:
            self._migrate(connect_timeout)
        self._pool = ConnectionPool(
            url, min_size=1, max_size=size, kwargs=self._kwargs, open=False, name="fsm",
            check=ConnectionPool.check_connection, timeout=connect_timeout,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreError(f"cannot open database {self.name}: {_line(exc)}") from None

    # -- plumbing -------------------------------------------------------------------

    def _connect(self, timeout: float = 10.0) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.url, connect_timeout=max(1, int(timeout)),
                                   **self._kwargs)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open database {self.name}: {_line(exc)}") from None

    def _check_schema(self, timeout: float) -> None:
        """For a reader: the database has fsm's schema, at this fsm's version; nothing in
        it changes (a reader never creates or migrates the schema)."""
        with self._connect(timeout) as conn:
            try:
                found = conn.execute("SELECT to_regclass('fsm_schema') IS NOT NULL").fetchone()
                row = conn.execute("SELECT max(version) FROM fsm_schema").fetchone() \
                    if found and found[0] else None
            except psycopg.Error as exc:
                raise StoreError(f"cannot read database {self.name}: {_line(exc)}") from None
        current = (row[0] if row else None) or 0
        if current == 0:
            raise StoreError(f"database {self.name} is not an fsm database (it has no fsm "
                             "tables); give the --db database your runs are in")
        if current > len(MIGRATIONS):
            raise StoreError(f"database {self.name} has schema version {current}, newer than "
                             f"this fsm understands ({len(MIGRATIONS)}); upgrade fsm to read it")
        if current < len(MIGRATIONS):
            raise StoreError(f"database {self.name} has the older schema version {current} "
                             f"(this fsm uses {len(MIGRATIONS)}); a command that writes, e.g. "
                             "fsm sweep, upgrades it")

    def _migrate(self, timeout: float) -> None:
        with self._connect(timeout) as conn:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    conn.execute("CREATE TABLE IF NOT EXISTS fsm_schema (version INTEGER NOT NULL)")
                    row = conn.execute("SELECT max(version) FROM fsm_schema").fetchone()
                    current = (row[0] if row else None) or 0
                    if current > len(MIGRATIONS):
                        raise StoreError(
                            f"database {self.name} has schema version {current}, newer than "
                            f"this fsm understands ({len(MIGRATIONS)}); upgrade fsm to open it")
                    for version, script in enumerate(MIGRATIONS, start=1):
                        if version > current:
                            conn.execute(script)
                            conn.execute("INSERT INTO fsm_schema VALUES (%s)", (version,))
            except psycopg.Error as exc:
                raise StoreError(f"database {self.name}: migration failed: {exc}") from None

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except psycopg.Error as exc:
            raise StoreError(f"database {self.name}: {exc}") from None

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._pool.connection() as conn:
                return conn.execute(sql, args).fetchall()
        except psycopg.Error as exc:
            raise StoreError(f"database {self.name}: {exc}") from None

    @property
    def schema_version(self) -> int:
        return int(self._read("SELECT max(version) FROM fsm_schema")[0][0])

    def server_version(self) -> str:
        return str(self._read("SHOW server_version")[0][0])

    def close(self) -> None:
        self._pool.close()

    # -- runs -----------------------------------------------------------------------

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        commit = commit or StepCommit(run=run, expected_version=0)
        with self._tx() as conn:
            inserted = conn.execute(
                "INSERT INTO runs (run_id, workflow, status, version, snapshot, created_at, "
                "updated_at) VALUES (%s, %s, %s, 0, '{}', %s, %s) ON CONFLICT DO NOTHING "
                "RETURNING run_id",
                (run.run_id, run.workflow, run.status, run.created_at, run.updated_at),
            ).fetchone()
            if inserted is None:
                raise RunError(f"run {run.run_id!r} already exists", run_id=run.run_id)
            return self._apply(conn, commit, fence=False)

    def load_run(self, run_id: str) -> RunState:
        rows = self._read("SELECT snapshot, version FROM runs WHERE run_id = %s", (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        return run_from(rows[0][0], rows[0][1])

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0,
                  newest_first: bool = False) -> list[RunState]:
        where, args = runs_where(status, workflow, "%s")
        sql = "SELECT snapshot, version FROM runs" + where
        order = "DESC" if newest_first else "ASC"
        sql += f" ORDER BY created_at {order}, run_id {order} LIMIT %s OFFSET %s"
        args += [limit, offset]  # LIMIT NULL is no limit
        return [run_from(r[0], r[1]) for r in self._read(sql, tuple(args))]

    def commit(self, commit: StepCommit) -> RunState:
        with self._tx() as conn:
            return self._apply(conn, commit)

    def _apply(self, conn: psycopg.Connection[Any], c: StepCommit, *,
               fence: bool = True) -> RunState:
        run_id = c.run.run_id
        row = conn.execute("SELECT version, log_count, log_head, lease_owner FROM runs "
                           "WHERE run_id = %s FOR UPDATE", (run_id,)).fetchone()
        check_fence(run_id, row and (row[0], row[3]), owner=c.owner if fence else None,
                    version=c.expected_version)
        assert row is not None  # else check_fence raised RunNotFound
        if c.decision is not None:
            self._decide(conn, run_id, c.decision)
        new = c.run.model_copy(update={"version": c.expected_version + 1})
        # The log continues from the head kept in the run row: a deleted tail stays a gap.
        events = chained(c.events, row[2], row[1])
        with conn.pipeline(), conn.cursor() as cur:
            if events:
                cur.executemany(_INSERT_EVENT, [e.row(_EVENT_COLS) for e in events])
            snapshot = c.snapshot
            cur.execute(
                "UPDATE runs SET status = %s, version = %s, snapshot = %s, doc = %s::jsonb, "
                "updated_at = %s, log_count = %s, log_head = %s WHERE run_id = %s",
                (new.status, new.version, snapshot, _doc(snapshot), new.updated_at,
                 row[1] + len(events), events[-1].hash if events else row[2], run_id),
            )
            self._write_rows(cur, new, c)
        return new

    def _write_rows(self, cur: psycopg.Cursor[Any], new: RunState, c: StepCommit) -> None:
        run_id = new.run_id
        if c.messages:
            base = new.message_count - len(c.messages)
            cur.executemany("INSERT INTO messages (run_id, idx, body) VALUES (%s, %s, %s)",
                            [(run_id, base + i, body) for i, body in enumerate(c.message_bodies)])
        if c.view is not None:
            cur.execute("INSERT INTO views (run_id, step, body) VALUES (%s, %s, %s) "
                        "ON CONFLICT (run_id, step) DO UPDATE SET body = EXCLUDED.body",
                        (run_id, c.view.step, c.view_body))
        for key, (result, error) in c.effects_done.items():
            text = canonical(result)
            cur.execute("UPDATE effects SET status = 'DONE', result = %s, "
                        "result_doc = %s::jsonb, error = %s, finished_at = %s WHERE key = %s",
                        (text, _doc(text), error, new.updated_at, key))
        if c.new_approval is not None:
            a = c.new_approval.model_dump(mode="json")
            a["args"] = canonical(a["args"])
            cur.execute(_INSERT_APPROVAL, (*(a[k] for k in _APPROVAL_COLS), _doc(a["args"])))
        for sha, content in c.artifacts.items():
            cur.execute("INSERT INTO artifacts (sha256, content, size) VALUES (%s, %s, %s) "
                        "ON CONFLICT DO NOTHING", (sha, content, len(content)))
        sql, rows = outbox_insert(c, "%s")  # the outbox, written with the step
        if rows:
            cur.executemany(sql, rows)

    def _decide(self, conn: psycopg.Connection[Any], run_id: str, d: ApprovalDecision) -> None:
        if conn.execute(*decision_update(d, "%s")).rowcount != 1:
            row = conn.execute("SELECT decision, reviewer FROM approvals WHERE approval_id = %s",
                               (d.approval_id,)).fetchone()
            raise decided_before(run_id, d.approval_id, row)

    # -- reads ----------------------------------------------------------------------

    def messages(self, run_id: str, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        rows = self._read("SELECT body FROM messages WHERE run_id = %s AND idx >= %s AND idx < %s "
                          "ORDER BY idx", (run_id, start, end if end is not None else 2**31 - 1))
        if not rows:
            self._exists(run_id)
        loaded: list[dict[str, Any]] = json.loads("[" + ",".join(r[0] for r in rows) + "]")
        return loaded

    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        if step is None:
            rows = self._read("SELECT body FROM views WHERE run_id = %s "
                              "ORDER BY step DESC LIMIT 1", (run_id,))
        else:
            rows = self._read("SELECT body FROM views WHERE run_id = %s AND step = %s",
                              (run_id, step))
        if not rows:
            self._exists(run_id)
            return None
        return ViewRecord.model_validate_json(rows[0][0])

    def events(self, run_id: str) -> list[Event]:
        rows = self._read(f"SELECT {', '.join(_EVENT_COLS)} FROM events WHERE run_id = %s "
                          "ORDER BY seq", (run_id,))
        if not rows:
            self._exists(run_id)
        out = []
        for r in rows:
            d = dict(zip(_EVENT_COLS, r, strict=True))
            d["detail"] = json.loads(d["detail"] or "{}")
            out.append(Event.model_validate(d))
        return out

    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None) -> Effect | None:
        args = canonical(effect.args)
        with self._tx() as conn:
            self._fence(conn, effect.run_id, owner, version)
            row = conn.execute(
                "INSERT INTO effects (key, run_id, step, tool, args, args_doc, status, "
                "started_at) VALUES (%s, %s, %s, %s, %s, %s::jsonb, 'STARTED', %s) "
                "ON CONFLICT (key) DO NOTHING RETURNING key",
                (effect.key, effect.run_id, effect.step, effect.tool, args, _doc(args),
                 effect.started_at),
            ).fetchone()
            if row is not None:
                return None
        return self.effect(effect.key)

    def _fence(self, conn: psycopg.Connection[Any], run_id: str, owner: str | None,
               version: int | None) -> None:
        row = conn.execute("SELECT version, lease_owner FROM runs WHERE run_id = %s FOR UPDATE",
                           (run_id,)).fetchone()
        check_fence(run_id, row, owner=owner, version=version)

    def effect(self, key: str) -> Effect | None:
        rows = self._read(f"SELECT {', '.join(_EFFECT_COLS)} FROM effects WHERE key = %s", (key,))
        return _effect(rows[0]) if rows else None

    def effects(self, run_id: str) -> list[Effect]:
        rows = self._read(f"SELECT {', '.join(_EFFECT_COLS)} FROM effects WHERE run_id = %s "
                          "ORDER BY key", (run_id,))
        return [_effect(r) for r in rows]

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True) -> list[Approval]:
        sql = f"SELECT {', '.join(_APPROVAL_COLS)} FROM approvals WHERE TRUE"
        args: list[Any] = []
        if run_id is not None:
            sql += " AND run_id = %s"
            args.append(run_id)
        if pending_only:
            sql += " AND decision IS NULL"
        return [_approval(r) for r in
                self._read(sql + " ORDER BY requested_at, approval_id", tuple(args))]

    # -- leases ---------------------------------------------------------------------

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        with self._tx() as conn:
            row = conn.execute("SELECT lease_owner, lease_until FROM runs WHERE run_id = %s "
                               "FOR UPDATE", (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(run_id)
            held, until = row
            if held and held != owner and not force and lease_held(held, until, now):
                raise RunLocked(run_id, held)
            conn.execute("UPDATE runs SET lease_owner = %s, lease_at = %s, lease_until = %s "
                         "WHERE run_id = %s", (owner, now, expiry(now, ttl), run_id))
            return str(held) if held and held != owner else None

    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        with self._tx() as conn:
            cur = conn.execute("UPDATE runs SET lease_until = %s WHERE run_id = %s "
                               "AND lease_owner = %s", (now + ttl, run_id, owner))
            return cur.rowcount == 1

    def release(self, run_id: str, owner: str) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL "
                         "WHERE run_id = %s AND lease_owner = %s", (run_id, owner))

    def lease(self, run_id: str) -> Lease | None:
        rows = self._read("SELECT lease_owner, lease_until FROM runs WHERE run_id = %s",
                          (run_id,))
        if not rows:
            raise RunNotFound(run_id)
        owner, until = rows[0]
        return Lease(owner, until) if owner else None

    def claim_runnable(self, owner: str, now: float, ttl: float, *,
                       workflows: list[str] | None = None, limit: int = 1) -> list[Claimed]:
        out: list[Claimed] = []
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT run_id, workflow, lease_owner, lease_until FROM runs "
                "WHERE status = 'running' AND (%s::text[] IS NULL OR workflow = ANY(%s)) "
                "AND (lease_owner IS NULL OR lease_until <= %s OR lease_owner LIKE %s) "
                "ORDER BY lease_until NULLS FIRST, updated_at LIMIT %s FOR UPDATE SKIP LOCKED",
                (workflows or None, workflows or None, now, this_host_prefix() + "%",
                 limit * 2 + 16),
            ).fetchall()
            for run_id, workflow, held, until in rows:
                if len(out) >= limit:
                    break
                if lease_held(held, until, now):
                    continue
                conn.execute("UPDATE runs SET lease_owner = %s, lease_at = %s, lease_until = %s "
                             "WHERE run_id = %s", (owner, now, now + ttl, run_id))
                out.append(Claimed(run_id, workflow, held))
        return out

    # -- the fleet ------------------------------------------------------------------

    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        threading.Thread(target=self._listen, args=(wake, stop), daemon=True,
                         name="fsm-listen").start()
        return True

    def _listen(self, wake: threading.Event, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                with self._connect() as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    wake.set()  # anything missed while not listening
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            wake.set()
            except (psycopg.Error, FSMError):
                stop.wait(1.0)  # the server went away: polling covers the gap

    @contextmanager
    def sweep_lock(self) -> Iterator[bool]:
        try:
            conn = self._connect()
        except StoreError:
            yield False
            return
        with conn:
            try:
                got = bool(conn.execute("SELECT pg_try_advisory_lock(%s)",
                                        (SWEEP_LOCK,)).fetchone()[0])  # type: ignore[index]
            except psycopg.Error:
                got = False
            yield got
            # Closing the connection ends the session, which releases the lock.

    # -- the approval inbox: accounts, refusals, the notification outbox ---------------

    def waiting(self, workflow: str | None = None, *, limit: int = 50,
                offset: int = 0) -> list[tuple[Approval, RunState]]:
        sql, args = waiting_query(workflow, "%s")
        n = len(APPROVAL_COLUMNS)
        return [(_approval(row[:n]), run_from(row[n], row[n + 1]))
                for row in self._read(sql, (*args, int(limit), int(offset)))]

    def add_account(self, account: Account) -> None:
        try:
            with self._pool.connection() as conn:
                conn.execute(f"INSERT INTO accounts ({_ACCOUNT_SQL}) "
                             "VALUES (%s, %s, %s, %s, %s, %s, %s)", _account_row(account))
        except psycopg.errors.UniqueViolation:
            raise StoreError(f"account {account.name!r} already exists") from None
        except psycopg.Error as exc:
            raise StoreError(f"database {self.name}: {exc}") from None

    def save_account(self, account: Account, *, was: float | None = None) -> None:
        with self._tx() as conn:
            saved = conn.execute(
                "UPDATE accounts SET role = %s, password_hash = %s, release_limit = %s, "
                "disabled = %s, updated_at = %s WHERE name = %s"
                + ("" if was is None else " AND updated_at = %s"),
                (account.role, account.password_hash, account.limit, account.disabled,
                 account.updated_at, account.name, *(() if was is None else (was,)))
            ).rowcount == 1
        if not saved:
            raise account_not_saved(account.name, self._has_account(account.name))

    def account(self, name: str) -> Account | None:
        rows = self._read(f"SELECT {_ACCOUNT_SQL} FROM accounts WHERE name = %s", (name,))
        return _account(rows[0]) if rows else None

    def accounts(self) -> list[Account]:
        return [_account(r) for r in self._read(f"SELECT {_ACCOUNT_SQL} FROM accounts "
                                                "ORDER BY name")]

    def add_refusal(self, refusal: Refusal) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO web_refusals (run_id, approval_id, account, action, code, reason, "
                "at, remote) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (refusal.run_id, refusal.approval_id, refusal.account, refusal.action,
                 refusal.code, refusal.reason, refusal.at, refusal.remote))

    def refusals(self, run_id: str) -> list[Refusal]:
        rows = self._read(f"SELECT {', '.join(_REFUSAL_COLS)} FROM web_refusals "
                          "WHERE run_id = %s ORDER BY refusal_id", (run_id,))
        return [Refusal.model_validate(dict(zip(_REFUSAL_COLS, r, strict=True))) for r in rows]

    def notifications(self, *, approval_ids: list[str] | None = None,
                      run_id: str | None = None) -> list[Notification]:
        cols = ", ".join(_NOTIFICATION_COLS)
        if approval_ids is not None:
            rows = self._read(f"SELECT {cols} FROM notifications WHERE approval_id = ANY(%s) "
                              "ORDER BY created_at, key", (list(approval_ids),))
        else:
            rows = self._read(f"SELECT {cols} FROM notifications WHERE run_id = %s "
                              "ORDER BY created_at, key", (run_id,))
        return [_notification(r) for r in rows]

    def due_notifications(self, now: float, limit: int = 20) -> list[Notification]:
        rows = self._read(f"SELECT {', '.join(_NOTIFICATION_COLS)} FROM notifications "
                          "WHERE status = 'pending' AND next_attempt_at <= %s "
                          "ORDER BY next_attempt_at, key LIMIT %s", (now, int(limit)))
        return [_notification(r) for r in rows]

    def save_notification(self, note: Notification) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE notifications SET status = %s, attempts = %s, next_attempt_at = %s, "
                "last_error = %s, delivered_at = %s WHERE key = %s",
                (note.status, note.attempts, note.next_attempt_at, note.last_error,
                 note.delivered_at, note.key))


def _effect(row: tuple[Any, ...]) -> Effect:
    d = dict(zip(_EFFECT_COLS, row, strict=True))
    d["args"] = json.loads(d["args"])
    d["result"] = json.loads(d["result"]) if d["result"] is not None else None
    return Effect.model_validate(d)


_ACCOUNT_SQL = ", ".join(ACCOUNT_COLUMNS)
_REFUSAL_COLS = REFUSAL_COLUMNS
_NOTIFICATION_COLS = NOTIFICATION_COLUMNS


def _account_row(a: Account) -> tuple[Any, ...]:
    return (a.name, a.role, a.password_hash, a.limit, a.disabled, a.created_at, a.updated_at)


def _account(row: tuple[Any, ...]) -> Account:
    name, role, password_hash, limit, disabled, created, updated = row
    return Account(name=name, role=role, password_hash=password_hash, limit=limit,
                   disabled=bool(disabled), created_at=created, updated_at=updated)


def _notification(row: tuple[Any, ...]) -> Notification:
    return Notification.model_validate(dict(zip(_NOTIFICATION_COLS, row, strict=True)))


def _approval(row: tuple[Any, ...]) -> Approval:
    return approval_from(dict(zip(APPROVAL_COLUMNS, row, strict=True)))
