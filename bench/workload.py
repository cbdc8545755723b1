"""The agent-loop workload every system of ``bench/peers.py`` runs, in plain Python.

Standard library only: each system's runner (``peer_fsm.py``, ``peer_langgraph.py``,
``peer_burr.py``) imports it from its own virtual environment.

One **round** is one scripted policy decision (call ``fetch`` with ``i`` = the round
number), one call of the read-only tool ``fetch`` (a result of about 200 bytes), and
one durable checkpoint of the agent's state to SQLite (WAL, ``synchronous=FULL``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TEXT = "lorem ipsum dolor sit amet " * 6


def fetch(i: int) -> dict[str, Any]:
    """The tool: fetch item ``i``; about 200 bytes of result."""
    return {"i": i, "text": TEXT}


class Decisions:
    """The scripted policy: round ``i`` calls ``fetch(i)``. It notes when it is asked, so a
    round is measured the same way in every system: from one decision to the next."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def decide(self, i: int) -> dict[str, Any]:
        self.times.append(time.perf_counter())
        return {"id": f"call_{i}", "name": "fetch", "args": {"i": i}}

    def ms_per_round(self) -> tuple[float, float]:
        """Mean and median of the gaps between decisions, in ms (each gap is one round)."""
        gaps = [b - a for a, b in zip(self.times, self.times[1:], strict=False)]
        if not gaps:
            return 0.0, 0.0
        return statistics.fmean(gaps) * 1000, statistics.median(gaps) * 1000


def assistant_message(call: dict[str, Any]) -> dict[str, Any]:
    """The model's turn as an OpenAI-style chat message."""
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def tool_message(call: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The tool's result as an OpenAI-style chat message."""
    return {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}


def connect(path: Path, synchronous: str) -> sqlite3.Connection:
    """A connection set up as the fsm store sets up its own: WAL, the given ``synchronous``."""
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    return db


def used_bytes(path: Path) -> int:
    """Bytes of the database and its WAL after a checkpoint, less free pages."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    free *= db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    wal = path.with_name(path.name + "-wal")
    return int(path.stat().st_size + (wal.stat().st_size if wal.exists() else 0) - free)


Runner = Callable[[Path, int, str, Decisions], None]


def run_once(runner: Runner, path: Path, rounds: int, synchronous: str) -> dict[str, Any]:
    """Run ``rounds`` rounds with ``runner``; the figures of one measurement."""
    decisions = Decisions()
    t0 = time.perf_counter()
    runner(path, rounds, synchronous, decisions)
    total = time.perf_counter() - t0
    if len(decisions.times) != rounds:
        raise SystemExit(f"error: {rounds} rounds asked, {len(decisions.times)} decided")
    mean, median = decisions.ms_per_round()
    return {"rounds": rounds, "ms_per_round": mean, "ms_per_round_median": median,
            "ms_per_round_incl_setup": total / rounds * 1000, "bytes": used_bytes(path)}


def main(runner: Runner, system: str, argv: list[str] | None = None) -> int:
    """Command line of a runner: warm up, run once, print one JSON line."""
    parser = argparse.ArgumentParser(description=f"run the agent-loop workload on {system}")
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--db", required=True, help="SQLite file to create")
    parser.add_argument("--synchronous", default="FULL", choices=["OFF", "NORMAL", "FULL"])
    a = parser.parse_args(argv)
    path = Path(a.db)
    warm = path.with_name(path.name + ".warm-up")
    run_once(runner, warm, 5, "OFF")  # imports and first-call caches are not counted
    for p in (warm, warm.with_name(warm.name + "-wal"), warm.with_name(warm.name + "-shm")):
        p.unlink(missing_ok=True)
    result = run_once(runner, path, a.rounds, a.synchronous)
    result.update(system=system, synchronous=a.synchronous, sqlite=sqlite3.sqlite_version)
    print(json.dumps(result))
    return 0
