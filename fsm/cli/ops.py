"""Operator commands that drive runs: run, resume, approve, deny, sweep."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from . import exits
from .app import DB_HELP, JSON_HELP, MAX_INT, app, console, err_console, print_json
from .context import (
    UsageError,
    check_clock,
    clock,
    engine_for_run,
    make_policy,
    path_of,
    refuse_empty,
    spec_for_run,
    store_for,
)
from .goal import GOAL_HELP, read_goal

# The runtime is imported by the commands that use it, so that ``fsm --help`` stays fast.
if TYPE_CHECKING:
    from fsm.records import RunState
    from fsm.store import Store

DbOpt = typer.Option(None, "--db", help=DB_HELP)
TimeoutOpt = typer.Option(None, "--timeout", help="seconds to wait for each model reply "
                          "(default 60; raise it for slow local models); needs --model")
EventOpt = typer.Option(
    None, "--event", help="the human event to fire, when the run waits for one of several "
    "(default: the workflow's approve or deny event)")
NoDriveOpt = typer.Option(False, "--no-drive",
                          help="only record the decision; a worker (fsm worker) continues the run")
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
def finish(store: Store, run: RunState, as_json: bool) -> None:
    """Report the run, then exit with the code of its status (see ``fsm --help``)."""
    report(store, run, as_json)
    raise typer.Exit(exits.for_status(run.status))


def report(store: Store, run: RunState, as_json: bool) -> None:
    """Print the run id, the state path and the final status."""
    from fsm.presentation import waits_for

    events = store.events(run.run_id)
    path = path_of(store, run.run_id, events)
    data: dict[str, Any] = {
        "run_id": run.run_id, "workflow": run.workflow, "status": run.status,
        "state": run.state, "path": path, "step": run.step, "reason": run.reason,
        "answer": run.answer, "cost_micros": run.used.cost_micros, "tokens": run.used.tokens,
    }
    if run.pending is not None:
        data["pending"] = run.pending.model_dump(mode="json")
    if as_json:
        print_json(data)
        return
    console.print(f"run      {run.run_id}", markup=False)
    console.print(f"path     {' → '.join(path)}", markup=False)
    line = f"status   {run.status}"
    if run.reason:
        line += f" ({run.reason})"
    console.print(line, markup=False)
    if run.status == "awaiting_approval" and run.pending is not None:
        p = run.pending
        args = json.dumps(p.args, ensure_ascii=False, sort_keys=True)
        shown = spec_for_run(store, run, events).presentation
        amount = shown.money_text(p.tool, p.args)
        console.print(f"waiting  for a person ({waits_for(p.tool, p.events)}): {args}"
                      + (f", amount {amount}" if amount else ""), markup=False)
        console.print(f"asks     {shown.describe(p.tool, p.args, run.facts, p.events)}",
                      markup=False)


@app.command("run", epilog=exits.HELP)
def run_cmd(
    workflow: str = typer.Argument(..., help="registered workflow name or module:attr"),
    goal: str = typer.Argument(..., help=GOAL_HELP),
    user: str = typer.Option("", "--user", help="the customer/user the run acts for"),
    run_id: str | None = typer.Option(None, "--run-id", help="run id (default: random)"),
    policy: str | None = typer.Option(None, "--policy", help="policy as module:attr"),
    model: str | None = typer.Option(None, "--model", help="drive the run with this model"),
    base_url: str | None = typer.Option(None, "--base-url",
                                        help="OpenAI-compatible endpoint for --model"),
    timeout: float | None = TimeoutOpt,
    max_steps: int = typer.Option(50, "--max-steps", min=1, max=MAX_INT, help="step budget"),
    max_cost_micros: int | None = typer.Option(None, "--max-cost-micros", min=0, max=MAX_INT,
                                               help="cost budget in micro-units"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, max=MAX_INT,
                                          help="token budget"),
    max_seconds: float | None = typer.Option(None, "--max-seconds", min=0, max=1e12,
                                             help="active-time budget in seconds"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Start a run and drive it until it stops (awaiting_approval is a normal stop)."""
    text = read_goal(goal)
    if run_id is not None and not run_id.strip():
        raise UsageError("--run-id must not be empty")
    check_clock()
    from fsm.records import Budgets, new_id
    from fsm.registry import load_workflow
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.engine import Engine

    spec = load_workflow(workflow)
    fn, policy_name = make_policy(workflow, spec, policy, model, base_url, timeout)
    budgets = Budgets(max_steps=max_steps, max_cost_micros=max_cost_micros,
                      max_tokens=max_tokens, max_active_seconds=max_seconds)
    meta: dict[str, Any] = {"workflow_ref": workflow, "policy": policy_name}
    if base_url:
        meta["base_url"] = base_url
    if timeout is not None:
        meta["timeout"] = timeout  # approve and deny reuse it
    run_id = run_id or new_id()  # named here, so that an interrupt can name it
    with store_for(db) as store, interruptible(store, run_id):
        engine = Engine(spec, store, fn, clock=clock, compactor=Compactor())
        run = engine.start(text, user=user, run_id=run_id, budgets=budgets, meta=meta)
        finish(store, run, as_json)


@contextmanager
def interruptible(store: Store, run_id: str) -> Iterator[None]:
    """Ctrl-C while a run is driven: one line on what became of the run, exit 130. Every
    step commits whole or not at all, so the run stops at its last committed step."""
    try:
        yield
    except KeyboardInterrupt:
        err_console.print(f"interrupted: {_left(store, run_id)}", markup=False)
        raise typer.Exit(exits.INTERRUPTED) from None


def _left(store: Store, run_id: str) -> str:
    try:
        status = store.load_run(run_id).status
    except Exception:  # the interrupt may have come before the run existed, or mid-read
        status = "running"
    if status == "awaiting_approval":
        return f"run {run_id} still waits for a person (fsm approve {run_id} or fsm deny)"
    if status == "running":
        return f"run {run_id} stays resumable (fsm resume {run_id})"
    return f"run {run_id} stopped as {status}"


def _raised(max_steps: int | None, max_cost_micros: int | None, max_tokens: int | None,
            max_seconds: float | None) -> dict[str, Any]:
    given = {"max_steps": max_steps, "max_cost_micros": max_cost_micros,
             "max_tokens": max_tokens, "max_active_seconds": max_seconds}
    return {k: v for k, v in given.items() if v is not None}


@app.command("resume", epilog=exits.HELP)
def resume_cmd(
    run_id: str = typer.Argument(..., help="the run to continue"),
    policy: str | None = typer.Option(None, "--policy", help="override the policy"),
    model: str | None = typer.Option(None, "--model", help="override with this model"),
    base_url: str | None = typer.Option(None, "--base-url", help="endpoint for --model"),
    timeout: float | None = TimeoutOpt,
    take_over: bool = typer.Option(
        False, "--take-over",
        help="take the run from a lease holder this host cannot see (another machine, a "
             "reused pid); only when you know that process is gone"),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, max=MAX_INT,
                                         help="raise the step budget to this"),
    max_cost_micros: int | None = typer.Option(None, "--max-cost-micros", min=0, max=MAX_INT,
                                               help="raise the cost budget to this"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, max=MAX_INT,
                                          help="raise the token budget to this"),
    max_seconds: float | None = typer.Option(None, "--max-seconds", min=0, max=1e12,
                                             help="raise the active-time budget to this"),
    by: str | None = typer.Option(None, "--by", help="who raises the budget, for the log "
                           "(default: the login name)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Continue a run from its last checkpoint; --max-* raise the budgets of a run that
    stopped as budget_exhausted (logged with --by)."""
    from fsm.records import FINAL_STATUSES

    raised = _raised(max_steps, max_cost_micros, max_tokens, max_seconds)
    operator = _operator(by) if raised else ""
    with store_for(db) as store:
        run = store.load_run(run_id)
        if not raised and run.status in FINAL_STATUSES:
            err_console.print(f"run {run_id!r} has already finished ({run.status}); nothing "
                              "to resume" + _how_to_continue(run), markup=False)
            finish(store, run, as_json)
        _refuse_new_limits(run, raised)
        engine = engine_for_run(store, run_id, policy=policy, model=model, base_url=base_url,
                                timeout=timeout)
        with interruptible(store, run_id):
            if raised:
                _raise_budgets(engine, run_id, raised, operator)
            finish(store, engine.resume(run_id, take_over=take_over), as_json)


#: How ``fsm resume`` names each budget.
_BUDGET_WORDS = {"max_steps": "step", "max_cost_micros": "cost", "max_tokens": "token",
                 "max_active_seconds": "active-time"}


def _refuse_new_limits(run: RunState, raised: dict[str, Any]) -> None:
    """Raising a budget the run has no limit for would impose one: refused."""
    for name in raised:
        if getattr(run.budgets, name) is None:
            flag = "--max-seconds" if name == "max_active_seconds" else "--" + \
                name.replace("_", "-")
            raise UsageError(f"run {run.run_id!r} has no {_BUDGET_WORDS[name]} limit; "
                             f"nothing to raise (leave out {flag})")


def _raise_budgets(engine: Any, run_id: str, raised: dict[str, Any], by: str) -> None:
    """Raise the budgets; a refused limit (not above what was used, a run that cannot run
    again) is a usage error: nothing was changed."""
    from fsm.errors import ConcurrentUpdate, LeaseLost, RunError, RunLocked

    try:
        engine.raise_budgets(run_id, raised, by=by)
    except (RunLocked, LeaseLost, ConcurrentUpdate):
        raise
    except RunError as exc:
        raise UsageError(str(exc)) from None


def _operator(by: str | None) -> str:
    if by is not None:
        if not by.strip():
            raise UsageError("--by must name who raises the budget, not be empty")
        return by.strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell who you are: give --by NAME") from None


def _how_to_continue(run: RunState) -> str:
    if run.status == "budget_exhausted":
        return " (raise its budget to continue, e.g. --max-steps N)"
    return ""


def _decide(run_id: str, approved: bool, reviewer: str, note: str, db: str | None,
            as_json: bool, event: str | None = None, no_drive: bool = False,
            amend: dict[str, Any] | None = None) -> None:
    if not reviewer.strip():
        raise UsageError("--reviewer must name who decides, not be empty")
    refuse_empty(event=event)
    with store_for(db) as store:
        engine = engine_for_run(store, run_id)
        with interruptible(store, run_id):
            run = engine.decide(run_id, approved, reviewer, note, event=event,
                                drive=not no_drive, amend=amend)
            finish(store, run, as_json)


def parse_sets(sets: list[str]) -> dict[str, Any]:
    """``field=value`` pairs; a value that reads as JSON (a number) is that, else text."""
    out: dict[str, Any] = {}
    for item in sets:
        field, sep, raw = item.partition("=")
        if not sep or not field.strip():
            raise UsageError(f"--set takes field=value, not {item!r}")
        try:
            out[field.strip()] = json.loads(raw)
        except ValueError:
            out[field.strip()] = raw
    return out


@app.command("approve", epilog=exits.HELP)
def approve_cmd(
    run_id: str = typer.Argument(..., help="the paused run"),
    reviewer: str = typer.Option(..., "--reviewer", help="who approves"),
    note: str = typer.Option("", "--note", help="a note for the log"),
    event: str | None = EventOpt,
    no_drive: bool = NoDriveOpt,
    sets: list[str] = typer.Option(  # noqa: B008 - typer's way to declare a repeated option
        [], "--set", help="approve with a changed argument, field=value (e.g. "
        "amount_paise=120000), where the workflow allows it; repeatable"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Approve what a paused run waits for, then continue it in this process."""
    _decide(run_id, True, reviewer, note, db, as_json, event, no_drive,
            parse_sets(sets) or None)


@app.command("deny", epilog=exits.HELP)
def deny_cmd(
    run_id: str = typer.Argument(..., help="the paused run"),
    reviewer: str = typer.Option(..., "--reviewer", help="who denies"),
    note: str = typer.Option(..., "--note", help="why; the model reads it"),
    event: str | None = EventOpt,
    no_drive: bool = NoDriveOpt,
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Deny what a paused run waits for, then continue it in this process."""
    if not note.strip():
        raise UsageError("--note must say why the request is denied")
    _decide(run_id, False, reviewer, note, db, as_json, event, no_drive)


@app.command("sweep")
def sweep_cmd(db: str | None = DbOpt, as_json: bool = JsonOpt) -> None:
    """Apply expired approvals (the workflow's expiry event, e.g. expired → handed_over)."""
    with store_for(db) as store:
        touched = _sweep(store)
    if as_json:
        print_json(touched)
        return
    if not touched:
        console.print("no expired approvals")
    for t in touched:
        console.print(f"expired  {t['run_id']} → {t['state']} ({t['status']})", markup=False)


def _sweep(store: Store) -> list[dict[str, Any]]:
    from fsm.runtime.engine import Engine

    touched: list[dict[str, Any]] = []
    by_workflow: dict[str, RunState] = {}
    for a in store.approvals(pending_only=True):
        run = store.load_run(a.run_id)
        by_workflow.setdefault(run.workflow, run)
    for run in by_workflow.values():
        engine = Engine(spec_for_run(store, run), store, clock=clock)
        skipped: list[tuple[str, str]] = []
        for run_id in engine.sweep(skipped):
            after = store.load_run(run_id)
            touched.append({"run_id": run_id, "status": after.status, "state": after.state})
        for run_id, why in skipped:
            err_console.print(f"skipped {run_id}: {why}", markup=False)
    return touched
