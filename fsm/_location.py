"""Where the database is when a command or an API call does not say."""

from __future__ import annotations

#: The database used when neither ``--db`` nor ``FSM_DB`` names one.
DEFAULT_DB = "fsm.db"


def default_db_path(db: str | None = None) -> str:
    """``db``, else ``fsm.db`` in the current directory (the command line reads
    ``FSM_DB`` into :class:`fsm.settings.Settings` and passes it)."""
    return db or DEFAULT_DB
