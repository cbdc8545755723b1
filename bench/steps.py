"""Benchmark: what persisting every step costs, against the raw SQLite floor.

An N-step loop — a trivial policy, one read-only tool with a ~200-byte result,
every step committed to the SQLite store with ``synchronous=FULL`` — measured for
several N, then the same rows written with plain ``sqlite3`` and no framework (the
floor), so the figures read as ratios. Also: database bytes per step, the time to
resume a long run up to its next policy call, and the time to load what the model
saw at one step of it (``fsm show RUN --step N``).

    python bench/steps.py              # the full benchmark (make bench)
    python bench/steps.py --quick      # a few seconds: small N, a short long run

Targets: per step ≤ 2x the floor and flat from N=10 to N=1,000; CPU per step (the same
without flushing) ≤ 2x the floor's; bytes per step flat; resume of a 10,000-step run
≤ 100 ms; show-step ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fsm import (
    Action,
    Budgets,
    Engine,
    SQLiteStore,
    ToolSpec,
    View,
    WorkflowSpec,
    define_workflow,
)
from fsm.runtime.view import view_at
from fsm.store.base import Store
from fsm.store.schema import MIGRATIONS

RUN = "bench"
TARGETS = {"per_step_vs_floor": 2.0, "cpu_vs_floor": 2.0, "flat": 1.25, "resume_ms": 100.0,
           "show_ms": 50.0}


# -- the workload -----------------------------------------------------------------------------

class Fetch(BaseModel):
    i: int


def fetch(args: Fetch, ctx: Any) -> dict[str, Any]:
    """A read-only tool with a result of about 200 bytes."""
    return {"i": args.i, "text": "lorem ipsum dolor sit amet " * 6}


def loop_spec() -> WorkflowSpec:
    """One state, one tool; a final answer would finish it, budgets stop it."""
    return define_workflow(
        "bench-loop", transitions={"working": {}}, tools_by_state={"working": ["fetch"]},
        initial="working", terminal=set(), finish_states={"working"},
        tools=[ToolSpec("fetch", fetch, "Fetch item i.", Fetch)],
    )


class Halt(BaseException):
    """Stops the engine mid-run the way a crash would: the run stays ``running``."""


class Policy:
    """Calls ``fetch`` with new arguments each step and notes when it is asked; once asked
    for step ``stop_at`` it halts the process's engine (as if the process died)."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.stop_at = stop_at
        self.calls: list[float] = []

    def __call__(self, view: View) -> Action:
        self.calls.append(time.perf_counter())
        if self.stop_at is not None and view.step >= self.stop_at:
            raise Halt
        return Action(tool="fetch", args={"i": view.step})


def used_bytes(path: Path) -> int:
    """Bytes of the database and its WAL after a checkpoint, less free pages."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    free *= db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0) - free


# -- the framework ------------------------------------------------------------------------------

def drive(store: Store, steps: int, *, measure: Callable[[], float] | None = None
          ) -> dict[str, float]:
    """Drive an N-step run on ``store``: time per step (and, given ``measure``, what it
    grew by per step, read before and after)."""
    policy = Policy()
    engine = Engine(loop_spec(), store, policy, budgets=Budgets(max_steps=steps),
                    max_repeats=None)
    engine.start("go", run_id=RUN, drive=False)
    before = measure() if measure is not None else 0.0
    t0 = time.perf_counter()
    run = engine.resume(RUN)
    total = time.perf_counter() - t0
    assert run.status == "budget_exhausted" and run.used.steps == steps, run
    # Steady state: from one policy call to the next (a whole step: commit, budget check,
    # view, policy, gate, tool); the setup of resume is reported separately.
    gaps = [b - a for a, b in zip(policy.calls, policy.calls[1:], strict=False)] or [total]
    out = {"ms_per_step": statistics.fmean(gaps) * 1000,
           "ms_per_step_median": statistics.median(gaps) * 1000,
           "ms_per_step_incl_setup": total / steps * 1000}
    if measure is not None:
        out["grew_per_step"] = (measure() - before) / steps
    return out


def framework(path: Path, steps: int, synchronous: str) -> dict[str, float]:
    """Drive an N-step run on SQLite; time per step and bytes per step."""
    store = SQLiteStore(str(path), synchronous=synchronous)
    try:
        out = drive(store, steps, measure=lambda: float(used_bytes(path)))
    finally:
        store.close()
    out["bytes_per_step"] = out.pop("grew_per_step")
    return out


# -- the floor: the same rows, plain sqlite3 ------------------------------------------------------

def _event_columns(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [r[1] for r in db.execute("PRAGMA table_info(events)")]
    finally:
        db.close()


Step = tuple[list[tuple], tuple, list[tuple]]


def _rows_by_step(path: Path) -> tuple[str, tuple[list[tuple], list[tuple]], list[Step]]:
    """The run's final snapshot; the messages and events its start wrote; and per step:
    its messages, its view and its events."""
    cols = _event_columns(path)
    db = sqlite3.connect(path)
    snapshot = db.execute("SELECT snapshot FROM runs WHERE run_id = ?", (RUN,)).fetchone()[0]
    messages = db.execute("SELECT run_id, idx, body FROM messages ORDER BY idx").fetchall()
    views = db.execute("SELECT run_id, step, body FROM views ORDER BY step").fetchall()
    events: dict[int, list[tuple]] = {}
    for row in db.execute(f"SELECT {', '.join(cols)} FROM events ORDER BY seq"):
        events.setdefault(row[cols.index("step")], []).append(row)
    db.close()
    starts = [json.loads(v[2])["message_count"] for v in views] + [len(messages)]
    steps = []
    for i, view in enumerate(views):
        msgs = [m for m in messages if starts[i] <= m[1] < starts[i + 1]]
        steps.append((msgs, view, events.get(view[1], [])))
    return snapshot, ([m for m in messages if m[1] < starts[0]], events.get(0, [])), steps


#: Canonical JSON (sorted keys, no spaces, UTF-8 kept) for rows and log bodies, and the
#: snapshot's JSON in its own key order, as the store writes them; each encoder built once.
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _without_rows(detail: str) -> dict[str, Any]:
    return {k: v for k, v in json.loads(detail).items() if k != "rows"}


def _encoded_again(snapshot: Any, messages: list[tuple], view: tuple, events: list[tuple],
                   cols: list[str], head: str) -> tuple[str, list[tuple], tuple, list[tuple]]:
    """One step's rows with their texts and hashes made again in plain ``json`` and
    ``hashlib``, as any store that writes JSON rows and a hash-chained log covering them
    must: the snapshot, the messages and the view, their hashes in the last event's
    detail, and each event's link to the one before."""
    snapshot_text = _compact(snapshot)
    bodies = [(m[0], m[1], _canonical(m[2])) for m in messages]
    view_row = (view[0], view[1], _canonical(view[2]))
    rows: dict[str, Any] = {"snapshot": _sha(snapshot_text),
                            "view": [view[1], _sha(view_row[2])]}
    if bodies:
        rows["messages"] = [bodies[0][1], bodies[-1][1] + 1,
                            _sha("[" + ",".join(b[2] for b in bodies) + "]")]
    out = []
    for i, event in enumerate(events):
        body = dict(zip(cols, event, strict=True))
        if i == len(events) - 1:
            body["detail"] = {**body["detail"], "rows": rows}
        body.pop("hash")
        body["prev_hash"] = head
        head = _sha(head + _canonical(body))
        stored = {**body, "detail": _canonical(body["detail"]), "hash": head}
        out.append(tuple(stored[c] for c in cols))
    return snapshot_text, bodies, view_row, out


def floor(source: Path, path: Path, synchronous: str, *, encode: bool = False
          ) -> dict[str, float]:
    """Write ``source``'s step rows again, one transaction per step, with no framework.

    ``encode``: the audited floor, which first makes each step's texts and hashes again
    (:func:`_encoded_again`); the time of that counts too."""
    snapshot, (start_messages, start_events), steps = _rows_by_step(source)
    cols = _event_columns(source)
    if encode:
        # Decoded before the clock starts, without the hashes the store put in the log:
        # the audited floor makes those itself.
        decoded = [([(m[0], m[1], json.loads(m[2])) for m in msgs],
                    (view[0], view[1], json.loads(view[2])),
                    [tuple(_without_rows(v) if c == "detail" else v
                           for c, v in zip(cols, e, strict=True)) for e in events])
                   for msgs, view, events in steps]
        snapshot_value = json.loads(snapshot)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    for script in MIGRATIONS:
        db.executescript(script)
    final = json.loads(snapshot)  # the run's row as its last step left it
    db.execute("INSERT INTO runs (run_id, workflow, status, version, snapshot, created_at, "
               "updated_at, definition_hash) VALUES (?, ?, ?, 1, ?, 0, 0, ?)",
               (RUN, final["workflow"], final["status"], snapshot, final["definition_hash"]))
    insert_event = f"INSERT INTO events VALUES ({', '.join('?' * len(cols))})"
    # The run's start, as it was written (not timed): the log continues from it.
    db.executemany("INSERT INTO messages (run_id, idx, body) VALUES (?, ?, ?)", start_messages)
    db.executemany(insert_event, start_events)
    times = []
    hash_at = cols.index("hash")
    head, count = start_events[-1][hash_at], len(start_events)
    for version, (msgs, view, events) in enumerate(steps, start=1):
        t0 = time.perf_counter()
        if encode:
            snapshot, msgs, view, events = _encoded_again(
                snapshot_value, *decoded[version - 1], cols, head)
        head = events[-1][hash_at] if events else head
        db.execute("BEGIN IMMEDIATE")
        # The status does not change between these steps: like the store, the floor
        # leaves it as it is (writing it again would rewrite its four indexes).
        cur = db.execute(
            "UPDATE runs SET version = ?, snapshot = ?, updated_at = ?, "
            "log_count = ?, log_head = ? WHERE run_id = ? AND version = ?",
            (version + 1, snapshot, float(version), count + len(events), head, RUN, version))
        assert cur.rowcount == 1
        db.executemany("INSERT INTO messages (run_id, idx, body) VALUES (?, ?, ?)", msgs)
        db.execute("INSERT INTO views (run_id, step, body) VALUES (?, ?, ?)", view)
        db.executemany(insert_event, events)
        count += len(events)
        db.execute("COMMIT")
        times.append(time.perf_counter() - t0)
    db.close()
    return {"ms_per_step": statistics.fmean(times) * 1000,
            "ms_per_step_median": statistics.median(times) * 1000}


def commit_ms(path: Path, synchronous: str, commits: int = 50) -> float:
    """The median time of a one-row commit: what the disk's flush costs right now."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
    times = []
    for n in range(commits):
        t0 = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO probe VALUES (?)", (n,))
        db.execute("COMMIT")
        times.append(time.perf_counter() - t0)
    db.close()
    return statistics.median(times) * 1000


# -- a long run: resume and show ------------------------------------------------------------------

def long_run(path: Path, steps: int) -> None:
    """A run of ``steps`` committed steps, left ``running`` as a crash leaves it."""
    store = SQLiteStore(str(path), synchronous="OFF")  # the same rows, written faster
    engine = Engine(loop_spec(), store, Policy(stop_at=steps + 1),
                    budgets=Budgets(max_steps=None), max_repeats=None)
    try:
        engine.start("go", run_id=RUN)
    except Halt:
        pass
    run = store.load_run(RUN)
    assert run.status == "running" and run.step == steps, run
    store.close()


def resume_ms(path: Path, synchronous: str, repeat: int) -> list[float]:
    """From ``Engine.resume`` (a new store connection, as a new process has) to the next
    policy call."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        store = SQLiteStore(str(path), synchronous=synchronous)
        policy = Policy(stop_at=0)
        try:
            Engine(loop_spec(), store, policy, budgets=Budgets(max_steps=None),
                   max_repeats=None).resume(RUN)
        except Halt:
            pass
        out.append((policy.calls[0] - t0) * 1000)
        store.close()
    return out


def show_ms(path: Path, step: int, repeat: int) -> list[float]:
    """``view_at`` of one step, from opening the store (as ``fsm show`` does)."""
    spec = loop_spec()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        store = SQLiteStore(str(path))
        view = view_at(spec, store, RUN, step)
        out.append((time.perf_counter() - t0) * 1000)
        assert view is not None and view.step == step and len(view.messages) >= 2 * step - 1
        store.close()
    return out


# -- the report -----------------------------------------------------------------------------------

def measure(sizes: list[int], long_steps: int, repeat: int, synchronous: str,
            workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"synchronous": synchronous, "sqlite": sqlite3.sqlite_version,
                              "python": sys.version.split()[0], "steps": {}}
    framework(workdir / "warm-up.db", 20, "OFF")  # first calls (imports, caches) not counted
    for n in sizes:
        fw, fl, probes = [], [], []
        for i in range(repeat):
            src = workdir / f"fw-{n}-{i}.db"
            probes.append(commit_ms(workdir / "probe.db", synchronous))
            fw.append(framework(src, n, synchronous))
            fl.append(floor(src, workdir / f"floor-{n}-{i}.db", synchronous))
        row = {k: statistics.median(r[k] for r in fw) for k in fw[0]}
        row["disk_commit_ms"] = statistics.median(probes)
        row["floor_ms_per_step"] = statistics.median(r["ms_per_step"] for r in fl)
        row["floor_ms_per_step_median"] = statistics.median(
            r["ms_per_step_median"] for r in fl)
        row["ratio_to_floor"] = row["ms_per_step"] / row["floor_ms_per_step"]
        # The same without flushing (synchronous=OFF): the CPU a step costs, which a
        # busy disk cannot blur; fsm and the floor in turn, the median of the repetitions.
        cpu, cpu_floor, cpu_audited = [], [], []
        for i in range(repeat):
            src = workdir / f"cpu-{n}-{i}.db"
            cpu.append(framework(src, n, "OFF")["ms_per_step_median"])
            cpu_floor.append(floor(src, workdir / f"cpu-floor-{n}-{i}.db",
                                   "OFF")["ms_per_step_median"])
            cpu_audited.append(floor(src, workdir / f"cpu-audited-{n}-{i}.db", "OFF",
                                     encode=True)["ms_per_step_median"])
        row["cpu_ms_per_step_median"] = statistics.median(cpu)
        row["cpu_floor_ms_per_step_median"] = statistics.median(cpu_floor)
        row["cpu_ratio_to_floor"] = (row["cpu_ms_per_step_median"]
                                     / row["cpu_floor_ms_per_step_median"])
        row["cpu_audited_floor_ms_per_step_median"] = statistics.median(cpu_audited)
        row["cpu_ratio_to_audited_floor"] = (row["cpu_ms_per_step_median"]
                                             / row["cpu_audited_floor_ms_per_step_median"])
        result["steps"][str(n)] = row
    # Flatness from the median step (robust to the odd slow fsync); bytes from N >= 100,
    # as below that a few partly filled pages weigh on a handful of steps.
    per_step = [r["ms_per_step_median"] for r in result["steps"].values()]
    per_byte = [r["bytes_per_step"] for n, r in result["steps"].items() if int(n) >= 100]
    per_byte = per_byte or [r["bytes_per_step"] for r in result["steps"].values()]
    result["per_step_spread"] = max(per_step) / min(per_step)
    cpu = [r["cpu_ms_per_step_median"] for r in result["steps"].values()]
    result["cpu_per_step_spread"] = max(cpu) / min(cpu)
    result["bytes_spread"] = max(per_byte) / min(per_byte)
    result["cpu_ratio_to_floor"] = statistics.median(
        r["cpu_ratio_to_floor"] for r in result["steps"].values())
    result["cpu_ratio_to_audited_floor"] = statistics.median(
        r["cpu_ratio_to_audited_floor"] for r in result["steps"].values())
    path = workdir / "long.db"
    t0 = time.perf_counter()
    long_run(path, long_steps)
    result["long_run"] = {"steps": long_steps, "build_s": time.perf_counter() - t0,
                          "bytes": used_bytes(path)}
    resumes = resume_ms(path, synchronous, max(repeat, 3))
    result["resume_ms"] = statistics.median(resumes)
    result["resume_ms_all"] = resumes
    result["show_ms"] = statistics.median(show_ms(path, long_steps, max(repeat, 3)))
    result["show_first_ms"] = statistics.median(show_ms(path, 1, max(repeat, 3)))
    result["targets_met"] = {
        "per_step_within_2x_floor": all(r["ratio_to_floor"] <= TARGETS["per_step_vs_floor"]
                                        for r in result["steps"].values()),
        "cpu_per_step_within_2x_floor": result["cpu_ratio_to_floor"] <= TARGETS["cpu_vs_floor"],
        "per_step_flat": result["per_step_spread"] <= TARGETS["flat"],
        "bytes_per_step_flat": result["bytes_spread"] <= TARGETS["flat"],
        "resume_within_100ms": result["resume_ms"] <= TARGETS["resume_ms"],
        "show_within_50ms": result["show_ms"] <= TARGETS["show_ms"],
    }
    return result


def table(r: dict[str, Any]) -> str:
    lines = [f"fsm step benchmark — synchronous={r['synchronous']}, SQLite {r['sqlite']}, "
             f"Python {r['python']}", "",
             f"{'N':>6} {'ms/step':>9} {'median':>8} {'floor ms':>9} {'median':>8} "
             f"{'ratio':>6} {'incl. setup':>12} {'bytes/step':>11} {'1-row commit':>13}"]
    for n, row in r["steps"].items():
        lines.append(f"{n:>6} {row['ms_per_step']:>9.3f} {row['ms_per_step_median']:>8.3f} "
                     f"{row['floor_ms_per_step']:>9.3f} {row['floor_ms_per_step_median']:>8.3f} "
                     f"{row['ratio_to_floor']:>5.2f}x {row['ms_per_step_incl_setup']:>12.3f} "
                     f"{row['bytes_per_step']:>11.0f} {row['disk_commit_ms']:>10.3f} ms")
    lines += ["", "CPU per step, without flushing (synchronous=OFF), median ms per step:"]
    for n, row in r["steps"].items():
        lines.append(f"{n:>6} fsm {row['cpu_ms_per_step_median']:.3f}, "
                     f"floor {row['cpu_floor_ms_per_step_median']:.3f}, "
                     f"ratio {row['cpu_ratio_to_floor']:.2f}x; audited floor "
                     f"{row['cpu_audited_floor_ms_per_step_median']:.3f}, "
                     f"ratio {row['cpu_ratio_to_audited_floor']:.2f}x")
    lines.append(f"==> CPU per step is {r['cpu_ratio_to_floor']:.2f}x the raw-SQLite floor's "
                 f"(median over N; target <= {TARGETS['cpu_vs_floor']:.0f}x)")
    lines.append(f"    and {r['cpu_ratio_to_audited_floor']:.2f}x the audited floor's (the "
                 "same rows, their JSON and hashes made again in plain json and hashlib)")
    lr = r["long_run"]
    lines += [
        "",
        f"median step, max/min over N: {r['per_step_spread']:.2f}; "
        f"bytes/step, max/min over N >= 100: {r['bytes_spread']:.2f}; "
        f"CPU per step, max/min over N: {r['cpu_per_step_spread']:.2f}",
        f"long run: {lr['steps']:,} steps, {lr['bytes'] / 1e6:.1f} MB",
        f"resume to next policy call: {r['resume_ms']:.1f} ms",
        f"show step {lr['steps']:,} (view_at): {r['show_ms']:.1f} ms; "
        f"show step 1: {r['show_first_ms']:.1f} ms",
        "",
        "(1-row commit: a bare one-row transaction just before, i.e. the disk's flush "
        "cost;\n if it moved between rows, so did every figure)",
        "targets: " + ", ".join(f"{k} {'yes' if v else 'NO'}"
                                for k, v in r["targets_met"].items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a bounded run of a few seconds (N=10,50; a 300-step long run)")
    parser.add_argument("--sizes", default=None, help="comma-separated N (default 10,100,1000)")
    parser.add_argument("--long-steps", type=int, default=None,
                        help="steps of the long run (default 10000)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (median)")
    parser.add_argument("--synchronous", default="FULL", help="SQLite synchronous mode")
    parser.add_argument("--json", action="store_true", help="print only the JSON")
    parser.add_argument("--json-out", default=None, help="also write the JSON to this file")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    a = parser.parse_args(argv)
    sizes = [int(s) for s in (a.sizes or ("10,50" if a.quick else "10,100,1000")).split(",")]
    long_steps = a.long_steps or (300 if a.quick else 10_000)
    repeat = a.repeat or (1 if a.quick else 3)
    workdir = Path(a.dir or tempfile.mkdtemp(prefix="fsm-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(sizes, long_steps, repeat, a.synchronous.upper(), workdir)
    finally:
        if a.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    blob = json.dumps(result, indent=2)
    if a.json_out:
        Path(a.json_out).write_text(blob + "\n")
    if not a.json:
        print(table(result), end="\n\n")
    print(blob)
    return 0


if __name__ == "__main__":
    os.environ.pop("FSM_FAULT", None)
    sys.exit(main())
