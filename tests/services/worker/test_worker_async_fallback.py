"""``fsm worker --async --store-on-loop`` whose store cannot open its async pool (here the
server refuses the pool's connection: the database role may hold one connection, and the
synchronous pool holds it) says so in one line, keeps the steps in its threads, and
drives every run to its end."""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fleetkit import run_until

from fsm import ADVANCE, Action, Engine, ToolContext, ToolSpec, define_workflow
from fsm.store.pg_session import Timeouts
from fsm.store.postgres import PostgresStore
from fsm.worker import WorkerConfig
from fsm.worker_async import AsyncWorker


def _stamp(args: Any, ctx: ToolContext) -> dict[str, Any]:
    return {"stamped": True}


SPEC = define_workflow(
    "stamping", transitions={"stamping": {"stamped": "done"}},
    tools_by_state={"stamping": ["stamp"]}, initial="stamping", terminal={"done"},
    tools=[ToolSpec("stamp", _stamp, "Stamp the form.")])


def stamper(view: Any) -> Action:
    if any(m.get("tool") == "stamp" and "result" in m for m in view.messages):
        return Action(tool=ADVANCE, args={"event": "stamped"})
    return Action(tool="stamp", args={})


@pytest.fixture
def one_connection_url(pg_url: str) -> Iterator[str]:
    """``pg_url`` as a role that may hold one connection to the server at a time."""
    role = f"fsm_one_{uuid.uuid4().hex[:10]}"
    parts = urllib.parse.urlsplit(pg_url)
    schema = urllib.parse.unquote(parts.query).split("search_path=")[1].split("&")[0]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
        admin.execute(f'GRANT ALL ON SCHEMA "{schema}" TO "{role}"')
    yield urllib.parse.urlunsplit(parts._replace(
        netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE usename = %s", (role,))
        admin.execute(f'DROP OWNED BY "{role}" CASCADE')
        admin.execute(f'DROP ROLE "{role}"')


def test_a_worker_whose_async_pool_cannot_open_keeps_to_its_threads(
        one_connection_url: str) -> None:
    store = PostgresStore(one_connection_url, pool_size=1, timeouts=Timeouts(connect=5.0))
    engine = Engine(SPEC, store, stamper)
    runs = [f"s{i}" for i in range(3)]
    for run_id in runs:
        engine.start("stamp it", run_id=run_id, drive=False,
                     meta={"workflow_ref": "test_worker_async_fallback:SPEC",
                           "policy": "test_worker_async_fallback:stamper"})
    lines: list[str] = []
    worker = AsyncWorker(store, WorkerConfig(poll_seconds=0.1, concurrency=3,
                                             store_on_loop=True), log=lines.append)
    try:
        raised = run_until(worker, lambda: all(store.load_run(r).status == "done"
                                               for r in runs), timeout=90)
        assert raised == []
        assert [store.load_run(r).status for r in runs] == ["done"] * 3
        stamps = [[e for e in store.events(r) if e.kind == "tool" and e.tool == "stamp"]
                  for r in runs]
    finally:
        store.close()
    assert all(len(s) == 1 for s in stamps), stamps
    cannot = [line for line in lines if "cannot open the store's async driver" in line]
    assert len(cannot) == 1 and "\n" not in cannot[0], lines
    assert "too many connections for role" in cannot[0], cannot
    started = [line for line in lines if "started (async" in line]
    assert len(started) == 1 and "steps in the threads" in started[0], started
