"""Fixtures and a check for tests that drive runs against the fake OpenAI server.

Registered for the whole suite by ``tests/conftest.py``; ``server`` starts a fresh
:class:`~fake_openai.FakeOpenAI` on 127.0.0.1; ``make_policy(**kw)`` builds an
:class:`OpenAIPolicy` on the refund ``spec`` aimed at it (closed afterwards), whose
backoff sleeps are recorded in ``sleeps`` instead of slept. ``no_model_env`` is not autouse: a
module whose results must not depend on the caller's model settings opts in with
``pytestmark = pytest.mark.usefixtures("no_model_env")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from fsm import MemoryStore, WorkflowSpec, view_at
from fsm.adapters import OpenAIPolicy, encode
from fsm.adapters.recorded import sent_body

#: The environment variables an :class:`OpenAIPolicy` or the price table reads.
MODEL_ENV = ("OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "FSM_PRICES",
             "FSM_TOOL_CHOICE")


@pytest.fixture
def no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset the model settings of the environment the tests run in."""
    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A fake OpenAI-compatible server, scripted by the test; stopped afterwards."""
    with FakeOpenAI() as s:
        yield s


def assert_show_matches_server(spec: WorkflowSpec, store: MemoryStore, run_id: str,
                               policy: OpenAIPolicy, sent: list[bytes]) -> None:
    """The request of each step, rebuilt from the store as ``fsm show --request`` does,
    equals the last request the server got for that step (after any fallback)."""
    events = store.events(run_id)
    steps = [e.step for e in events if e.kind == "policy"]
    assert len(steps) == len({*steps}) and len(sent) >= len(steps)
    last_of_step = _last_per_step(events, sent)
    for step in steps:
        view = view_at(spec, store, run_id, step)
        assert view is not None
        assert encode(sent_body(view, events)) == last_of_step[step], f"step {step} differs"


def _last_per_step(events: list[Any], sent: list[bytes]) -> dict[int, bytes]:
    """The last request sent in each step: each policy event counts its attempts."""
    out, at = {}, 0
    for e in events:
        if e.kind == "policy":
            at += e.detail["calls"]
            out[e.step] = sent[at - 1]
    assert at == len(sent), f"the log counts {at} attempts, the server got {len(sent)}"
    return out


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_policy(spec: WorkflowSpec, server: FakeOpenAI,
                sleeps: list[float]) -> Iterator[Callable[..., OpenAIPolicy]]:
    made: list[OpenAIPolicy] = []

    def make(**kw: Any) -> OpenAIPolicy:
        kw.setdefault("base_url", server.base_url)
        kw.setdefault("api_key", "sk-test")
        kw.setdefault("sleep", sleeps.append)
        policy = OpenAIPolicy(spec, kw.pop("model", "gpt-4o-mini"), **kw)
        made.append(policy)
        return policy

    yield make
    for p in made:
        p.close()
