"""Read-only commands: runs, approvals, show, history, audit."""

from __future__ import annotations

import json
from typing import Any

import typer

from fsm.errors import RunError

from .app import DB_HELP, JSON_HELP, MAX_INT, app, console, print_json, print_table
from .context import fmt_time, path_of, reader_for, spec_for_run
from .history import history_rows

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
#: Every run status (``fsm.records.STATUSES``, which ``import fsm.cli`` does not load;
#: tests/test_cli_runs.py holds the two equal).
STATUSES = ("running", "awaiting_approval", "done", "failed", "budget_exhausted",
            "handed_over", "model_unavailable")


@app.command("runs")
def runs_cmd(
    status: str | None = typer.Option(None, "--status", help=f"one of: {', '.join(STATUSES)}"),
    workflow: str | None = typer.Option(None, "--workflow", help="only runs of this workflow"),
    # One less than the largest integer: one more run than asked for is read (see below).
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_INT - 1,
                              help="how many runs to show"),
    offset: int = typer.Option(0, "--offset", min=0, max=MAX_INT,
                               help="skip this many of the newest runs first"),
    show_all: bool = typer.Option(False, "--all", help="every run (ignores --limit)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List runs, newest first: the newest 50 unless --limit, --offset or --all."""
    if status is not None and status not in STATUSES:
        raise typer.BadParameter(f"unknown status {status!r} (allowed: {', '.join(STATUSES)})",
                                 param_hint="--status")
    with reader_for(db) as store:
        # One more than asked for tells whether there are more to page to.
        runs = store.list_runs(status, workflow=workflow, offset=offset, newest_first=True,
                               limit=None if show_all else limit + 1)
    more = not show_all and len(runs) > limit
    runs = runs if show_all else runs[:limit]
    rows = [{
        "run_id": r.run_id, "workflow": r.workflow, "user": r.user, "status": r.status,
        "state": r.state, "steps": r.used.steps, "cost_micros": r.used.cost_micros,
        "updated": fmt_time(r.updated_at), "reason": r.reason,
    } for r in runs]
    if as_json:
        print_json(rows)
        return
    cols = ["run_id", "workflow", "user", "status", "state", "steps", "cost_micros", "updated",
            "reason"]
    print_table(None, cols, [[row[c] for c in cols] for row in rows])
    if more:
        console.print(f"runs {offset + 1}-{offset + len(rows)}, newest first; more with "
                      f"--offset {offset + len(rows)} or --all", markup=False)
    elif not rows:
        console.print("no runs" + (" match" if status or workflow or offset else ""),
                      markup=False)


@app.command("approvals")
def approvals_cmd(db: str | None = DbOpt, as_json: bool = JsonOpt) -> None:
    """List pending approvals."""
    from fsm.presentation import waits_for

    rows = []
    with reader_for(db) as store:
        for a in store.approvals(pending_only=True):
            run = store.load_run(a.run_id)
            events = run.pending.events if run.pending else []
            shown = spec_for_run(store, run).presentation
            rows.append({
                "run_id": a.run_id, "user": run.user, "state": run.state,
                "waits_for": waits_for(a.tool, events),
                "asks": shown.describe(a.tool, a.args, run.facts, events), "arguments": a.args,
                "amount": shown.money_text(a.tool, a.args),
                "requested": fmt_time(a.requested_at), "expires": fmt_time(a.expires_at),
            })
    if as_json:
        print_json(rows)
        return
    cols = ["run_id", "user", "state", "waits_for", "asks", "arguments", "amount", "requested",
            "expires"]
    print_table(None, cols, [
        [json.dumps(r[c], ensure_ascii=False) if c == "arguments" else r[c] for c in cols]
        for r in rows
    ])


@app.command("show")
def show_cmd(
    run_id: str = typer.Argument(..., help="the run"),
    step: int | None = typer.Option(None, "--step", min=1, max=MAX_INT,
                                    help="step (default: the latest)"),
    request: bool = typer.Option(False, "--request",
                                 help="print the exact chat-completions request body sent"),
    model: str | None = typer.Option(None, "--model", help="model name for --request "
                                     "(default: the model the run started with)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print exactly what the model saw at a step: state, offered tools, transcript."""
    from fsm.runtime.view import view_at

    with reader_for(db) as store:
        run = store.load_run(run_id)
        spec = spec_for_run(store, run)
        view = view_at(spec, store, run_id, step)
        if view is None:
            what = f"step {step}" if step is not None else "any step"
            recorded = f"recorded steps: 1..{run.step}" if run.step else \
                "it has not been driven yet"
            raise RunError(f"run {run_id!r} has no view recorded for {what} ({recorded})",
                           run_id=run_id)
        name = (model or _run_model(store, run_id)) if request else ""
    if request:
        from fsm.adapters.translate import encode, request_body

        typer.echo(encode(request_body(view, name)).decode())
        return
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    console.print(f"run {run_id}  step {view.step}  state {view.state}", markup=False)
    console.print(f"tools: {', '.join(view.tool_names()) or 'none'}", markup=False)
    if view.events:
        console.print(f"events: {', '.join(view.events)}", markup=False)
    if view.instructions:
        console.print(f"instructions: {view.instructions}", markup=False)
    console.print("transcript:")
    for i, msg in enumerate(view.messages):
        console.print(f"  [{i}] {_line(msg)}", markup=False)


def _run_model(store: Any, run_id: str) -> str:
    from fsm.records import start_detail

    policy = str(start_detail(store.events(run_id)).get("policy", ""))
    if not policy.startswith("model:"):
        raise RunError(f"run {run_id!r} was not driven by a model ({policy or 'unknown'}); "
                       "give --model NAME", run_id=run_id)
    return policy.removeprefix("model:")


def _line(msg: dict[str, Any]) -> str:
    role = msg.get("role", "?")
    rest = {k: v for k, v in msg.items() if k != "role"}
    return f"{role:9} {json.dumps(rest, ensure_ascii=False, sort_keys=True)}"


@app.command("history")
def history_cmd(
    run_id: str = typer.Argument(..., help="the run"),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="also the policy calls that cost nothing"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print the event log of a run: decisions with their notes, tool calls with a short
    form of their arguments and results, refusals, stops."""
    with reader_for(db) as store:
        events = store.events(run_id)
        if as_json:
            print_json([e.model_dump(mode="json") for e in events])
            return
        run = store.load_run(run_id)
        spec = spec_for_run(store, run, events)
        rows = history_rows(spec, events, store.messages(run_id), verbose=verbose)
        path = path_of(store, run_id, events)
    print_table(f"history of {run_id}: {' → '.join(path)}",
                ["step", "time", "kind", "state", "tool/event", "detail", "cost", "reviewer"],
                rows)


@app.command("audit")
def audit_cmd(run_id: str = typer.Argument(..., help="the run"), db: str | None = DbOpt,
              as_json: bool = JsonOpt) -> None:
    """Verify a run's hash chain and its log against the run row; exit 1 if altered."""
    from fsm.auditor.audit import audit

    with reader_for(db) as store:
        report = audit(store, run_id)
    if as_json:
        print_json({"run_id": run_id, "ok": report.ok, "events": report.events,
                    "head": report.head, "problems": report.problems})
    elif report.ok:
        console.print(f"audit ok: {run_id}: {report.events} events, hash chain intact, "
                      "log consistent with the run, its approvals and its effects", markup=False)
        console.print(f"head {report.head}", markup=False)
    else:
        console.print(f"audit FAILED: {run_id}: {report.problems[0]}", markup=False)
        for p in report.problems[1:]:
            console.print(f"  also: {p}", markup=False)
    if not report.ok:
        raise typer.Exit(1)
