"""Shared fixtures: a fresh refund shop with the demo orders, its workflow, a store,
and an engine factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fsm import Engine, MemoryStore, WorkflowSpec
from fsm.store import SQLiteStore
from workflows.refund import Shop, build

#: ``server`` and ``no_model_env``, for the tests against the fake OpenAI server.
pytest_plugins = ["openai_fixtures"]


@pytest.fixture(autouse=True)
def close_connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every store and shop a test opens is closed when the test ends (Python 3.13 warns
    about a SQLite connection nobody closed, and warnings are errors here)."""
    opened: list[Any] = []
    for cls in (SQLiteStore, Shop):
        def init(self: Any, *args: Any, _original: Any = cls.__init__, **kwargs: Any) -> None:
            _original(self, *args, **kwargs)
            opened.append(self)

        monkeypatch.setattr(cls, "__init__", init)
    yield opened
    for obj in reversed(opened):
        obj.close()


@pytest.fixture
def shop() -> Iterator[Shop]:
    """The fake shop on its own in-memory database, seeded with A-1001..A-1004."""
    with Shop() as s:
        yield s.seed_demo()


@pytest.fixture
def spec(shop: Shop) -> WorkflowSpec:
    """The refund workflow bound to ``shop``."""
    return build(shop)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def make_engine(spec: WorkflowSpec, store: MemoryStore) -> Callable[..., Engine]:
    """``make_engine(policy, **options)``: an engine on ``spec`` and ``store``."""

    def make(policy: Any = None, **options: Any) -> Engine:
        return Engine(spec, store, policy, **options)

    return make
