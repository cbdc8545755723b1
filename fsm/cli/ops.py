"""Operator commands that drive runs: run, resume, approve, deny, sweep."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from . import exits
from .app import (
    DB_HELP,
    JSON_HELP,
    MAX_INT,
    POLICY_HELP,
    WORKFLOW_HELP,
    app,
    console,
    err_console,
    print_json,
    settings,
    skipped_rows,
)
from .asked import customer_data, customer_lines
from .context import (
    ModelFlags,
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
from .retrying import retry_of, retrying

# The runtime is imported by the commands that use it, so that ``fsm --help`` stays fast.
if TYPE_CHECKING:
    from fsm.definition.presentation import Presentation
    from fsm.records import RunState
    from fsm.store import Store
    from fsm.store.roles import Approvals, Requests, RunReads

DbOpt = typer.Option(None, "--db", help=DB_HELP)
TimeoutOpt = typer.Option(None, "--timeout", help="seconds to wait for each model reply "
                          "(default 60; raise it for slow local models); needs --model")
CapOpt = typer.Option(None, "--max-output-tokens", max=MAX_INT,
                      help="tokens each model reply may have (default 1024); needs --model")
NoForceOpt = typer.Option(False, "--no-force", help="never ask the model server for a tool "
                          "call (tool_choice), for servers that fail on it; needs --model")
ServerOpt = typer.Option(None, "--server", help="the model server's family: auto (default: "
                         "recognised), openai, vllm, llama.cpp, llama-cpp-python, ollama, "
                         "generic; needs --model")
EventOpt = typer.Option(
    None, "--event", help="the human event to fire, when the run waits for one of several "
    "(default: the workflow's approve or deny event)")
NoDriveOpt = typer.Option(False, "--no-drive",
                          help="only record the decision; a worker (fsm worker) continues the run")
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
def finish(store: RunReads, run: RunState, as_json: bool,
           extra: dict[str, Any] | None = None, lines: list[str] | None = None) -> None:
    """Report the run, then exit with the code of its status (see ``fsm --help``)."""
    report(store, run, as_json, extra, lines)
    raise typer.Exit(exits.for_status(run.status))


def report(store: RunReads, run: RunState, as_json: bool, extra: dict[str, Any] | None = None,
           lines: list[str] | None = None) -> None:
    """Print the run id, the state path and the final status (``extra``: more JSON fields;
    ``lines``: more lines of text, printed first)."""
    from fsm.definition.presentation import waits_for

    events = store.events(run.run_id)
    path = path_of(store, run.run_id, events)
    data: dict[str, Any] = {
        "run_id": run.run_id, "workflow": run.workflow, "status": run.status,
        "state": run.state, "path": path, "step": run.step, "reason": run.reason,
        "answer": run.answer, "cost_micros": run.used.cost_micros, "tokens": run.used.tokens,
    }
    if run.pending is not None:
        data["pending"] = run.pending.model_dump(mode="json")
    data.update(customer_data(run))
    data.update(extra or {})
    if as_json:
        print_json(data)
        return
    for line in lines or []:
        console.print(line, markup=False)
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
    if run.status == "awaiting_customer":
        for line in customer_lines(spec_for_run(store, run, events), run):
            console.print(line, markup=False)


@app.command("run", epilog=exits.HELP)
def run_cmd(
    workflow: str = typer.Argument(..., help=WORKFLOW_HELP),
    goal: str = typer.Argument(..., help=GOAL_HELP),
    user: str = typer.Option("", "--user", help="the customer the run acts for (tools read it "
                             "as ctx.user); default: \"\", a run of no one"),
    run_id: str | None = typer.Option(None, "--run-id", help="run id (default: random)"),
    policy: str | None = typer.Option(None, "--policy", help=POLICY_HELP),
    model: str | None = typer.Option(None, "--model", help="drive the run with this model"),
    base_url: str | None = typer.Option(None, "--base-url",
                                        help="OpenAI-compatible endpoint for --model"),
    timeout: float | None = TimeoutOpt,
    max_output_tokens: int | None = CapOpt,
    no_force: bool = NoForceOpt,
    server: str | None = ServerOpt,
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
    from fsm.definition.registry import load_workflow
    from fsm.records import Budgets, new_id
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.engine import Engine

    spec = load_workflow(workflow)
    flags = ModelFlags(timeout=timeout, max_output_tokens=max_output_tokens,
                       no_force=no_force, server=server)
    fn, record = make_policy(workflow, spec, policy, model, base_url, flags=flags)
    budgets = Budgets(max_steps=max_steps, max_cost_micros=max_cost_micros,
                      max_tokens=max_tokens, max_active_seconds=max_seconds)
    # The policy, base URL, timeout and settings: resume, approve and deny reuse them.
    meta: dict[str, Any] = {"workflow_ref": workflow, **record}
    run_id = run_id or new_id()  # named here, so that an interrupt can name it
    with store_for(db) as store, interruptible(store, run_id):
        engine = Engine(spec, store, fn, clock=settings().clock, compactor=Compactor(),
                        retry=retry_of(settings()))
        if spec.converses:
            chat = engine.start_conversation(text, user=user, run_id=run_id, budgets=budgets,
                                             meta=meta)
            finish(store, chat.run, as_json, {"reply_token": chat.token}, [
                f"token    {chat.token} (the customer's reply token for fsm serve's chat "
                "endpoint; shown only now)"])

        def start() -> RunState:
            return engine.start(text, user=user, run_id=run_id, budgets=budgets, meta=meta)

        def again() -> RunState:  # the run exists unless its creation did not land
            return engine.resume(run_id) if _exists(store, run_id) else start()

        finish(store, retrying(start, again, engine.retry), as_json)


@contextmanager
def interruptible(store: RunReads, run_id: str) -> Iterator[None]:
    """Ctrl-C while a run is driven: one line on what became of the run, exit 130. Every
    step commits whole or not at all, so the run stops at its last committed step."""
    try:
        yield
    except KeyboardInterrupt:
        err_console.print(f"interrupted: {_left(store, run_id)}", markup=False)
        raise typer.Exit(exits.INTERRUPTED) from None


def _left(store: RunReads, run_id: str) -> str:
    try:
        status = store.load_run(run_id).status
    except Exception:  # the interrupt may have come before the run existed, or mid-read
        status = "running"
    if status == "awaiting_approval":
        return f"run {run_id} still waits for a person (fsm approve {run_id} or fsm deny)"
    if status == "awaiting_customer":
        return f"run {run_id} waits for its customer (fsm reply {run_id} TEXT)"
    if status == "running":
        return f"run {run_id} stays resumable (fsm resume {run_id})"
    return f"run {run_id} stopped as {status}"


def _exists(store: RunReads, run_id: str) -> bool:
    from fsm.errors import RunNotFound

    try:
        store.load_run(run_id)
    except RunNotFound:
        return False
    return True


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
    max_output_tokens: int | None = CapOpt,
    no_force: bool = NoForceOpt,
    server: str | None = ServerOpt,
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
        flags = ModelFlags(timeout=timeout, max_output_tokens=max_output_tokens,
                           no_force=no_force, server=server)
        engine, record = engine_for_run(store, run_id, policy=policy, model=model,
                                        base_url=base_url, flags=flags)
        with interruptible(store, run_id):
            if raised:
                _raise_budgets(engine, run_id, raised, operator)
            run = retrying(
                lambda: engine.resume(run_id, take_over=take_over, policy_record=record),
                lambda: engine.resume(run_id, policy_record=record), engine.retry)
            finish(store, run, as_json)


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
            sets: list[str] | None = None) -> None:
    from fsm._names import is_blank

    if is_blank(reviewer):
        raise UsageError("--reviewer must name who decides, not be empty")
    refuse_empty(event=event)
    pairs = parse_sets(sets or [])
    with store_for(db) as store:
        engine, _ = engine_for_run(store, run_id)
        amend = set_values(pairs, engine.spec.presentation) or None
        waiting_on = store.load_run(run_id).pending

        def decide() -> RunState:
            return engine.decide(run_id, approved, reviewer, note, event=event,
                                 drive=False, amend=amend)

        def again() -> RunState:  # decide again unless the decision landed
            run = store.load_run(run_id)
            if run.status == "awaiting_approval" and run.pending == waiting_on:
                return decide()
            return run

        with interruptible(store, run_id):
            run = retrying(decide, again, engine.retry)
            if not no_drive and run.status == "running":
                run = retrying(lambda: engine.resume(run_id), lambda: engine.resume(run_id),
                               engine.retry)
            finish(store, run, as_json)


def parse_sets(sets: list[str]) -> dict[str, str]:
    """``field=value`` pairs, the values as typed."""
    out: dict[str, str] = {}
    for item in sets:
        field, sep, raw = item.partition("=")
        if not sep or not field.strip():
            raise UsageError(f"--set takes field=value, not {item!r}")
        out[field.strip()] = raw
    return out


def set_values(pairs: dict[str, str], shown: Presentation) -> dict[str, Any]:
    """The changes ``--set`` asks for: the workflow's amount field as money in its
    currency (``amount_paise=1,200`` is ₹1,200), any other value as JSON if it reads as
    JSON (a number), else as text."""
    from fsm.errors import AmountError

    out: dict[str, Any] = {}
    for field, raw in pairs.items():
        if field == shown.amount_field:
            try:
                out[field] = shown.parse_money(raw, f"--set {field}")
            except AmountError as exc:
                raise UsageError(f"{exc}; nothing was decided") from None
            continue
        try:
            out[field] = json.loads(raw)
        except ValueError:
            out[field] = raw
    return out


@app.command("approve", epilog=exits.HELP)
def approve_cmd(
    run_id: str = typer.Argument(..., help="the paused run"),
    reviewer: str = typer.Option(..., "--reviewer", help="who approves"),
    note: str = typer.Option("", "--note", help="a note for the log"),
    event: str | None = EventOpt,
    no_drive: bool = NoDriveOpt,
    sets: list[str] = typer.Option(  # noqa: B008 - typer's way to declare a repeated option
        [], "--set", help="approve with a changed argument, field=value, where the workflow "
        "allows it; the workflow's amount is typed in its currency, in major units "
        "(1,200 or 1200.50: twelve hundred of the currency, not of its minor unit); "
        "repeatable"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Approve what a paused run waits for, then continue it in this process."""
    _decide(run_id, True, reviewer, note, db, as_json, event, no_drive, sets)


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
    from fsm._names import is_blank

    if is_blank(note):
        raise UsageError("--note must say why the request is denied (spaces and invisible "
                         "characters alone are no note)")
    _decide(run_id, False, reviewer, note, db, as_json, event, no_drive)


@app.command("sweep")
def sweep_cmd(db: str | None = DbOpt, as_json: bool = JsonOpt) -> None:
    """Apply expired approvals (the workflow's expiry event, e.g. expired → handed_over)
    and waits for customers that passed their time (the workflow's reply_expiry_event);
    read replies a process left unread.

    Each run is swept on its own: a run another process drives is skipped for the next
    sweep; a damaged row, or a run that cannot be written, is named on an ``error:`` line
    (the command then exits 1) and everything else due is applied all the same."""
    problems: list[str] = []
    damaged: list[Any] = []
    with store_for(db) as store:
        touched = _sweep(store, problems, damaged)
    if as_json:
        print_json(touched)
    else:
        if not touched:
            console.print("no expired approvals or conversations")
        for t in touched:
            console.print(f"expired  {t['run_id']} → {t['state']} ({t['status']})",
                          markup=False)
    skipped_rows(damaged, "skipped")
    for line in problems:
        err_console.print(f"error: {' '.join(line.split())}", markup=False)
    if problems:
        raise typer.Exit(exits.ERROR)


def _sweep(store: Store, problems: list[str], damaged: list[Any]) -> list[dict[str, Any]]:
    """Sweep every workflow's runs; what cannot be swept goes to ``problems``, the damaged
    rows of runs it skipped to ``damaged``."""
    from fsm.errors import FSMError
    from fsm.runtime.engine import Engine

    touched: list[dict[str, Any]] = []
    for run in _due_by_workflow(store, damaged, problems):
        try:
            engine = Engine(spec_for_run(store, run), store, clock=settings().clock)
        except FSMError as exc:
            problems.append(f"cannot sweep the runs of workflow {run.workflow!r}: {exc}")
            continue
        swept = engine.sweep(raising=False)
        damaged += swept.damaged
        for run_id in swept:
            after = store.load_run(run_id)
            touched.append({"run_id": run_id, "status": after.status, "state": after.state})
        for run_id, why in swept.skipped:
            err_console.print(f"skipped {run_id}: {why}", markup=False)
        problems += [f"cannot sweep run {run_id!r}: {why}" for run_id, why in swept.failed]
    problems[:] = dict.fromkeys(problems)  # a run found broken twice is named once
    return touched


def _due_by_workflow(store: Requests, damaged: list[Any], problems: list[str]) -> list[RunState]:
    """One run of each workflow with an expired approval or a run waiting for its customer
    (its engine sweeps them all)."""
    from fsm.errors import FSMError, RowDamaged

    by_workflow: dict[str, RunState] = {}
    now = clock()
    pending = store.approvals(pending_only=True, skip_damaged=True)
    damaged += pending.damaged
    for a in pending:
        if a.expires_at > now:
            continue
        try:
            run = store.load_run(a.run_id)
        except RowDamaged as exc:
            damaged.append(exc)
            continue
        except FSMError as exc:
            problems.append(f"cannot sweep run {a.run_id!r}: {' '.join(str(exc).split())}")
            continue
        by_workflow.setdefault(run.workflow, run)
    customers = store.list_runs("awaiting_customer", skip_damaged=True)
    approvals = store.list_runs("awaiting_approval", skip_damaged=True)
    damaged += customers.damaged + approvals.damaged
    for run in customers:
        by_workflow.setdefault(run.workflow, run)
    for run in approvals:
        if run.workflow not in by_workflow and _decided_row(store, run, damaged):
            by_workflow[run.workflow] = run  # its engine hands over what the log never held
    return list(by_workflow.values())


def _decided_row(store: Approvals, run: RunState, damaged: list[Any]) -> bool:
    """Whether the approval row ``run`` waits on says it was decided."""
    from fsm.errors import RowDamaged

    aid = run.pending.approval_id if run.pending is not None else None
    try:
        row = store.approval(aid) if aid is not None else None
    except RowDamaged as exc:
        damaged.append(exc)
        return False
    return row is not None and row.decision is not None
