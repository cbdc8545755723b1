"""Benchmark: the approval inbox's server time on a large SQLite database.

Builds one database with ``--waiting`` runs waiting for approval (10,000) and
``--finished`` finished runs (100,000) — clones of a real paused and a real finished
refund run, with their transcripts, logs and approvals — then requests pages from the
inbox app in this process and reads each response's ``Server-Timing`` header (the time
from the request's arrival to its response headers, the page rendered). Reported:
p50/p95/max in ms for the inbox (first page, a deep page, filtered), an approval page
(its diagram's layout cached, and laid out afresh), the runs list and a run page.

    python bench/inbox.py                      # 10,000 waiting, 100,000 finished
    python bench/inbox.py --waiting 500 --finished 2000 --requests 20    # quick

Target (issue 10): inbox and approval page ≤ 100 ms at p95.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from fsm import Engine, SQLiteStore
from fsm.web.accounts import add_account
from fsm.web.app import Inbox, create_app
from fsm.web.auth import Sessions
from workflows.refund import Shop, build
from workflows.refund.clerk import clerk

TABLES = {"runs": "run_id", "messages": "run_id", "views": "run_id", "events": "run_id",
          "approvals": "run_id", "effects": "run_id"}


def _templates(path: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Rows of one real paused run and one real finished run, by table."""
    shop = Shop().seed_demo()
    shop.add_order("B-9001", "ravi", "headphones-9", "headphones", 1_200_000, 4)
    store = SQLiteStore(path)
    try:
        engine = Engine(build(shop), store, clerk)
        meta = {"workflow_ref": "refund", "policy": "default"}
        engine.start("Order B-9001: it stopped working", user="ravi", run_id="TPLWAIT",
                     meta=meta)
        engine.start("Order A-1001: the kettle arrived broken", user="asha", run_id="TPLDONE",
                     meta=meta)
    finally:
        store.close()
        shop.close()
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    try:
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for tpl in ("TPLWAIT", "TPLDONE"):
            out[tpl] = {t: [dict(r) for r in con.execute(f"SELECT * FROM {t} WHERE {c} = ?",
                                                          (tpl,))]
                        for t, c in TABLES.items()}
            out[tpl]["notifications"] = [dict(r) for r in con.execute(
                "SELECT * FROM notifications WHERE run_id = ?", (tpl,))]
        return out
    finally:
        con.close()


def _clone(rows: list[dict[str, Any]], tpl: str, run_id: str, tpl_aid: str, aid: str,
           shift: float) -> list[tuple[Any, ...]]:
    out = []
    for r in rows:
        vals = []
        for k, v in r.items():
            if isinstance(v, str):
                v = v.replace(tpl, run_id).replace(tpl_aid, aid) if (tpl in v or tpl_aid in v) \
                    else v
            elif isinstance(v, float) and k in ("created_at", "updated_at", "time", "at",
                                                 "requested_at", "expires_at", "started_at",
                                                 "finished_at", "decided_at", "next_attempt_at"):
                v = v + shift
            vals.append(v)
        out.append(tuple(vals))
    return out


def build_db(path: str, waiting: int, finished: int) -> float:
    """Fill ``path``; seconds it took."""
    started = time.perf_counter()
    tpl = _templates(path)
    con = sqlite3.connect(path)
    try:
        con.execute("BEGIN")
        for tpl_id, count, prefix in (("TPLWAIT", waiting, "w"), ("TPLDONE", finished, "f")):
            rows = tpl[tpl_id]
            tpl_aid = rows["approvals"][0]["approval_id"] if rows["approvals"] else "-none-"
            for table, table_rows in rows.items():
                if not table_rows:
                    continue
                cols = list(table_rows[0])
                marks = ", ".join("?" * len(cols))
                sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})"
                batch = []
                for i in range(count):
                    run_id = f"{prefix}{i:06d}"
                    # Spread the runs over the last two days, newest last.
                    shift = -(count - i) * (172_800 / count)
                    batch.extend(_clone(table_rows, tpl_id, run_id, tpl_aid, f"a{prefix}{i:06d}",
                                        shift))
                    if len(batch) > 20_000:
                        con.executemany(sql, batch)
                        batch = []
                if batch:
                    con.executemany(sql, batch)
        con.execute("COMMIT")
        con.execute("ANALYZE")
    finally:
        con.close()
    return time.perf_counter() - started


def timings(client: TestClient, urls: list[str]) -> dict[str, float]:
    ms = []
    for url in urls:
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.status_code, resp.text[:300])
        found = re.search(r"app;dur=([\d.]+)", resp.headers["server-timing"])
        assert found is not None
        ms.append(float(found.group(1)))
    ms.sort()
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[max(0, int(len(ms) * 0.95) - 1)], 2), "max_ms": round(ms[-1], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100, help="requests per page kind")
    parser.add_argument("--db", help="database file to build (default: a temporary one)")
    parser.add_argument("--json-out", help="also write the figures here")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="fsm-bench-inbox-")
    path = args.db or str(Path(workdir) / "inbox.db")
    if Path(path).exists():
        print(f"error: {path} exists; give a new file", file=sys.stderr)
        return 1
    os.environ["FSM_DB"] = path   # the refund workflow's shop lives in the same file
    built = build_db(path, args.waiting, args.finished)
    store = SQLiteStore(path)
    try:
        add_account(store, "bench", "approver", "bench-password", None)
        inbox = Inbox(store=store, sessions=Sessions("bench-secret"))
        app = create_app(inbox)
        rng = random.Random(7)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            form = client.get("/login").text
            token = re.search(r'name="csrf" value="([^"]+)"', form)
            assert token is not None
            client.post("/login", data={"name": "bench", "password": "bench-password",
                                        "csrf": token.group(1)})
            n = args.requests
            pages = max(1, args.waiting // 25)
            aids = [f"aw{rng.randrange(args.waiting):06d}" for _ in range(n)]
            client.get(f"/approvals/{aids[0]}")   # first request: imports, template compile
            result: dict[str, Any] = {"waiting": args.waiting, "finished": args.finished,
                                      "build_seconds": round(built, 1),
                                      "db_bytes": Path(path).stat().st_size}
            result["inbox_first_page"] = timings(client, ["/inbox"] * n)
            result["inbox_deep_page"] = timings(
                client, [f"/inbox?page={rng.randrange(1, pages + 1)}" for _ in range(n)])
            result["inbox_filtered"] = timings(client, ["/inbox?workflow=refund"] * n)
            result["approval_page"] = timings(client, [f"/approvals/{a}" for a in aids])
            cold = [f"/approvals/{a}" for a in aids[: max(5, n // 5)]]
            result["approval_page_diagram_uncached"] = _uncached(client, inbox, cold)
            result["runs_list"] = timings(client, ["/runs"] * n)
            finished = [f"/runs/f{rng.randrange(args.finished):06d}" for _ in range(max(5, n // 5))]
            result["run_page"] = timings(client, finished)
    finally:
        store.close()
        if not args.db:
            shutil.rmtree(workdir, ignore_errors=True)
    result["targets_met"] = {
        "inbox_p95_within_100ms": max(result[k]["p95_ms"] for k in (
            "inbox_first_page", "inbox_deep_page", "inbox_filtered")) <= 100,
        "approval_page_p95_within_100ms": result["approval_page"]["p95_ms"] <= 100,
    }
    _print(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


def _uncached(client: TestClient, inbox: Inbox, urls: list[str]) -> dict[str, float]:
    ms = []
    for url in urls:
        inbox.diagrams = type(inbox.diagrams)()   # forget every laid-out diagram
        ms.append(timings(client, [url])["p50_ms"])
    ms.sort()
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[max(0, int(len(ms) * 0.95) - 1)], 2), "max_ms": round(ms[-1], 2)}


def _print(result: dict[str, Any]) -> None:
    print(f"database: {result['waiting']:,} waiting, {result['finished']:,} finished runs, "
          f"{result['db_bytes'] / 1e6:.0f} MB, built in {result['build_seconds']} s")
    print(f"{'page':34} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for key, label in (("inbox_first_page", "inbox, first page"),
                       ("inbox_deep_page", "inbox, a random page"),
                       ("inbox_filtered", "inbox, filtered by workflow"),
                       ("approval_page", "approval page"),
                       ("approval_page_diagram_uncached", "approval page, diagram laid out"),
                       ("runs_list", "runs list"), ("run_page", "run page (with audit)")):
        r = result[key]
        print(f"{label:34} {r['n']:>5} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['max_ms']:>8}")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.exit(main())
