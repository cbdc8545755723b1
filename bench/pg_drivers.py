"""Benchmark: psycopg's two drivers under many tasks of one event loop, per step.

A step-shaped unit of database work (a transaction of two reads and a pipeline of four
statements, then a read on a second connection) is run by ``--tasks`` asyncio tasks,
``--steps`` times each with a nap between, three ways, in one run on one server:

- ``threads``: the synchronous pool in a 4-thread executor (``fsm worker --async``);
- ``async``: psycopg's async pool, awaited by the task;
- ``bridged``: the same async pool, reached from synchronous code in a greenlet on the
  loop (:mod:`fsm._bridge`, ``--store-on-loop``).

It prints, for each, the process's CPU per step and the kernel's share of it: what the
drivers cost, without fsm's own work.

    python bench/pg_drivers.py            # FSM_TEST_DATABASE_URL, else a throwaway server
    python bench/pg_drivers.py --db postgresql://... --tasks 1000

It only reads: nothing is created on the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from psycopg_pool import AsyncConnectionPool, ConnectionPool  # noqa: E402

from fsm._bridge import await_, entered, run_bridged  # noqa: E402

WAYS = ("threads", "async", "bridged")


def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime


def step_threads(pool: ConnectionPool[Any]) -> None:
    with pool.connection() as c, c.transaction():
        c.execute("SELECT 1").fetchone()
        c.execute("SELECT 2").fetchone()
        with c.pipeline(), c.cursor() as cur:
            for i in range(4):
                cur.execute("SELECT %s", (i,))
    with pool.connection() as c:
        c.execute("SELECT 3").fetchall()


async def step_async(pool: AsyncConnectionPool[Any]) -> None:
    async with pool.connection() as c, c.transaction():
        await (await c.execute("SELECT 1")).fetchone()
        await (await c.execute("SELECT 2")).fetchone()
        async with c.pipeline(), c.cursor() as cur:
            for i in range(4):
                await cur.execute("SELECT %s", (i,))
    async with pool.connection() as c:
        await (await c.execute("SELECT 3")).fetchall()


def step_bridged(pool: AsyncConnectionPool[Any]) -> None:
    with entered(pool.connection()) as c, entered(c.transaction()):
        await_(await_(c.execute("SELECT 1")).fetchone())
        await_(await_(c.execute("SELECT 2")).fetchone())
        with entered(c.pipeline()), entered(c.cursor()) as cur:
            for i in range(4):
                await_(cur.execute("SELECT %s", (i,)))
    with entered(pool.connection()) as c:
        await_(await_(c.execute("SELECT 3")).fetchall())


async def measure(url: str, way: str, tasks: int, steps: int, nap: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sync_pool: ConnectionPool[Any] | None = None
    async_pool: AsyncConnectionPool[Any] | None = None
    executor = ThreadPoolExecutor(4)
    if way == "threads":
        sync_pool = ConnectionPool(url, min_size=10, max_size=10, open=True)
        sync_pool.wait()
    else:
        async_pool = AsyncConnectionPool(url, min_size=10, max_size=10, open=False)
        await async_pool.open(wait=True)

    async def one() -> None:
        for _ in range(steps):
            await asyncio.sleep(nap)
            if sync_pool is not None:
                await loop.run_in_executor(executor, step_threads, sync_pool)
            elif way == "async":
                assert async_pool is not None
                await step_async(async_pool)
            else:
                await run_bridged(executor, step_bridged, async_pool)

    try:
        (cpu0, kernel0), t0 = _cpu(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(tasks)))
        (cpu1, kernel1), t1 = _cpu(), time.perf_counter()
    finally:
        if sync_pool is not None:
            sync_pool.close()
        if async_pool is not None:
            await async_pool.close()
        executor.shutdown()
    n = tasks * steps
    return {"way": way, "tasks": tasks, "steps": n, "seconds": round(t1 - t0, 2),
            "cpu_ms_per_step": round((cpu1 - cpu0) * 1000 / n, 3),
            "kernel_share": round((kernel1 - kernel0) / (cpu1 - cpu0), 3)}


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    """``url``, else FSM_TEST_DATABASE_URL, else a throwaway embedded server (the steps
    only read: nothing is created on the server)."""
    url = url or os.environ.get("FSM_TEST_DATABASE_URL")
    if url is not None:
        yield url
        return
    from workflows.refund.fleet import throwaway_postgres

    with throwaway_postgres() as embedded:
        yield embedded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="a postgresql:// URL (default: FSM_TEST_DATABASE_URL, "
                                 "else a throwaway embedded server)")
    ap.add_argument("--tasks", type=int, default=1000, help="tasks at once")
    ap.add_argument("--steps", type=int, default=10, help="steps of each task")
    ap.add_argument("--nap", type=float, default=0.2, help="seconds between a task's steps")
    ap.add_argument("--json-out", help="also write the figures here")
    args = ap.parse_args(argv)
    rows = []
    with _server(args.db) as url:
        for way in WAYS:
            row = asyncio.run(measure(url, way, args.tasks, args.steps, args.nap))
            rows.append(row)
            print(f"{way:8} {row['tasks']} tasks: {row['cpu_ms_per_step']} ms CPU per step "
                  f"({row['kernel_share']:.0%} in the kernel), {row['seconds']} s",
                  flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"rows": rows, "cpus": os.cpu_count()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
