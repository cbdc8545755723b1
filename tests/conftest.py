"""Shared fixtures: a fresh refund shop with the demo orders, its workflow, a store,
and an engine factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fsm import Engine, MemoryStore, WorkflowSpec
from workflows.refund import Shop, build

#: ``server`` and ``no_model_env``, for the tests against the fake OpenAI server.
pytest_plugins = ["openai_fixtures"]


@pytest.fixture
def shop() -> Iterator[Shop]:
    """The fake shop on its own in-memory database, seeded with A-1001..A-1004."""
    s = Shop().seed_demo()
    yield s
    s._db.close()


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
