"""``python -m workflows.refund ledger|demo``: the fake shop's ledger, and the demo."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys

from workflows.refund.shop import Shop


def _rupees(paise: int) -> str:
    rupees, rest = divmod(paise, 100)
    return f"₹{rupees:,}" + (f".{rest:02d}" if rest else "")


def ledger(db: str, as_json: bool) -> int:
    if not os.path.exists(db):
        print(f"error: no database at {db!r}", file=sys.stderr)
        return 1
    try:
        with Shop(db) as shop:
            rows = shop.ledger()
    except sqlite3.Error as exc:
        print(f"error: cannot read the ledger in {db!r}: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("ledger: no payments")
        return 0
    from datetime import UTC, datetime

    print(f"{'order':8} {'item':14} {'amount':>8}  {'idempotency key':28} time")
    for r in rows:
        at = datetime.fromtimestamp(r["at"], UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        print(f"{r['order_id']:8} {r['item_id']:14} {_rupees(r['amount_paise']):>8}  "
              f"{r['idempotency_key']:28} {at}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workflows.refund",
                                     description="The refund workflow's fake shop and demo.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_ledger = sub.add_parser("ledger", help="print the payment ledger")
    p_ledger.add_argument("--db", default=os.environ.get("FSM_DB", "fsm.db"),
                          help="database file (default: $FSM_DB, else fsm.db)")
    p_ledger.add_argument("--json", action="store_true", help="print JSON")
    p_demo = sub.add_parser("demo", help="run the demo on a fresh SQLite file")
    p_demo.add_argument("--db", default=None, help="database file (default: a fresh temp file)")
    args = parser.parse_args(argv)
    if args.command == "ledger":
        return ledger(args.db, args.json)
    from workflows.refund.demo import run_demo

    return run_demo(args.db)


if __name__ == "__main__":
    sys.exit(main())
