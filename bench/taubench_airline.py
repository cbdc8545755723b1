"""τ³-bench's 50 airline tasks through the airline desk, over the real airline MCP server
(``bench/taubench.py --domain airline``).

Replay: each task's reference actions, carried out by a scripted desk (with what the
policy adds: the profile first, a read of each reservation before a write, segment
statuses before a cancellation or cabin change, a search of each flight flown, each write
proposed and confirmed) and a scripted customer, on a fresh server (a new process: the
server keeps one database per process) behind the recording proxy. The expected state
is τ²-bench's: the reference actions applied directly to another fresh server of the
same package, no fsm. Both are read through the server's own read tools (every user,
reservation and booked flight-date the task touches), money in cents, and compared.

Violations: per task, one attempt per rule the task's customer can reach
(``workflows/airline/violations.py``), on one fresh server per task; each must be
refused by the gate for its own rule, and the proxy's record must show that no write,
nor the violating call, crossed to the server.

Figures: CPU per step of fsm's runs against the CPU per call of the reference actions
called directly on a server (this process's CPU in both; the server's is its own), and
the bytes each run's rows take in the store.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workflows.airline import data
from workflows.airline.replay import (
    Customer,
    Session,
    expected_state,
    plan,
    reference,
    touched,
)
from workflows.airline.violations import UNREACHABLE, attempts, judge
from workflows.airline.workflow import WRITES

#: The tasks of ``--quick`` (CI): a change and two cancellations (7), a booking (8), a
#: bag change (12), the transfer (13), a cancellation and a booking (14), flights,
#: passengers and bags (17), and a task with reads only (1).
QUICK = ("1", "7", "8", "12", "13", "14", "17")

#: The mismatches the policy explains: task → (what differs, why).
EXPLAINED = {
    "39": (["reservations MSJ4OA differs"],
           "the reference cancels MSJ4OA (economy, insured, booked 2024-05-05, flights on "
           "2024-05-22) because the customer gives up the seat for someone else: no condition "
           "of the policy holds (not within 24 hours, no flight cancelled by the airline, not "
           "business, and the reason is not one insurance covers), so the desk refuses the "
           "proposal and the reservation stays as it was; the task's other two cancellations "
           "run"),
}


def direct_cpu(task: dict[str, Any]) -> tuple[float, int]:
    """This process's CPU for the task's reference actions called directly on a fresh
    server (no fsm), and the number of calls."""
    from fsm.adapters.mcp import McpServer
    from workflows.airline.workflow import server_command

    source = McpServer("airline-direct", command=server_command(), timeout=60.0)
    try:
        source.list_tools()  # started before the clock
        cpu = time.process_time()
        for a in reference(task):
            source.call(a["name"], dict(a["arguments"]))
        return time.process_time() - cpu, len(reference(task))
    finally:
        source.close()


def _explain(got: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    out = []
    for kind, items in expected.items():
        for key, value in items.items():
            if got[kind].get(key) != value:
                out.append(f"{kind} {key} differs")
    return out


def replay(task: dict[str, Any], folder: Path) -> dict[str, Any]:
    moves = plan(task)
    with Session(folder) as session:
        report = session.run(f"task {task['id']}", moves, Customer(moves))
        got = session.snapshot(*touched(task))
    expected, errors = expected_state(task)
    sent = [c for c in report.writes_sent()]
    refs = [a for a in reference(task) if a["name"] in WRITES]
    why = _explain(got, expected)
    explained = EXPLAINED.get(task["id"])
    return {"task": task["id"], "matched": got == expected, "why": why,
            "explained": explained[1] if explained and explained[0] == why else None,
            "state": report.run.state, "steps": report.steps, "cpu_s": report.cpu_s,
            "bytes": report.bytes, "reference_writes": len(refs), "writes_sent": len(sent),
            "refusals": [e.reason for e in report.refusals()],
            "reference_errors": [e for e in errors if e],
            "inserted": Counter(m.inserted for m in moves if m.inserted)}


def violations(task: dict[str, Any], folder: Path) -> list[dict[str, Any]]:
    tries = attempts(task)
    if not tries:
        return []
    with Session(folder) as session:
        return [judge(session, a, f"v{i}") for i, a in enumerate(tries)]


def run(ids: Sequence[str] | None) -> dict[str, Any]:
    chosen = [t for t in data.tasks() if ids is None or t["id"] in ids]
    rows, vrows, direct = [], [], []
    with tempfile.TemporaryDirectory(prefix="fsm-airline-") as tmp:
        for t in chosen:
            rows.append(replay(t, Path(tmp) / f"r{t['id']}"))
            vrows += violations(t, Path(tmp) / f"v{t['id']}")
            if reference(t):
                direct.append(direct_cpu(t))
    return {"domain": "airline", "source": data.SOURCE, "tasks": rows, "violations": vrows,
            "summary": summary(rows, vrows, direct)}


def summary(rows: list[dict[str, Any]], vrows: list[dict[str, Any]],
            direct: list[tuple[float, int]]) -> dict[str, Any]:
    by: dict[str, dict[str, Any]] = {}
    for v in vrows:
        c = by.setdefault(v["class"], {"tasks": 0, "attempts": 0, "refused": 0, "own_rule": 0,
                                       "reached_server": 0, "refused_by": Counter()})
        c["tasks"] += 1
        c["attempts"] += 1
        c["refused"] += v["refused"]
        c["own_rule"] += v["own_rule"]
        c["reached_server"] += v["reached_server"]
        c["refused_by"][v["refused_by"]] += 1
    steps = sum(r["steps"] for r in rows)
    calls = sum(n for _, n in direct)
    return {
        "tasks": len(rows), "matched": sum(r["matched"] for r in rows),
        "explained": sum(bool(r["explained"]) for r in rows),
        "writes_sent": sum(r["writes_sent"] for r in rows),
        "reference_writes": sum(r["reference_writes"] for r in rows),
        "violations": {k: {**v, "refused_by": dict(v["refused_by"])} for k, v in by.items()},
        "unreachable_rules": UNREACHABLE,
        "cpu_per_step_ms": 1000 * sum(r["cpu_s"] for r in rows) / max(steps, 1),
        "direct_cpu_per_call_ms": 1000 * sum(c for c, _ in direct) / max(calls, 1),
        "bytes_per_task": statistics.mean(r["bytes"] for r in rows) if rows else 0,
        "bytes_max": max((r["bytes"] for r in rows), default=0),
    }


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    out = [f"## τ³-bench airline ({result['source']}), over the airline MCP server", "",
           f"**{s['matched']}/{s['tasks']} tasks match** ({s['explained']} more explained "
           "below) the expected state (the reference "
           "actions applied directly to a fresh server; users, reservations and booked "
           "flight-dates read through the server's tools, money in cents). Writes sent: "
           f"{s['writes_sent']} (reference: {s['reference_writes']}).", "",
           "| task | matched | state | steps | writes sent / reference | bytes | why |",
           "|---|---|---|---:|---:|---:|---|"]
    for r in result["tasks"]:
        why = (f"{'; '.join(r['why'])}: {r['explained']}" if r["explained"] else
               "; ".join(r["why"]) or ("no write in the reference" if not r["reference_writes"]
                                       else ""))
        out.append(f"| {r['task']} | {'yes' if r['matched'] else '**no**'} | {r['state']} | "
                   f"{r['steps']} | {r['writes_sent']}/{r['reference_writes']} | "
                   f"{r['bytes']:,} | {why} |")
    out += ["", "| violation | tasks | refused | for its own rule | reached the server | "
            "refused by |", "|---|---:|---:|---:|---:|---|"]
    for k, v in s["violations"].items():
        by = ", ".join(f"{a} {n}" for a, n in sorted(v["refused_by"].items(), key=str))
        out.append(f"| {k} | {v['tasks']} | {v['refused']} | {v['own_rule']} | "
                   f"{v['reached_server']} | {by} |")
    out += ["", *(f"Not generated: {k} ({why})." for k, why in s["unreachable_rules"].items()),
            "", f"CPU per step (fsm, this process): {s['cpu_per_step_ms']:.2f} ms; per direct "
            f"call of the reference actions: {s['direct_cpu_per_call_ms']:.2f} ms. Bytes per "
            f"task in the store: {s['bytes_per_task']:,.0f} on average, {s['bytes_max']:,} at "
            "most.", ""]
    return "\n".join(out)


def failures(result: dict[str, Any]) -> list[str]:
    """What makes the benchmark fail: a task unmatched, a violation not refused for its own
    rule, anything that crossed to the server."""
    s = result["summary"]
    out = [f"task {r['task']} did not match: {'; '.join(r['why'])}" for r in result["tasks"]
           if not r["matched"] and not r["explained"]]
    out += [f"violation {k}: {v['refused']}/{v['attempts']} refused, {v['own_rule']} for its "
            f"rule, {v['reached_server']} reached the server"
            for k, v in s["violations"].items()
            if v["refused"] != v["attempts"] or v["own_rule"] != v["attempts"]
            or v["reached_server"]]
    return out
