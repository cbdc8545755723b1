"""``python -m workflows.refund ledger|demo``: the fake shop's ledger, and the demo."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from fsm.errors import SettingsError
from fsm.records import utc
from fsm.settings import Settings
from workflows.refund.shop import open_shop
from workflows.refund.workflow import rupees


def _read_ledger(db: str) -> list[dict[str, object]]:
    shop = open_shop(db)
    try:
        return shop.ledger()
    finally:
        shop.close()


def ledger(db: str, as_json: bool) -> int:
    postgres = db.startswith(("postgresql://", "postgres://"))
    if not postgres and not os.path.exists(db.removeprefix("sqlite:///")):
        print(f"error: no database at {db!r}", file=sys.stderr)
        return 1
    try:
        rows: list[dict[str, Any]] = _read_ledger(db)
    except Exception as exc:  # sqlite3.Error or psycopg.Error: the same clear line
        print(f"error: cannot read the ledger in {db!r}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("ledger: no payments")
        return 0
    print(f"{'order':8} {'item':14} {'amount':>8}  {'idempotency key':28} time")
    for r in rows:
        at = utc(r["at"])
        print(f"{r['order_id']:8} {r['item_id']:14} {rupees(r['amount_paise']):>8}  "
              f"{r['idempotency_key']:28} {at}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workflows.refund",
                                     description="The refund workflow's fake shop and demo.")
    sub = parser.add_subparsers(dest="command", required=True)
    try:
        settings = Settings.load()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    p_ledger = sub.add_parser("ledger", help="print the payment ledger")
    p_ledger.add_argument("--db", default=settings.db,
                          help="database: a file, sqlite:///path or postgresql://... "
                               "(default: $FSM_DB, else fsm.db)")
    p_ledger.add_argument("--json", action="store_true", help="print JSON")
    p_demo = sub.add_parser("demo", help="run the demo on a fresh SQLite file")
    p_demo.add_argument("--db", default=None, help="database file (default: a fresh temp file)")
    p_fleet = sub.add_parser("fleet-demo", help="the fleet demo on PostgreSQL workers")
    p_fleet.add_argument("--db", default=None,
                         help="postgresql://... (default: a throwaway embedded server)")
    p_fleet.add_argument("--runs", type=int, default=30, help="refunds to submit")
    p_fleet.add_argument("--workers", type=int, default=3, help="worker processes")
    p_approver = sub.add_parser("approver", help="approve every waiting refund until SIGTERM "
                                "(the fleet's supervisor; the workers continue the runs)")
    p_approver.add_argument("--db", default=settings.db,
                            help="database URL (default: $FSM_DB)")
    args = parser.parse_args(argv)
    if args.command == "ledger":
        return ledger(args.db, args.json)
    if args.command == "approver":
        from workflows.refund.fleet import approve_forever

        os.environ["FSM_DB"] = args.db  # the workflow's shop follows the runs
        return approve_forever(args.db)
    if args.command == "fleet-demo":
        from workflows.refund.fleet_demo import run_fleet_demo

        return run_fleet_demo(args.db, args.runs, args.workers)
    from workflows.refund.demo import run_demo

    return run_demo(args.db)


if __name__ == "__main__":
    sys.exit(main())
