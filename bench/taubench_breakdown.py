"""Where the retail desk's CPU per step goes (``python bench/taubench.py --breakdown``).

The replay of ``bench/taubench.py`` runs twice more over the same tasks, each on a fresh
SQLite file:

- with the store's ``synchronous=FULL`` (the default) and every statement of both
  databases timed by its kind (process CPU, as the benchmark's own figure): how much
  of a step is SQLite, how much of that is COMMIT and how many commits a step makes;
  the rest of a step's CPU is Python;
- with the store's ``synchronous=NORMAL``: the difference prices the store's fsyncs.

Each figure is one pass: the machine's noise applies to both (the difference is
meaningful when it is larger than that noise). Timing each statement costs a little CPU
of its own, which the first pass's per-step figure includes.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workflows.retail.runner import Bench

#: A statement's kind: its verb and table ("INSERT INTO events", "SELECT … FROM runs").
_KIND = re.compile(r"^\s*(?:(SELECT)\b.*?\bFROM\s+(\w+)|(INSERT\s+INTO|UPDATE|DELETE\s+FROM)"
                   r"\s+(\w+)|(BEGIN(?:\s+IMMEDIATE)?|COMMIT|ROLLBACK|PRAGMA))",
                   re.IGNORECASE | re.DOTALL)


def kind(sql: str) -> str:
    """``sql``'s kind, e.g. ``INSERT INTO events`` (its first word when none fits)."""
    m = _KIND.match(sql)
    if m is None:
        return sql.split(None, 1)[0].upper() if sql.strip() else "?"
    if m.group(1):
        return f"SELECT … FROM {m.group(2)}"
    if m.group(3):
        return f"{' '.join(m.group(3).upper().split())} {m.group(4)}"
    return " ".join(m.group(5).upper().split())


class Timed:
    """A SQLite connection whose ``execute`` and ``executemany`` are timed by kind, into
    ``cpu`` (seconds) and ``calls``, under ``side`` ("fsm" or "retail"), while ``on()``."""

    def __init__(self, connection: Any, side: str, cpu: defaultdict[str, float],
                 calls: Counter[str], on: Callable[[], bool]) -> None:
        self._connection = connection
        self._side = side
        self._cpu = cpu
        self._calls = calls
        self._on = on

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def _timed(self, method: str, sql: str, *args: Any) -> Any:
        if not self._on():
            return getattr(self._connection, method)(sql, *args)
        started = time.process_time()
        try:
            return getattr(self._connection, method)(sql, *args)
        finally:
            key = f"{self._side}: {kind(sql)}"
            self._cpu[key] += time.process_time() - started
            self._calls[key] += 1

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed("execute", sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._timed("executemany", sql, *args)


def _pass(tasks: Sequence[dict[str, Any]], synchronous: str, timed: bool,
          replay: Callable[[Bench, dict[str, Any]], tuple[float, int]]) -> dict[str, Any]:
    cpu: defaultdict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    on = [False]
    total = 0.0
    steps = 0
    with tempfile.TemporaryDirectory(prefix="fsm-taubench-breakdown-") as tmp, \
            Bench(str(Path(tmp) / "breakdown.db"), synchronous=synchronous) as bench:
        if timed:
            store_db: Any = bench.store.db  # type: ignore[attr-defined]
            store_db.connection = Timed(store_db.connection, "fsm", cpu, calls, lambda: on[0])
            retail: Any = bench.db
            retail._db = Timed(retail._db, "retail", cpu, calls, lambda: on[0])
        for task in tasks:
            bench.reset()
            on[0] = True
            try:
                seconds, n = replay(bench, task)
            finally:
                on[0] = False
            total += seconds
            steps += n
    return {"cpu": cpu, "calls": calls, "cpu_s": total, "steps": steps}


def breakdown(tasks: Sequence[dict[str, Any]],
              replay: Callable[[Bench, dict[str, Any]], tuple[float, int]]) -> dict[str, Any]:
    """The figures of the module's docstring; ``replay(bench, task)`` drives one task on a
    reset bench and gives its CPU seconds and steps."""
    full = _pass(tasks, "FULL", True, replay)
    normal = _pass(tasks, "NORMAL", False, replay)
    steps = full["steps"] or 1

    def per_step(seconds: float) -> float:
        return round(seconds * 1000 / steps, 3)

    sql = sum(full["cpu"].values())
    commits = {k: v for k, v in full["calls"].items() if k.endswith("COMMIT")}
    kinds = [{"kind": k, "ms_per_step": per_step(v),
              "per_step": round(full["calls"][k] / steps, 2)}
             for k, v in sorted(full["cpu"].items(), key=lambda kv: -kv[1])]
    return {
        "steps": full["steps"],
        "cpu_ms_per_step": per_step(full["cpu_s"]),
        "sql_ms_per_step": per_step(sql),
        "commit_ms_per_step": per_step(sum(full["cpu"][k] for k in commits)),
        "store_commits_per_step": round(full["calls"].get("fsm: COMMIT", 0) / steps, 2),
        "python_ms_per_step": per_step(full["cpu_s"] - sql),
        "normal_cpu_ms_per_step": per_step(normal["cpu_s"]),
        "fsync_ms_per_step": per_step(full["cpu_s"] - normal["cpu_s"]),
        "kinds": kinds,
    }


def markdown(b: dict[str, Any], baseline_ms: float) -> str:
    """The breakdown as a paragraph and a table (the top kinds of statement)."""
    floor = f"; 4× a direct call ({baseline_ms} ms) is {round(4 * baseline_ms, 3)} ms" \
        if baseline_ms else ""
    lines = [
        "### Where a step's CPU goes", "",
        f"Over {b['steps']} steps, with every statement timed: {b['cpu_ms_per_step']} ms of "
        f"CPU per step, of which SQLite {b['sql_ms_per_step']} ms (COMMIT "
        f"{b['commit_ms_per_step']} ms, at {b['store_commits_per_step']} of the store's "
        f"commits per step) and Python {b['python_ms_per_step']} ms. With the store's "
        f"synchronous=NORMAL a step takes {b['normal_cpu_ms_per_step']} ms: its fsyncs cost "
        f"about {b['fsync_ms_per_step']} ms{floor}. One pass each.", "",
        "| statement | ms per step | per step |", "|---|---|---|",
        *[f"| {k['kind']} | {k['ms_per_step']} | {k['per_step']} |" for k in b["kinds"][:12]],
        ""]
    return "\n".join(lines)
