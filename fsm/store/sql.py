"""One system database, two dialects: what the SQLite and PostgreSQL stores share.

:class:`SQLStore` implements the runs, the log, effects, approvals, conversations and
definitions once, over the statements of :mod:`fsm.store.statements`; a dialect
subclass (:class:`~fsm.store.sqlite.SQLiteStore`, :class:`~fsm.store.postgres.PostgresStore`)
gives it a transaction (``_tx``), a read (``_read``), and how a commit's writes are sent
(``_send``: one by one on SQLite, in one pipeline on PostgreSQL). The leases, the queue,
people and the outbox are shared the same way (:mod:`fsm.store.sql_fleet`), the desk's
reads and the prune too (:mod:`fsm.store.desk`, :mod:`fsm.store.prune`).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from fsm.errors import RowDamaged, RunError, StoreError
from fsm.records import (
    Approval,
    DefinitionRecord,
    Effect,
    Event,
    RunState,
    StepCommit,
    ViewRecord,
    canonical,
    chained,
)
from fsm.records.conversation import Reply
from fsm.store.base import Store
from fsm.store.columns import (
    APPROVAL_COLUMNS,
    EFFECT_COLUMNS,
    EVENT_COLUMNS,
    UNREADABLE,
    SQLReads,
    definition_row,
    reply_row,
    run_from,
    runs_where,
    waiting_query,
)
from fsm.store.desk import DeskReads
from fsm.store.dialect import Dialect
from fsm.store.lease import check_fence
from fsm.store.page import Page, read_rows
from fsm.store.prune import SQLPrune
from fsm.store.sql_fleet import SQLFleet, SQLPeople
from fsm.store.statements import Head, Statements, Write, commit_writes, statements


def parse_many(text: str) -> Any:
    """``json.loads(text)`` of a long array, without the cycle collector: parsed JSON holds
    no cycles, and a collection that starts during the parse only walks every object made
    so far (a run's whole transcript, read on resume, is thousands of them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    finally:
        if enabled:
            gc.enable()


class _ClaimedBefore(Exception):
    """An effect's key was claimed by another writer while this claim was being written."""


#: Log heads a store keeps (see :meth:`SQLStore._apply`); past this many, it starts over.
_HEADS_KEPT = 4096


class SQLStore(SQLPeople, SQLReads, DeskReads, SQLPrune, SQLFleet, Store):
    """The shared SQL of both SQL stores; a subclass names its :class:`Dialect`."""

    DIALECT: Dialect
    sql: Statements

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "DIALECT" in cls.__dict__:
            cls.sql = statements(cls.DIALECT)
            cls.MARK = cls.DIALECT.mark
            cls.PICK_LOCK = cls.DIALECT.skip_locked
            cls.DEFINITION_ORDER = cls.DIALECT.definition_order

    def _init_sql(self) -> None:
        #: run_id → the run row as this store's last commit of it left it.
        self._heads: dict[str, Head] = {}
        #: Hashes of the definitions this store knows are recorded (none is ever removed).
        self._recorded: set[str] = set()

    # -- what a dialect gives ---------------------------------------------------------

    def _serial(self) -> AbstractContextManager[Any]:
        """Held around a commit until what the store knows of the run is right again (a
        failed commit forgets its head before another thread can commit from it)."""
        return nullcontext()

    def _column(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """The first column of ``sql``'s rows."""
        return [r[0] for r in self._read(sql, args)]

    def _send(self, db: Any, writes: list[Write], locked: bool) -> None:
        """Execute ``writes`` in order (``locked``: the run row is locked already)."""
        for sql, args, many, expect_one in writes:
            if many:
                db.executemany(sql, args)
            elif db.execute(sql, args).rowcount != 1 and expect_one is not None:
                raise expect_one(db)

    # -- runs -------------------------------------------------------------------------

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        commit = commit or StepCommit(run=run, expected_version=0)
        with self._serial():
            try:
                with self._tx() as db:
                    if db.execute(self.sql.insert_run, (
                            run.run_id, run.workflow, run.status, run.created_at,
                            run.updated_at, run.definition_hash,
                            run.forked_from.run_id if run.forked_from else None
                            )).rowcount != 1:
                        raise RunError(f"run {run.run_id!r} already exists", run_id=run.run_id)
                    return self._apply(db, commit, fence=False)
            except BaseException:
                self._heads.pop(run.run_id, None)
                raise

    def commit(self, commit: StepCommit) -> RunState:
        with self._serial():
            try:
                with self._tx() as db:
                    return self._apply(db, commit)
            except BaseException:
                self._heads.pop(commit.run.run_id, None)
                raise

    def _apply(self, db: Any, c: StepCommit, *, fence: bool = True) -> RunState:
        run_id = c.run.run_id
        owner = c.owner if fence else None
        # The run row as this store's last commit of it left it, while the run is still at
        # that version (every write of the run row adds one): the commit then needs no
        # read first, and the UPDATE's own condition is the check.
        known = self._heads.get(run_id)
        locked = known is None or known.version != c.expected_version
        if locked:
            row = db.execute(self.sql.fence_read, (run_id,)).fetchone()
            check_fence(run_id, row and (row[0], row[3]), owner=owner,
                        version=c.expected_version)
            known = Head(row[0], row[1], row[2], row[4], row[5])
        assert known is not None
        new = c.run.model_copy(update={"version": c.expected_version + 1})
        # The log continues from the head kept in the run row, not from the last row
        # found: a deleted tail then stays a gap the audit reports.
        events = chained(c.events, known.log_head, known.log_count)
        count = known.log_count + len(events)
        last = events[-1].hash if events else known.log_head
        # Every commit signs the head it leaves: what the log witnesses is what was signed.
        sig = self._sign(db, run_id, known, count, last, trusted=not locked,
                         public=new.status != "running")
        writes = commit_writes(self.sql, c, new, events, known, owner, sig,
                               lambda db: self._stale(db, run_id, owner, c.expected_version))
        self._send(db, writes, locked)
        if len(self._heads) >= _HEADS_KEPT:
            self._heads.clear()
        self._heads[run_id] = Head(new.version, count, last, new.status, sig)
        return new

    def _sign(self, db: Any, run_id: str, base: Head, count: int, head: str, *,
              trusted: bool, public: bool) -> str:
        """The signature of the head a commit leaves (see :meth:`Keys.extend`): Ed25519
        when the run stops or waits (``public``), else a MAC."""
        def hash_at(seq: int) -> str | None:
            row = db.execute(f"SELECT hash FROM events WHERE run_id = {self.MARK} AND "
                             f"seq = {self.MARK}", (run_id, seq)).fetchone()
            return None if row is None else str(row[0])

        return self.keys.extend(run_id, (base.log_count, base.log_head, base.log_sig), count,
                                head, trusted=trusted, hash_at=hash_at, public=public)

    def _stale(self, db: Any, run_id: str, owner: str | None, version: int | None) -> Exception:
        self._fence(db, run_id, owner, version)
        return StoreError(f"database {self._where()}: the row of run {run_id!r} changed "
                          "during its commit")

    def _fence(self, db: Any, run_id: str, owner: str | None, version: int | None) -> None:
        row = db.execute(self.sql.fence_read, (run_id,)).fetchone()
        check_fence(run_id, row and (row[0], row[3]), owner=owner, version=version)

    def _run(self, row: Sequence[Any], run_id: str | None) -> RunState:
        """A run from (snapshot, version) of its row, or the row is damaged."""
        try:
            return run_from(row[0], row[1])
        except UNREADABLE as exc:  # JSONDecodeError and ValidationError too
            raise self._damaged("runs", run_id, exc) from None

    def load_run(self, run_id: str) -> RunState:
        rows = self._read(f"SELECT snapshot, version FROM runs WHERE run_id = {self.MARK}",
                          (run_id,))
        if not rows:
            raise self.not_found(run_id)
        return self._run(rows[0], run_id)

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0, newest_first: bool = False,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[RunState]:
        m = self.MARK
        where, args = runs_where(status, workflow, m)
        order = "DESC" if newest_first else "ASC"
        sql = (f"SELECT snapshot, version, run_id FROM runs{where} "
               f"ORDER BY created_at {order}, run_id {order} LIMIT {m} OFFSET {m}")
        args += [self.DIALECT.no_limit if limit is None else limit, offset]
        return read_rows(self._read(sql, tuple(args)), lambda r: self._run(r, r[2]),
                         skip_damaged=skip_damaged, damaged=damaged, what="list_runs")

    def messages(self, run_id: str, start: int = 0, end: int | None = None
                 ) -> list[dict[str, Any]]:
        m = self.MARK
        bodies = self._column(f"SELECT body FROM messages WHERE run_id = {m} AND idx >= {m} "
                              f"AND idx < {m} ORDER BY idx",
                              (run_id, start,
                               end if end is not None else self.DIALECT.max_index))
        if not bodies:
            self._exists(run_id)
        # One parse of the whole range: resuming a long run reads every message, and a
        # json.loads per message costs twice as much.
        try:
            loaded: list[dict[str, Any]] = parse_many("[" + ",".join(bodies) + "]")
        except UNREADABLE as exc:
            raise self._damaged("messages", run_id, exc) from None
        return loaded

    def view_record(self, run_id: str, step: int | None = None) -> ViewRecord | None:
        m = self.MARK
        if step is None:
            rows = self._read(f"SELECT body FROM views WHERE run_id = {m} "
                              "ORDER BY step DESC LIMIT 1", (run_id,))
        else:
            rows = self._read(f"SELECT body FROM views WHERE run_id = {m} AND step = {m}",
                              (run_id, step))
        if not rows:
            self._exists(run_id)
            return None
        try:
            return ViewRecord.model_validate_json(rows[0][0])
        except UNREADABLE as exc:
            raise self._damaged("views", run_id, exc) from None

    def events(self, run_id: str) -> list[Event]:
        rows = self._read(f"SELECT {', '.join(EVENT_COLUMNS)} FROM events "
                          f"WHERE run_id = {self.MARK} ORDER BY seq", (run_id,))
        if not rows:
            self._exists(run_id)
        out = []
        for r in rows:
            d = dict(zip(EVENT_COLUMNS, r, strict=True))
            try:
                d["detail"] = json.loads(d["detail"] or "{}")
                out.append(Event.model_validate(d))
            except UNREADABLE as exc:
                raise self._damaged("events", run_id, exc) from None
        return out

    # -- effects ----------------------------------------------------------------------

    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None, claim: Event | None = None) -> Effect | None:
        with self._serial():  # as in commit(): the kept log head is right again before others
            try:
                with self._tx() as db:
                    claimed = self._claim(db, effect, owner, version, claim)
            except _ClaimedBefore:
                claimed = False
            except BaseException:
                self._heads.pop(effect.run_id, None)
                raise
        return None if claimed else self.effect(effect.key)

    def _claim(self, db: Any, effect: Effect, owner: str | None, version: int | None,
               claim: Event | None) -> bool:
        """The STARTED row, and its claim event chained to the run's log, written as a
        commit writes: the run row, the event, then the effect. False: claimed before."""
        run_id, sql = effect.run_id, self.sql
        args = canonical(effect.args)
        values = [effect.key, run_id, effect.step, effect.tool, args,
                  *sql.documented(sql.args_doc, args), effect.started_at, None]
        if claim is None and owner is None and version is None:
            return bool(db.execute(sql.insert_effect, tuple(values)).rowcount == 1)
        row = db.execute(sql.fence_read, (run_id,)).fetchone()
        check_fence(run_id, row and (row[0], row[3]), owner=owner, version=version)
        if claim is not None:
            (event,) = chained([claim], row[2], row[1])
            sig = self._sign(db, run_id, Head(row[0], row[1], row[2], row[4], row[5]),
                             row[1] + 1, event.hash, trusted=False, public=False)
            db.execute(sql.claimed_run, (row[0] + 1, row[1] + 1, event.hash, sig, run_id,
                                         row[0]))
            db.execute(sql.insert_event, event.row(EVENT_COLUMNS))
            values[-1] = event.hash
        if db.execute(sql.insert_effect, tuple(values)).rowcount != 1:
            if claim is not None:
                raise _ClaimedBefore  # claimed before: roll back its run row and event
            return False
        if claim is not None:
            self._heads[run_id] = Head(row[0] + 1, row[1] + 1, event.hash, row[4], sig)
        return True

    def effect(self, key: str) -> Effect | None:
        rows = self._read(f"SELECT {', '.join(EFFECT_COLUMNS)} FROM effects "
                          f"WHERE key = {self.MARK}", (key,))
        return self._effect(rows[0]) if rows else None

    def effects(self, run_id: str) -> list[Effect]:
        rows = self._read(f"SELECT {', '.join(EFFECT_COLUMNS)} FROM effects "
                          f"WHERE run_id = {self.MARK} ORDER BY key", (run_id,))
        return [self._effect(r) for r in rows]

    def _effect(self, row: Sequence[Any]) -> Effect:
        d = dict(zip(EFFECT_COLUMNS, row, strict=True))
        try:
            d["args"] = json.loads(d["args"])
            d["result"] = json.loads(d["result"]) if d["result"] is not None else None
            return Effect.model_validate(d)
        except UNREADABLE as exc:
            raise self._damaged("effects", d.get("run_id"), exc, key=d.get("key")) from None

    # -- approvals --------------------------------------------------------------------

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[Approval]:
        sql = f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals WHERE 1 = 1"
        args: list[Any] = []
        if run_id is not None:
            sql += f" AND run_id = {self.MARK}"
            args.append(run_id)
        if pending_only:
            sql += " AND decision IS NULL"
        rows = self._read(sql + " ORDER BY requested_at, approval_id", tuple(args))
        return read_rows(rows, lambda r: self._approval(dict(zip(APPROVAL_COLUMNS, r,
                                                                 strict=True))),
                         skip_damaged=skip_damaged, damaged=damaged, what="approvals")

    def waiting(self, workflow: str | None = None, *, limit: int = 50, offset: int = 0,
                skip_damaged: bool = False, damaged: list[RowDamaged] | None = None
                ) -> Page[tuple[Approval, RunState]]:
        sql, args = waiting_query(workflow, self.MARK)
        n = len(APPROVAL_COLUMNS)

        def parse(row: Sequence[Any]) -> tuple[Approval, RunState]:
            values = dict(zip(APPROVAL_COLUMNS, tuple(row)[:n], strict=True))
            return self._approval(values), self._run((row[n], row[n + 1]), values["run_id"])

        return read_rows(self._read(sql, (*args, int(limit), int(offset))), parse,
                         skip_damaged=skip_damaged, damaged=damaged, what="waiting")

    # -- conversations and definitions -------------------------------------------------

    def add_reply(self, reply: Reply, *, version: int) -> Reply:
        with self._tx() as db:
            # The run row's lock orders the replies of one run: seq is their commit order.
            self._fence(db, reply.run_id, None, version)
            row = db.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM replies "
                             f"WHERE run_id = {self.MARK}", (reply.run_id,)).fetchone()
            seq = int(row[0]) if row else 1
            db.execute(self.sql.insert_reply, reply_row(reply, seq))
        return reply.model_copy(update={"seq": seq})

    def record_definition(self, record: DefinitionRecord) -> bool:
        if record.definition_hash in self._recorded:
            return False
        row = definition_row(record)
        with self._tx() as db:
            added = db.execute(self.sql.insert_definition, (
                *row, *self.sql.documented(self.sql.definition_doc, row[3]))).rowcount == 1
        self._recorded.add(record.definition_hash)
        return added
