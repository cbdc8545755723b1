"""The async OpenAI-compatible policy, through the SDK's async client, against a real local
HTTP server, driven by ``fsm.AsyncEngine``: the same requests, byte for byte, as the
synchronous policy sends; the same retries and failures, awaited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_openai import FakeOpenAI, call, error
from openai_fixtures import assert_show_matches_server
from refund_scripts import small_refund

from fsm import AsyncEngine, Engine, MemoryStore, WorkflowSpec
from fsm._bridge import is_async
from fsm.adapters import AsyncOpenAIPolicy, OpenAIPolicy
from fsm.records import verify_chain
from fsm.testing import state_path
from workflows.refund import Shop, build

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
HAPPY = small_refund()

pytestmark = pytest.mark.usefixtures("no_model_env")


def _policy(spec: WorkflowSpec, server: FakeOpenAI, waits: list[float],
            **kw: Any) -> AsyncOpenAIPolicy:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return AsyncOpenAIPolicy(spec, "gpt-4o-mini", base_url=server.base_url,
                             api_key="sk-test", sleep_async=sleep, **kw)


def _drive(spec: WorkflowSpec, store: MemoryStore, policy: AsyncOpenAIPolicy,
           run_id: str = "r1") -> Any:
    async def main() -> Any:
        try:
            async with AsyncEngine(spec, store, policy) as engine:
                return await engine.start(GOAL, user="asha", run_id=run_id)
        finally:
            await policy.aclose()

    return asyncio.run(main())


def test_a_refund_through_the_async_client_sends_what_the_sync_policy_sends(
        spec: WorkflowSpec, shop: Shop, server: FakeOpenAI) -> None:
    server.script(*[call(name, args) for name, args in HAPPY])
    store = MemoryStore()
    policy = _policy(spec, server, [])
    assert is_async(policy)
    run = _drive(spec, store, policy)
    assert (run.status, run.state) == ("done", "done")
    assert [(r["order_id"], r["amount_paise"]) for r in shop.ledger()] == [("A-1001", 35000)]
    verify_chain(store.events("r1"))
    sent_async = [r.raw for r in server.chat]
    assert len(sent_async) == len(HAPPY)
    assert_show_matches_server(spec, store, "r1", policy, sent_async)

    # The synchronous policy, on a fresh shop, store and script, sends the same bytes.
    server.script(*[call(name, args) for name, args in HAPPY])
    fresh = build(Shop().seed_demo())
    with OpenAIPolicy(fresh, "gpt-4o-mini", base_url=server.base_url,
                      api_key="sk-test") as sync_policy:
        other = MemoryStore()
        assert Engine(fresh, other, sync_policy).start(GOAL, user="asha",
                                                       run_id="r1").status == "done"
    assert [r.raw for r in server.chat][len(HAPPY):] == sent_async
    assert state_path(other, "r1") == state_path(store, "r1")
    assert [(e.tokens, e.cost_micros, e.detail["calls"]) for e in store.events("r1")
            if e.kind == "policy"] == [(120, 27, 1)] * 7


def test_retries_are_awaited_and_every_attempt_counts(spec: WorkflowSpec,
                                                      server: FakeOpenAI) -> None:
    server.script(error(429, "rate limited", headers={"Retry-After": "7"}), error(503))
    server.script(*[call(name, args) for name, args in HAPPY])
    waits: list[float] = []
    store = MemoryStore()
    run = _drive(spec, store, _policy(spec, server, waits))
    assert run.status == "done"
    assert waits == [7.0, 1.0]  # the server's Retry-After, then the backoff
    first = next(e for e in store.events("r1") if e.kind == "policy")
    assert first.detail["calls"] == 3
    assert server.chat[0].raw == server.chat[1].raw == server.chat[2].raw


def test_a_server_that_stays_down_stops_the_run_as_model_unavailable(
        spec: WorkflowSpec, shop: Shop, server: FakeOpenAI) -> None:
    server.script(call(*HAPPY[0]), error(503, "overloaded"), error(500),
                  error(502, "bad gateway"))
    waits: list[float] = []
    store = MemoryStore()
    run = _drive(spec, store, _policy(spec, server, waits, max_retries=2))
    assert (run.status, run.state) == ("model_unavailable", "collecting")
    assert run.reason == ("model unavailable: 'gpt-4o-mini' at " + server.base_url +
                          " failed after 3 attempt(s): HTTP 502: bad gateway")
    assert waits == [0.5, 1.0] and shop.ledger() == []


def test_a_server_that_refuses_the_key_stops_the_run_at_once(
        spec: WorkflowSpec, server: FakeOpenAI) -> None:
    server.script(error(401, "invalid api key"))
    waits: list[float] = []
    store = MemoryStore()
    run = _drive(spec, store, _policy(spec, server, waits))
    assert run.status == "model_refused" and waits == [] and len(server.chat) == 1
    assert (run.reason or "").endswith("refused the request after 1 attempt(s): HTTP 401: "
                                       "invalid api key (check OPENAI_API_KEY)")
