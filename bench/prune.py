"""Benchmark: ``fsm prune`` on a database of many runs, on SQLite (and PostgreSQL).

Builds the database quickly: a few real refund runs are driven by the engine (small
refunds that finish, large ones that wait for a person, runs handed over and closed at
the desk), then their rows are copied in SQL until there are ``--runs`` of them (copies
are not auditable: their hashes name the original run, which the prune does not read).
Nine in ten copies finished before the cut-off; the rest are recent or wait.

It then prunes what finished before the cut-off, in batches of ``--batch`` runs, while a
worker thread commits steps of a live run; and, on an identical copy, deletes the same
runs in one transaction (the baseline: what a prune without batches does). It prints
the bytes the database holds before and after (and after ``VACUUM`` on SQLite), the
time, the bytes a run takes, and the longest a worker's commit waited in each case.

    python bench/prune.py                      # 100,000 runs on SQLite
    python bench/prune.py --runs 2000 --quick  # a smoke run
    python bench/prune.py --pg postgresql://root@/bench?host=/var/run/postgresql
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsm import Engine, RunState, SQLiteStore
from fsm.records import StepCommit
from fsm.store import open_store
from fsm.store.base import Store
from fsm.store.prune import RUN_TABLES, prune
from workflows.refund import Shop, build, clerk

#: Template runs: six small refunds of orders of their own (they finish), a run handed
#: over and closed at the desk, and a large refund that waits for a person.
TEMPLATES = [(f"t-small-{i}", "small") for i in range(1, 7)] + [("t-desk-1", "desk"),
                                                                  ("t-large-1", "large")]
DAY = 86_400.0
#: Seconds between batches, as fsm prune waits by default.
PAUSE = 0.01
#: When the copies were made, and the cut-off: runs that finished before it are pruned.
NOW = 1_800_000_000.0
CUT = NOW - 30 * DAY

#: (table, columns whose text names the run, the column that must stay unique).
COPIED = {
    "messages": "run_id, idx, body",
    "views": "run_id, step, body",
    "events": ("run_id, seq, step, time, kind, state_before, state_after, tool, event, "
               "reason, cost_micros, tokens, reviewer, detail, prev_hash, hash"),
}


def templates(db: str) -> None:
    """Drive the template runs for real."""
    with SQLiteStore(db, synchronous="OFF") as store, Shop(db) as shop:
        spec = build(shop.seed_demo())
        for run_id, kind in TEMPLATES:
            if kind == "small":
                order = f"S-{run_id[-1]}00{run_id[-1]}"
                shop.add_order(order, "asha", f"mug-{run_id[-1]}", "mug", 30_000, 3)
                goal, user = f"Order {order}: the mug arrived cracked", "asha"
            elif kind == "desk":
                goal, user = "Order A-1003: the lamp flickers", "ravi"
            else:
                goal, user = "Order A-1002: the headphones stopped working", "ravi"
            engine = Engine(spec, store, clerk)
            engine.start(goal, user=user, run_id=run_id,
                         meta={"workflow_ref": "refund", "policy": "default"})
            if kind == "desk":
                engine.close_handover(run_id, "sam", "resolved", "phoned the customer")
        wanted = {"small": "done", "desk": "handed_over", "large": "awaiting_approval"}
        for run_id, kind in TEMPLATES:
            status = store.load_run(run_id).status
            assert status == wanted[kind], (run_id, status)


def _copy_sql(table: str, cols: str, k: str) -> str:
    """INSERT … SELECT of a run table's rows for copy number ``k`` (a SQL expression)."""
    picked = cols.replace("run_id", f"run_id || '-' || {k}", 1)
    return (f"INSERT INTO {table} ({cols}) SELECT {picked} FROM {table}, n "
            f"WHERE run_id LIKE 't-%'")


def copies_sqlite(db: str, copies: int) -> None:
    """Copy the templates' rows ``copies`` times, in SQL."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA synchronous = OFF")
    con.execute("CREATE TEMP TABLE n (k INTEGER PRIMARY KEY)")
    con.executemany("INSERT INTO n VALUES (?)", [(k,) for k in range(1, copies + 1)])
    with con:
        age = f"(CASE WHEN n.k % 10 = 0 THEN 0 ELSE 40 + n.k % 300 END) * {DAY}"
        con.execute(
            "INSERT INTO runs (run_id, workflow, status, version, snapshot, created_at, "
            "updated_at, lease_owner, lease_at, log_count, log_head, lease_until, "
            "definition_hash) SELECT run_id || '-' || n.k, workflow, status, version, "
            f"snapshot, {NOW} - {age} - 60, {NOW} - {age}, NULL, NULL, log_count, log_head, "
            "NULL, definition_hash "
            "FROM runs, n WHERE run_id LIKE 't-%'")
        for table, cols in COPIED.items():
            con.execute(_copy_sql(table, cols, "n.k"))
        con.execute(
            "INSERT INTO effects (key, run_id, step, tool, args, status, result, error, "
            "started_at, finished_at) SELECT key || '-' || n.k, run_id || '-' || n.k, step, "
            "tool, args, status, result, error, started_at, finished_at FROM effects, n "
            "WHERE run_id LIKE 't-%'")
        con.execute(
            "INSERT INTO approvals SELECT approval_id || '-' || n.k, run_id || '-' || n.k, "
            "step, tool, args, args_hash, run_version, requested_at, expires_at, decision, "
            "reviewer, note, decided_at, approved_args FROM approvals, n "
            "WHERE run_id LIKE 't-%'")
        con.execute(
            "INSERT INTO handovers SELECT handover_id || '-' || n.k, run_id || '-' || n.k, "
            "workflow, customer, request, state, handed_at, cause, reason, taken_by, "
            "taken_at, outcome, note, closed_by, closed_at FROM handovers, n "
            "WHERE run_id LIKE 't-%'")
        con.execute(
            "INSERT INTO notifications SELECT key || '-' || n.k, run_id || '-' || n.k, "
            "approval_id || '-' || n.k, kind, created_at, status, attempts, next_attempt_at, "
            "last_error, delivered_at FROM notifications, n WHERE run_id LIKE 't-%'")
        con.execute("INSERT INTO subjects SELECT workflow, subject, run_id || '-' || n.k, at "
                    "FROM subjects, n WHERE run_id LIKE 't-%'")
    con.execute("ANALYZE")
    con.close()


def sqlite_bytes(db: str) -> tuple[int, int]:
    """(the file's size, the bytes its pages hold: the size less the free pages)."""
    con = sqlite3.connect(db)
    try:
        size, free, page = (con.execute(f"PRAGMA {p}").fetchone()[0]
                            for p in ("page_count", "freelist_count", "page_size"))
    finally:
        con.close()
    return size * page, (size - free) * page


def worker(open_: Callable[[], Store], stop: threading.Event, waits: list[float]) -> None:
    """A worker committing steps of a live run as fast as it can: how long each waited."""
    with open_() as store:
        run = store.create_run(RunState(run_id=f"live-{time.time_ns()}", workflow="refund",
                                        definition_hash="d", state="collecting",
                                        created_at=NOW, updated_at=NOW))
        while not stop.is_set():
            started = time.perf_counter()
            run = store.commit(StepCommit(run=run.model_copy(update={"updated_at": NOW}),
                                          expected_version=run.version))
            waits.append(time.perf_counter() - started)
            time.sleep(0.002)


def one_transaction_sqlite(db: str) -> float:
    """The baseline: the same runs deleted in one transaction (and their tombstones)."""
    con = sqlite3.connect(db, timeout=600, isolation_level=None)
    started = time.perf_counter()
    con.execute("BEGIN IMMEDIATE")
    con.execute("CREATE TEMP TABLE gone AS SELECT run_id FROM runs WHERE status IN ('done', "
                f"'failed', 'budget_exhausted', 'handed_over') AND updated_at < {CUT} AND NOT "
                "EXISTS (SELECT 1 FROM handovers h WHERE h.run_id = runs.run_id AND "
                "h.closed_at IS NULL)")
    con.execute("INSERT INTO tombstones SELECT r.run_id, r.workflow, '', r.status, "
                f"r.log_head, r.log_count, r.created_at, r.updated_at, {NOW}, 'bench' FROM "
                "runs r JOIN gone USING (run_id)")
    for table in (*RUN_TABLES, "runs"):
        con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM gone)")
    con.execute("COMMIT")
    seconds = time.perf_counter() - started
    con.close()
    return seconds


def timed_with_worker(open_: Callable[[], Store], act: Callable[[], Any]) -> tuple[Any, float,
                                                                                  float, int]:
    """Run ``act`` while a worker commits; its result, the seconds, the worker's longest
    wait for a commit, and how many commits it made."""
    stop, waits = threading.Event(), []
    thread = threading.Thread(target=worker, args=(open_, stop, waits))
    thread.start()
    time.sleep(0.2)
    started = time.perf_counter()
    try:
        result = act()
    finally:
        seconds = time.perf_counter() - started
        stop.set()
        thread.join()
    return result, seconds, max(waits, default=0.0), len(waits)


def bench_sqlite(runs: int, batch: int, where: Path) -> dict[str, Any]:
    db = str(where / "runs.db")
    templates(db)
    copies_sqlite(db, max(1, runs // len(TEMPLATES)))
    with SQLiteStore(db) as store:
        total = store.count_runs()
    baseline_db = str(where / "baseline.db")
    shutil.copy(db, baseline_db)
    size_before, used_before = sqlite_bytes(db)

    def batched() -> Any:
        with SQLiteStore(db, busy_timeout_ms=600_000) as store:
            return prune(store, before=CUT, by="bench", now=NOW, batch=batch, pause=PAUSE)

    done, seconds, worst, commits = timed_with_worker(
        lambda: SQLiteStore(db, busy_timeout_ms=600_000), batched)
    size_after, used_after = sqlite_bytes(db)
    con = sqlite3.connect(db)
    con.execute("VACUUM")
    con.close()
    vacuumed, _ = sqlite_bytes(db)
    _, base_seconds, base_worst, base_commits = timed_with_worker(
        lambda: SQLiteStore(baseline_db, busy_timeout_ms=600_000),
        lambda: one_transaction_sqlite(baseline_db))
    return {
        "store": "sqlite", "runs": total, "pruned": done.runs, "pruned_events": done.events,
        "batches": done.batches, "batch": batch, "seconds": seconds,
        "runs_per_second": done.runs / seconds if seconds else 0.0,
        "bytes_before": size_before, "used_before": used_before, "bytes_after": size_after,
        "used_after": used_after, "bytes_after_vacuum": vacuumed,
        "bytes_per_run": (used_before - used_after) / max(done.runs, 1),
        "worker_commits": commits, "worker_longest_wait_s": worst,
        "baseline_seconds": base_seconds, "baseline_worker_longest_wait_s": base_worst,
        "baseline_worker_commits": base_commits,
    }


def copies_pg(url: str, copies: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=False) as con:
        con.execute(f"CREATE TEMP TABLE n AS SELECT generate_series(1, {copies}) AS k")
        age = f"(CASE WHEN n.k % 10 = 0 THEN 0 ELSE 40 + n.k % 300 END) * {DAY}"
        con.execute(
            "INSERT INTO runs (run_id, workflow, status, version, snapshot, doc, created_at, "
            "updated_at, log_count, log_head, definition_hash) SELECT run_id || '-' || n.k, "
            f"workflow, status, version, snapshot, doc, {NOW} - {age} - 60, {NOW} - {age}, "
            "log_count, log_head, definition_hash FROM runs, n WHERE run_id LIKE 't-%'")
        for table, cols in COPIED.items():
            con.execute(_copy_sql(table, cols, "n.k"))
        con.execute(
            "INSERT INTO effects (key, run_id, step, tool, args, args_doc, status, result, "
            "result_doc, error, started_at, finished_at) SELECT key || '-' || n.k, run_id || "
            "'-' || n.k, step, tool, args, args_doc, status, result, result_doc, error, "
            "started_at, finished_at FROM effects, n WHERE run_id LIKE 't-%'")
        con.execute(
            "INSERT INTO handovers SELECT handover_id || '-' || n.k, run_id || '-' || n.k, "
            "workflow, customer, request, state, handed_at, cause, reason, taken_by, "
            "taken_at, outcome, note, closed_by, closed_at FROM handovers, n "
            "WHERE run_id LIKE 't-%'")
        con.execute("INSERT INTO subjects SELECT workflow, subject, run_id || '-' || n.k, at "
                    "FROM subjects, n WHERE run_id LIKE 't-%'")
        con.execute(
            "INSERT INTO notifications SELECT key || '-' || n.k, run_id || '-' || n.k, "
            "approval_id || '-' || n.k, kind, created_at, status, attempts, next_attempt_at, "
            "last_error, delivered_at FROM notifications, n WHERE run_id LIKE 't-%'")
        con.commit()
        con.autocommit = True
        con.execute("VACUUM ANALYZE")


def pg_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as con:
        return int(con.execute("SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
                               "JOIN pg_namespace s ON s.oid = c.relnamespace WHERE "
                               "s.nspname = current_schema() AND c.relkind = 'r'"
                               ).fetchone()[0])


def bench_pg(url: str, runs: int, batch: int, where: Path) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP SCHEMA IF EXISTS fsm_bench_prune CASCADE")
        con.execute("CREATE SCHEMA fsm_bench_prune")
    sep = "&" if "?" in url else "?"
    scoped = f"{url}{sep}options=-csearch_path%3Dfsm_bench_prune"
    db = str(where / "templates.db")
    templates(db)
    with SQLiteStore(db) as src, open_store(scoped) as dst:
        for run_id, _ in TEMPLATES:
            _copy_run(src, dst, run_id)
    copies_pg(scoped, max(1, runs // len(TEMPLATES)))
    with open_store(scoped) as store:
        total = store.count_runs()
    before = pg_bytes(scoped)

    def batched() -> Any:
        with open_store(scoped) as store:
            return prune(store, before=CUT, by="bench", now=NOW, batch=batch, pause=PAUSE)

    done, seconds, worst, commits = timed_with_worker(lambda: open_store(scoped), batched)
    after = pg_bytes(scoped)
    with psycopg.connect(scoped, autocommit=True) as con:
        con.execute("VACUUM FULL")
    vacuumed = pg_bytes(scoped)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP SCHEMA fsm_bench_prune CASCADE")
    return {"store": "postgres", "runs": total, "pruned": done.runs,
            "pruned_events": done.events, "batches": done.batches, "batch": batch,
            "seconds": seconds, "runs_per_second": done.runs / seconds if seconds else 0.0,
            "bytes_before": before, "bytes_after": after, "bytes_after_vacuum": vacuumed,
            "bytes_per_run": (before - vacuumed) / max(done.runs, 1),
            "worker_commits": commits, "worker_longest_wait_s": worst}


def _copy_run(src: SQLiteStore, dst: Store, run_id: str) -> None:
    """A template run moved to PostgreSQL row by row, as a store writes it."""
    import sqlite3 as lite

    con = lite.connect(src.path)
    try:
        rows = {t: con.execute(f"SELECT * FROM {t} WHERE run_id = ?", (run_id,)).fetchall()
                for t in ("runs", "messages", "views", "events", "effects", "handovers",
                          "subjects", "notifications")}
        cols = {t: [d[1] for d in con.execute(f"PRAGMA table_info({t})")] for t in rows}
    finally:
        con.close()
    with dst._tx() as db:  # type: ignore[attr-defined]
        for table, found in rows.items():
            for row in found:
                names = cols[table]
                db.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                           f"({', '.join(['%s'] * len(names))})", row)


def show(r: dict[str, Any]) -> None:
    mib = 1024 * 1024
    print(f"{r['store']}: {r['runs']:,} runs; pruned {r['pruned']:,} ({r['pruned_events']:,} "
          f"log events) in {r['batches']} batches of {r['batch']}: {r['seconds']:.1f} s "
          f"({r['runs_per_second']:,.0f} runs/s)")
    line = f"  bytes: {r['bytes_before'] / mib:,.1f} MiB before, {r['bytes_after'] / mib:,.1f} " \
           f"MiB after"
    if "used_after" in r:
        line += f" (pages in use {r['used_before'] / mib:,.1f} → {r['used_after'] / mib:,.1f} MiB)"
    print(line + f", {r['bytes_after_vacuum'] / mib:,.1f} MiB after VACUUM; "
          f"{r['bytes_per_run']:,.0f} bytes per pruned run")
    print(f"  a worker committing meanwhile: {r['worker_commits']} commits, the longest "
          f"waited {r['worker_longest_wait_s'] * 1000:.0f} ms")
    if "baseline_seconds" in r:
        print(f"  baseline, one transaction: {r['baseline_seconds']:.1f} s; the worker's "
              f"longest wait {r['baseline_worker_longest_wait_s'] * 1000:.0f} ms "
              f"({r['baseline_worker_commits']} commits)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--pg", help="also on this PostgreSQL database (a schema is made)")
    parser.add_argument("--quick", action="store_true", help="SQLite only, whatever --pg says")
    parser.add_argument("--json-out", help="write the figures here as JSON")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(bench_sqlite(args.runs, args.batch, Path(tmp)))
        show(results[-1])
        if args.pg and not args.quick:
            pg_dir = Path(tmp) / "pg"
            pg_dir.mkdir()
            results.append(bench_pg(args.pg, args.runs, args.batch, pg_dir))
            show(results[-1])
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
