"""How long a PostgreSQL session of fsm may wait, and its errors in one line.

Every session fsm opens sets ``statement_timeout``, ``lock_timeout`` (which bounds a wait
for an advisory lock too) and ``idle_in_transaction_session_timeout``: no statement
runs for ever, no wait for a lock lasts for ever, and a process frozen inside a
transaction (SIGSTOP, a debugger) loses its session, and with it its locks, instead of
stalling everyone. The options go before the database URL's own ``options``, so a URL
that sets one of them (``?options=-c%20lock_timeout%3D2s``) wins.

psycopg's errors become :class:`~fsm.errors.StoreError`, or
:class:`~fsm.errors.StoreUnavailable` when the server or the network failed for now (a
lost connection, a timeout, a conflict): the message says what was waited for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fsm.errors import StoreError, StoreUnavailable, is_transient
from fsm.settings import Settings


@dataclass(frozen=True)
class Timeouts:
    """Seconds a PostgreSQL session waits (0: no limit)."""

    #: A statement runs at most this long (``statement_timeout``).
    statement: float = 30.0
    #: A statement waits at most this long for a row lock or an advisory lock
    #: (``lock_timeout``).
    lock: float = 10.0
    #: The server ends a session idle inside a transaction for this long
    #: (``idle_in_transaction_session_timeout``): the locks of a frozen process are freed.
    idle_in_transaction: float = 60.0
    #: Connecting, and waiting for a free connection of the pool.
    connect: float = 10.0
    #: A migration of the schema waits this long for another process's migration; the
    #: migrating session is ended by the server when it idles longer than half of it.
    migration: float = 30.0
    #: The fleet's sweep lock is a session of its own that the server ends when it is idle
    #: this long (``idle_session_timeout``), so a frozen sweeper gives the lock back.
    sweep: float = 60.0

    @classmethod
    def of(cls, settings: Settings) -> Timeouts:
        """The timeouts ``settings`` give (``FSM_PG_STATEMENT_TIMEOUT``,
        ``FSM_PG_LOCK_TIMEOUT``, ``FSM_PG_IDLE_TIMEOUT``, ``FSM_PG_CONNECT_TIMEOUT``,
        ``FSM_PG_MIGRATION_TIMEOUT`` and ``FSM_PG_SWEEP_TIMEOUT``)."""
        return cls(statement=settings.pg_statement_timeout, lock=settings.pg_lock_timeout,
                   idle_in_transaction=settings.pg_idle_timeout,
                   connect=settings.pg_connect_timeout,
                   migration=settings.pg_migration_timeout, sweep=settings.pg_sweep_timeout)

    def options(self, url_options: str = "", **more: float) -> str:
        """The libpq ``options`` of a session: these timeouts (and ``more`` settings, in
        seconds), then the URL's own options, which win."""
        settings = {"statement_timeout": self.statement, "lock_timeout": self.lock,
                    "idle_in_transaction_session_timeout": self.idle_in_transaction, **more}
        mine = " ".join(f"-c {name}={_ms(value)}" for name, value in settings.items())
        return f"{mine} {url_options}".strip()


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def url_options(url: str) -> str:
    """The ``options`` a database URL gives (empty when none)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        return str(conninfo_to_dict(url).get("options") or "")
    except Exception:  # an unreadable URL is reported where it is opened
        return ""


def line(exc: BaseException) -> str:
    """libpq's message on one line (it puts a hint on a line of its own)."""
    return "; ".join(part.strip() for part in str(exc).splitlines() if part.strip()) or \
        type(exc).__name__


def waited(exc: BaseException, t: Timeouts) -> str:
    """What a timed-out session waited for, in words (empty when it did not time out)."""
    code = getattr(getattr(exc, "diag", None), "sqlstate", None) or ""
    name = type(exc).__name__
    if code == "55P03" or name == "LockNotAvailable":
        return (f"waited {t.lock:g}s for a lock another session holds (lock_timeout); "
                "find the holder in pg_locks")
    if code == "57014" and "statement timeout" in str(exc):
        return f"a statement ran longer than {t.statement:g}s (statement_timeout)"
    if name == "PoolTimeout":
        return f"waited {t.connect:g}s for a free connection of the pool"
    if code == "25P03" or name == "IdleInTransactionSessionTimeout":
        return (f"this session idled in a transaction for more than "
                f"{t.idle_in_transaction:g}s and the server ended it")
    return ""


def failure(where: str, exc: BaseException, t: Timeouts, tail: str = "") -> StoreError:
    """psycopg's ``exc`` as one line: :class:`StoreUnavailable` for a failure of the
    server or the network (try again), else :class:`StoreError`."""
    if is_transient(exc):
        what = waited(exc, t)
        said = f"{what} ({line(exc)})" if what else f"unavailable: {line(exc)}"
        return StoreUnavailable(f"{where}: {said}{tail}; try again")
    return StoreError(f"{where}: {line(exc)}{tail}")


def session_kwargs(url: str, t: Timeouts, application_name: str,
                   **more: float) -> dict[str, Any]:
    """The connection arguments of an fsm session on ``url``."""
    return {"autocommit": True, "application_name": application_name,
            "options": t.options(url_options(url), **more)}
