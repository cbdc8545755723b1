"""Benchmark: ``fsm runs`` on a database of many runs.

Creates N runs (default 10,000) in a fresh SQLite file, then times real ``fsm runs``
processes: the default (the newest 50), a filtered page, and ``--all --json``; and
prints the bytes each printed.

    python bench/runs_list.py            # 10,000 runs
    python bench/runs_list.py --runs 1000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fsm.records import RunState
from fsm.store import SQLiteStore


def fill(db: Path, n: int) -> None:
    with SQLiteStore(str(db), synchronous="OFF") as store:
        for i in range(n):
            store.create_run(RunState(
                run_id=f"run-{i:06d}", workflow="refund" if i % 4 else "other",
                definition_hash="d", user=f"user{i % 97}", state="done",
                status="done" if i % 5 else "awaiting_approval",
                created_at=1_700_000_000 + i, updated_at=1_700_000_000 + i))


def timed(db: Path, *args: str) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSM_")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fsm", "runs", *args, "--db", str(db)],
                          capture_output=True, env=env, check=True)
    return time.perf_counter() - start, len(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "many.db"
        fill(db, args.runs)
        floor, _ = timed(db, "--limit", "1", "--json")
        print(f"{args.runs:,} runs; a process listing one run takes {floor:.2f} s")
        for label, extra in [
            ("fsm runs (newest 50)", []),
            ("fsm runs --status done --workflow refund --offset 100", [
                "--status", "done", "--workflow", "refund", "--offset", "100"]),
            ("fsm runs --all --json", ["--all", "--json"]),
        ]:
            seconds, size = timed(db, *extra)
            print(f"{label:58} {seconds:6.2f} s  {size / 1024:8.1f} KiB printed")


if __name__ == "__main__":
    main()
