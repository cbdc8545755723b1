"""The leases and the queue of both SQL stores, written once (the runs table is the queue).

Each write is one short transaction of the database's own, and a lease change locks the
run row first, as every writer of a run does.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from contextlib import AbstractContextManager

from fsm.errors import RunLocked, RunNotFound
from fsm.store.database import Role
from fsm.store.lease import Claimed, Lease, expiry, lease_held, this_host_prefix

__all__ = ["SQLLeases"]


class SQLLeases(Role):
    """Leases and the queue of runnable runs (the runs table)."""

    def acquire(self, run_id: str, owner: str, now: float, *, force: bool = False,
                ttl: float | None = None) -> str | None:
        m = self.mark
        with self.db.tx() as db:
            row = db.execute(f"SELECT lease_owner, lease_until FROM runs WHERE run_id = {m}"
                             f"{self.dialect.lock}", (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(run_id)
            held, until = row
            if held and held != owner and not force and lease_held(held, until, now):
                raise RunLocked(run_id, held)
            db.execute(f"UPDATE runs SET lease_owner = {m}, lease_at = {m}, lease_until = {m} "
                       f"WHERE run_id = {m}", (owner, now, expiry(now, ttl), run_id))
            return str(held) if held and held != owner else None

    def renew(self, run_id: str, owner: str, now: float, ttl: float) -> bool:
        m = self.mark
        with self.db.tx() as db:
            return bool(db.execute(f"UPDATE runs SET lease_until = {m} WHERE run_id = {m} "
                                   f"AND lease_owner = {m}", (now + ttl, run_id, owner)
                                   ).rowcount == 1)

    def release(self, run_id: str, owner: str) -> None:
        m = self.mark
        with self.db.tx() as db:
            db.execute("UPDATE runs SET lease_owner = NULL, lease_until = NULL "
                       f"WHERE run_id = {m} AND lease_owner = {m}", (run_id, owner))

    def lease(self, run_id: str) -> Lease | None:
        rows = self._read(f"SELECT lease_owner, lease_until FROM runs WHERE run_id = {self.mark}",
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
        d = self.dialect
        m = d.mark
        only = f" AND workflow IN ({d.marks(len(workflows))})" if workflows else ""
        if definitions is not None:
            only += f" AND definition_hash IN ({d.marks(len(definitions))})"
        with self.db.tx() as db:
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

    def subscribe(self, wake: threading.Event, stop: threading.Event) -> bool:
        return self.db.subscribe(wake, stop)

    def sweep_lock(self) -> AbstractContextManager[bool]:
        return self.db.sweep_lock()
