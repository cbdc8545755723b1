"""The PostgreSQL store's async pool (``open_async``): one per event loop, counted by its
openers, closed by the last of them, and reached by bridged code on that loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

import fsm.store.postgres as pg
from fsm._bridge import run_bridged
from fsm.store.postgres import PostgresStore


def _backend(store: PostgresStore) -> int:
    return int(store.db.read("SELECT pg_backend_pid()")[0][0])


def test_each_opening_is_counted_and_the_last_close_closes_the_pool(pg_url: str) -> None:
    store = PostgresStore(pg_url, pool_size=2)

    async def main() -> list[Any]:
        seen: list[Any] = [store.admission()]
        assert await store.open_async() and await store.open_async()
        seen.append(store.admission())
        # Bridged code on this loop reads through the async pool, not the synchronous one.
        synchronous = _backend(store)
        bridged = await run_bridged(None, _backend, store)
        pool = next(iter(store.db._async_pools.values())).pool
        async with pool.connection() as aconn:
            mine = (await (await aconn.execute("SELECT pg_backend_pid()")).fetchone())[0]
        seen.append(bridged != synchronous and bridged == mine)
        await store.close_async()
        seen.append((store.admission() is not None, pool.closed))
        await store.close_async()
        seen.append((store.admission(), pool.closed))
        return seen

    try:
        before, during, through_async, after_one, after_both = asyncio.run(main())
    finally:
        store.close()
    assert before is None and isinstance(during, asyncio.Semaphore)
    assert through_async, "bridged code did not read through the loop's async pool"
    assert after_one == (True, False)
    assert after_both == (None, True)


def test_two_openings_at_once_keep_the_pool_while_one_of_them_closes(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tasks open at once; each makes a pool, and the later one finds the earlier's
    and closes its own spare. The earlier task closes while that spare is closing: the
    later one still holds the loop's pool, and reaches the database through it."""
    made: list[AsyncConnectionPool[Any]] = []
    first_open = asyncio.Event()
    spare_closing = asyncio.Event()
    first_closed = asyncio.Event()

    class Held(AsyncConnectionPool):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

        async def open(self, *args: Any, **kwargs: Any) -> None:
            await super().open(*args, **kwargs)
            if self is made[1]:
                await first_open.wait()  # the first opener's pool is the loop's by now

        async def close(self, *args: Any, **kwargs: Any) -> None:
            if len(made) > 1 and self is made[1]:
                spare_closing.set()
                await asyncio.wait_for(first_closed.wait(), 10)
            await super().close(*args, **kwargs)

    monkeypatch.setattr(pg, "AsyncConnectionPool", Held)
    store = PostgresStore(pg_url, pool_size=2)

    async def first() -> None:
        assert await store.open_async()
        first_open.set()
        await spare_closing.wait()
        await store.close_async()
        first_closed.set()

    async def second() -> tuple[bool, bool, int]:
        assert await store.open_async()
        held = store.admission() is not None
        pid = await run_bridged(None, _backend, store)
        still_open = not made[0].closed
        await store.close_async()
        return held, still_open, pid

    async def main() -> tuple[bool, bool, int]:
        _, result = await asyncio.wait_for(asyncio.gather(first(), second()), 30)
        assert store.admission() is None
        return result

    try:
        held, still_open, pid = asyncio.run(main())
    finally:
        store.close()
    assert len(made) == 2, "each opener made a pool"
    assert held, "the second opener lost the loop's pool while the first closed"
    assert still_open, "the loop's pool was closed while an opener still held it"
    assert pid > 0
    assert made[0].closed and made[1].closed
