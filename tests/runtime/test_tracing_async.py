"""OpenTelemetry traces of runs driven from an event loop (``AsyncEngine``): each run's
resumptions share one context, so a span a step opens before its model is asked is the
current span, and is closed, in the resumption after the answer, whichever thread or
greenlet that runs on; OpenTelemetry reports no context detached out of order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fsm import AsyncEngine, SQLiteStore
from fsm.observability.otel import Tracing, run_context
from fsm.policy import View
from fsm.store.base import Store
from fsm.store.postgres import PostgresStore
from workflows.refund import build, clerk
from workflows.refund.shop import PostgresShop, Shop

SMALL = "Order A-1001: it arrived broken, please refund it"
#: Small refunds of the demo shop, each its customer's.
ORDERS = [("A-1001", "asha"), ("A-1004", "asha"), ("A-1005", "dev")]


#: The span current while each policy call ran.
SEEN: list[str] = []


async def async_clerk(view: View) -> Any:
    await asyncio.sleep(0.001)  # the loop runs other work between a step's two halves
    SEEN.append(getattr(trace.get_current_span(), "name", "none"))
    return clerk(view)


def sync_clerk(view: View) -> Any:
    SEEN.append(getattr(trace.get_current_span(), "name", "none"))
    return clerk(view)


@pytest.fixture(params=["sqlite", "postgres-on-loop"])
def desk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Any, bool]]:
    if request.param == "sqlite":
        db = str(tmp_path / "runs.db")
        store: Store = SQLiteStore(db)
        shop: Any = Shop(db)
    else:
        url = request.getfixturevalue("pg_url")
        store, shop = PostgresStore(url), PostgresShop(url)
    shop.seed_demo()
    try:
        yield store, shop, request.param != "sqlite"
    finally:
        store.close()
        shop.close()


@pytest.mark.parametrize("policy", [async_clerk, sync_clerk], ids=["async", "sync"])
def test_runs_driven_from_the_loop_nest_their_spans_and_detach_in_order(
        desk: tuple[Store, Any, bool], policy: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Each policy call runs with its chat span current, as under the synchronous engine."""
    store, shop, on_loop = desk
    SEEN.clear()
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))

    async def main() -> list[Any]:
        async with AsyncEngine(build(shop), store, policy, threads=4,
                               store_on_loop=on_loop, hooks=[Tracing(provider)]) as engine:
            return list(await asyncio.gather(*[
                engine.start(SMALL.replace("A-1001", order), user=user, run_id=f"r{i}")
                for i, (order, user) in enumerate(ORDERS)]))

    with caplog.at_level(logging.ERROR):
        runs = asyncio.run(main())
    provider.shutdown()
    assert [r.status for r in runs] == ["done"] * len(ORDERS)
    assert not [r for r in caplog.records if "detach" in r.getMessage()], \
        [r.getMessage() for r in caplog.records]
    assert SEEN and all(name.startswith("chat ") for name in SEEN), SEEN
    finished = spans.get_finished_spans()
    for i in range(len(ORDERS)):
        root = run_context(f"r{i}")
        mine = [s for s in finished if s.context.trace_id == root.trace_id]
        [segment] = [s for s in mine if s.name == "invoke_workflow refund"]
        chats = [s for s in mine if s.name.startswith("chat ")]
        tools = [s for s in mine if s.name.startswith("execute_tool ")]
        assert chats and tools
        assert all(s.parent is not None and s.parent.span_id == segment.context.span_id
                   for s in chats + tools), [(s.name, s.parent) for s in chats + tools]
