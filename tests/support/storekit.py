"""The store of each kind, as one fixture: a test module that imports ``store`` runs
each of its tests on the memory store, a SQLite file and a fresh PostgreSQL schema
(the ``postgres`` id marks the last for ``-m "not postgres"``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm import MemoryStore, SQLiteStore, Store
from fsm.store import open_store

STORES = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(str(tmp_path / "runs.db"))
    else:
        s = open_store(request.getfixturevalue("pg_url"))
    yield s
    s.close()
