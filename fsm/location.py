"""Where the database is when a command or an API call does not say."""

from __future__ import annotations

import os

#: The database used when neither ``--db`` nor ``FSM_DB`` names one.
DEFAULT_DB = "fsm.db"


def default_db_path(db: str | None = None) -> str:
    """``db``, else ``$FSM_DB``, else ``fsm.db`` in the current directory."""
    return db or os.environ.get("FSM_DB") or DEFAULT_DB
