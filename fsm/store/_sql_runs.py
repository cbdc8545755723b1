"""The runs, effects, approvals, definitions and customers' replies of both SQL stores,
written once over a :class:`~fsm.store.database.Database` (its dialect spells the
statements of :mod:`fsm.store._statements`): one role object each."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Sequence
from typing import Any

from fsm.errors import RowDamaged, RunError, StoreError
from fsm.records import (
    Approval,
    DefinitionCount,
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
from fsm.signing import Keys
from fsm.store._columns import (
    APPROVAL_COLUMNS,
    DEFINITION_COLUMNS,
    EFFECT_COLUMNS,
    EVENT_COLUMNS,
    REPLY_COLUMNS,
    UNREADABLE,
    definition_from,
    definition_row,
    reply_from,
    reply_row,
    runs_where,
)
from fsm.store._statements import Head, commit_writes
from fsm.store.base import labels
from fsm.store.database import Database, Role
from fsm.store.lease import check_fence
from fsm.store.page import Page, read_rows

__all__ = ["SQLApprovals", "SQLConversations", "SQLDefinitions", "SQLEffects", "SQLRuns",
           "parse_many"]


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


class _Writer(Role):
    """A role that writes a run's row: it signs the head the write leaves, and fences."""

    def _sign(self, db: Any, run_id: str, base: Head, count: int, head: str, *,
              trusted: bool, public: bool) -> str:
        """The signature of the head a commit leaves (see :meth:`Keys.extend`): Ed25519
        when the run stops or waits (``public``), else a MAC."""
        def hash_at(seq: int) -> str | None:
            row = db.execute(f"SELECT hash FROM events WHERE run_id = {self.mark} AND "
                             f"seq = {self.mark}", (run_id, seq)).fetchone()
            return None if row is None else str(row[0])

        return self.db.keys.extend(run_id, (base.log_count, base.log_head, base.log_sig),
                                   count, head, trusted=trusted, hash_at=hash_at,
                                   public=public)

    def _fence(self, db: Any, run_id: str, owner: str | None, version: int | None) -> None:
        row = db.execute(self.sql.fence_read, (run_id,)).fetchone()
        check_fence(run_id, row and (row[0], row[3]), owner=owner, version=version)


class SQLRuns(_Writer):
    """Run rows, transcripts, views, the hash-chained log and artifacts: a step's commit
    writes them (and the other roles' rows it carries) in one transaction."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.location = db.location
        self.keys: Keys = db.keys

    def create_run(self, run: RunState, commit: StepCommit | None = None) -> RunState:
        commit = commit or StepCommit(run=run, expected_version=0)
        with self.db.serial():
            try:
                with self.db.tx() as db:
                    if db.execute(self.sql.insert_run, (
                            run.run_id, run.workflow, run.status, run.created_at,
                            run.updated_at, run.definition_hash,
                            run.forked_from.run_id if run.forked_from else None
                            )).rowcount != 1:
                        raise RunError(f"run {run.run_id!r} already exists", run_id=run.run_id)
                    return self._apply(db, commit, fence=False)
            except BaseException:
                self.db.heads.pop(run.run_id, None)
                raise

    def commit(self, commit: StepCommit) -> RunState:
        with self.db.serial():
            try:
                with self.db.tx() as db:
                    return self._apply(db, commit)
            except BaseException:
                self.db.heads.pop(commit.run.run_id, None)
                raise

    def _apply(self, db: Any, c: StepCommit, *, fence: bool = True) -> RunState:
        run_id = c.run.run_id
        owner = c.owner if fence else None
        # The run row as this store's last commit of it left it, while the run is still at
        # that version (every write of the run row adds one): the commit then needs no
        # read first, and the UPDATE's own condition is the check.
        known = self.db.heads.get(run_id)
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
        self.db.send(db, writes, locked)
        self.db.remember(run_id, Head(new.version, count, last, new.status, sig))
        return new

    def _stale(self, db: Any, run_id: str, owner: str | None, version: int | None) -> Exception:
        self._fence(db, run_id, owner, version)
        return StoreError(f"database {self.db.where()}: the row of run {run_id!r} changed "
                          "during its commit")

    def load_run(self, run_id: str) -> RunState:
        rows = self._read(f"SELECT snapshot, version FROM runs WHERE run_id = {self.mark}",
                          (run_id,))
        if not rows:
            raise self.not_found(run_id)
        return self._run(rows[0], run_id)

    def list_runs(self, status: str | None = None, *, workflow: str | None = None,
                  limit: int | None = None, offset: int = 0, newest_first: bool = False,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[RunState]:
        m = self.mark
        where, args = runs_where(status, workflow, m)
        order = "DESC" if newest_first else "ASC"
        sql = (f"SELECT snapshot, version, run_id FROM runs{where} "
               f"ORDER BY created_at {order}, run_id {order} LIMIT {m} OFFSET {m}")
        args += [self.dialect.no_limit if limit is None else limit, offset]
        return read_rows(self._read(sql, tuple(args)), lambda r: self._run(r, r[2]),
                         skip_damaged=skip_damaged, damaged=damaged, what="list_runs")

    def messages(self, run_id: str, start: int = 0, end: int | None = None
                 ) -> list[dict[str, Any]]:
        m = self.mark
        bodies = self.db.column(f"SELECT body FROM messages WHERE run_id = {m} AND idx >= {m} "
                              f"AND idx < {m} ORDER BY idx",
                              (run_id, start,
                               end if end is not None else self.dialect.max_index))
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
        m = self.mark
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
                          f"WHERE run_id = {self.mark} ORDER BY seq", (run_id,))
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

    def artifact(self, sha256: str) -> str | None:
        rows = self._read(f"SELECT content FROM artifacts WHERE sha256 = {self.mark}",
                          (sha256,))
        return str(rows[0][0]) if rows else None

    def snapshot_text(self, run_id: str) -> str:
        return str(self._run_row("snapshot", run_id)[0])

    def run_columns(self, run_id: str) -> tuple[str, str]:
        row = self._run_row("status, workflow", run_id)
        return str(row[0]), str(row[1])

    def log_head(self, run_id: str) -> tuple[int, str]:
        row = self._run_row("log_count, log_head", run_id)
        return int(row[0]), str(row[1])

    def signed_head(self, run_id: str) -> tuple[int, str, str | None]:
        row = self._run_row("log_count, log_head, log_sig", run_id)
        return int(row[0]), str(row[1]), (None if row[2] is None else str(row[2]))

    def forks_of(self, run_id: str) -> list[str]:
        return [str(r[0]) for r in self._read(
            f"SELECT run_id FROM runs WHERE parent_run_id = {self.mark} ORDER BY created_at, "
            "run_id", (run_id,))]


class SQLEffects(_Writer):
    """Write intents and their results: the claim of a write, and its STARTED row."""

    def claim_effect(self, effect: Effect, *, owner: str | None = None,
                     version: int | None = None, claim: Event | None = None) -> Effect | None:
        with self.db.serial():  # as in commit(): the kept log head is right again before others
            try:
                with self.db.tx() as db:
                    claimed = self._claim(db, effect, owner, version, claim)
            except _ClaimedBefore:
                claimed = False
            except BaseException:
                self.db.heads.pop(effect.run_id, None)
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
            self.db.remember(run_id, Head(row[0] + 1, row[1] + 1, event.hash, row[4], sig))
        return True

    def effect(self, key: str) -> Effect | None:
        rows = self._read(f"SELECT {', '.join(EFFECT_COLUMNS)} FROM effects "
                          f"WHERE key = {self.mark}", (key,))
        return self._effect(rows[0]) if rows else None

    def effects(self, run_id: str) -> list[Effect]:
        rows = self._read(f"SELECT {', '.join(EFFECT_COLUMNS)} FROM effects "
                          f"WHERE run_id = {self.mark} ORDER BY key", (run_id,))
        return [self._effect(r) for r in rows]

    def _effect(self, row: Sequence[Any]) -> Effect:
        d = dict(zip(EFFECT_COLUMNS, row, strict=True))
        try:
            d["args"] = json.loads(d["args"])
            d["result"] = json.loads(d["result"]) if d["result"] is not None else None
            return Effect.model_validate(d)
        except UNREADABLE as exc:
            raise self._damaged("effects", d.get("run_id"), exc, key=d.get("key")) from None


class SQLApprovals(Role):
    """Requests for a person's decision, and the decisions (a commit writes both)."""

    def approvals(self, run_id: str | None = None, *, pending_only: bool = True,
                  skip_damaged: bool = False,
                  damaged: list[RowDamaged] | None = None) -> Page[Approval]:
        sql = f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals WHERE 1 = 1"
        args: list[Any] = []
        if run_id is not None:
            sql += f" AND run_id = {self.mark}"
            args.append(run_id)
        if pending_only:
            sql += " AND decision IS NULL"
        rows = self._read(sql + " ORDER BY requested_at, approval_id", tuple(args))
        return read_rows(rows, lambda r: self._approval(dict(zip(APPROVAL_COLUMNS, r,
                                                                 strict=True))),
                         skip_damaged=skip_damaged, damaged=damaged, what="approvals")

    def approval(self, approval_id: str) -> Approval | None:
        rows = self._read(f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals "
                          f"WHERE approval_id = {self.mark}", (approval_id,))
        return self._approval(dict(zip(APPROVAL_COLUMNS, rows[0], strict=True))) if rows else None


class SQLDefinitions(Role):
    """Workflow definitions by hash, and the runs on each."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        #: Hashes of the definitions this process knows are recorded (none is ever removed).
        self._recorded: set[str] = set()

    def record_definition(self, record: DefinitionRecord) -> bool:
        if record.definition_hash in self._recorded:
            return False
        row = definition_row(record)
        with self.db.tx() as db:
            added = db.execute(self.sql.insert_definition, (
                *row, *self.sql.documented(self.sql.definition_doc, row[3]))).rowcount == 1
        self._recorded.add(record.definition_hash)
        return added

    def definition(self, definition_hash: str) -> DefinitionRecord | None:
        rows = self._read(f"SELECT {', '.join(DEFINITION_COLUMNS)} FROM definitions "
                          f"WHERE definition_hash = {self.mark}", (definition_hash,))
        return definition_from(rows[0]) if rows else None

    def definitions(self, workflow: str | None = None) -> list[DefinitionRecord]:
        sql = f"SELECT {', '.join(DEFINITION_COLUMNS)} FROM definitions"
        args: tuple[Any, ...] = ()
        if workflow is not None:
            sql += f" WHERE workflow = {self.mark}"
            args = (workflow,)
        return [definition_from(r) for r in
                self._read(f"{sql} ORDER BY {self.dialect.definition_order}", args)]

    def definition_counts(self, workflow: str | None = None,
                          status: str | None = None) -> list[DefinitionCount]:
        where, args = runs_where(status, workflow, self.mark)
        rows = self._read("SELECT workflow, definition_hash, status, COUNT(*), MIN(run_id) "
                          f"FROM runs{where} GROUP BY workflow, definition_hash, status "
                          "ORDER BY workflow, definition_hash, status", tuple(args))
        return [DefinitionCount(str(w), str(h), str(st), int(n), str(sample))
                for w, h, st, n, sample in rows]

    def version_labels(self, hashes: Iterable[str]) -> dict[str, str]:
        return labels(hashes, self.definition)

    def definition_column(self, run_id: str) -> str:
        return str(self._run_row("definition_hash", run_id)[0])


class SQLConversations(_Writer):
    """Customers' replies, kept the moment they arrive, and the runs' reply tokens."""

    def add_reply(self, reply: Reply, *, version: int) -> Reply:
        with self.db.tx() as db:
            # The run row's lock orders the replies of one run: seq is their commit order.
            self._fence(db, reply.run_id, None, version)
            row = db.execute(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM replies "
                             f"WHERE run_id = {self.mark}", (reply.run_id,)).fetchone()
            seq = int(row[0]) if row else 1
            db.execute(self.sql.insert_reply, reply_row(reply, seq))
        return reply.model_copy(update={"seq": seq})

    def replies(self, run_id: str, *, unread_only: bool = False) -> list[Reply]:
        sql = (f"SELECT {', '.join(REPLY_COLUMNS)} FROM replies WHERE run_id = {self.mark}"
               + (" AND read_step IS NULL" if unread_only else "") + " ORDER BY seq")
        return [reply_from(tuple(r)) for r in self._read(sql, (run_id,))]

    def reply_token(self, run_id: str) -> str | None:
        rows = self._read(f"SELECT token_hash FROM reply_tokens WHERE run_id = {self.mark}",
                          (run_id,))
        return str(rows[0][0]) if rows else None
