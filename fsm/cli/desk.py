"""The desk from the command line: ``fsm handovers`` (the queue), ``take`` and ``close``."""

from __future__ import annotations

import getpass
from typing import Any

import typer

from . import exits
from .app import DB_HELP, JSON_HELP, MAX_INT, console, print_json, print_table
from .app import app as root
from .context import clock, engine_for_run, reader_for, refuse_empty, store_for
from .ops import finish, interruptible

#: Why runs are handed over (``fsm.records.HandoverCause``, which ``import fsm.cli`` does
#: not load; tests/cli/test_cli_desk.py holds the two equal).
CAUSES = ("model_event", "transferred", "in_doubt", "expired", "write_failed",
          "partial_write", "person", "changed", "other", "unwitnessed", "unavailable")
OUTCOMES = ("resolved", "resumed", "closed")

app = typer.Typer(help="The handover queue: runs handed over to a person, newest first. "
                  "Without a command, list it.", invoke_without_command=True)
root.add_typer(app, name="handovers")

DbOpt = typer.Option(None, "--db", help=DB_HELP)
ByOpt = typer.Option(None, "--by", help="who you are, for the log (default: the login name)")


def _person(by: str | None) -> str:
    """Who acts at the desk: ``--by``, else the login name."""
    from fsm.errors import UsageError

    if by is not None:
        if not by.strip():
            raise UsageError("--by must name who acts at the desk, not be empty")
        return by.strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell who you are: give --by NAME") from None


def _age(seconds: float) -> str:
    minutes = max(int(seconds // 60), 0)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    return f"{days} d {hours} h" if days else f"{hours} h {mins} min" if hours else \
        f"{mins} min"


@app.callback()
def queue_cmd(
    ctx: typer.Context,
    workflow: str | None = typer.Option(None, "--workflow", help="only this workflow's"),
    cause: str | None = typer.Option(None, "--cause", help=f"only this reason: one of "
                                     f"{', '.join(CAUSES)}"),
    taken_by: str | None = typer.Option(None, "--taken-by", help="only those this person "
                                        "took; '' for those nobody took"),
    closed: bool = typer.Option(False, "--closed", help="closed handovers too"),
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_INT, help="how many to show"),
    offset: int = typer.Option(0, "--offset", min=0, max=MAX_INT, help="skip this many"),
    db: str | None = DbOpt,
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List handed-over runs, newest first: why the agent stopped, what the customer asked,
    who took it, and how long it has waited."""
    if ctx.invoked_subcommand is not None:
        return
    if cause is not None and cause not in CAUSES:
        raise typer.BadParameter(f"unknown cause {cause!r} (allowed: {', '.join(CAUSES)})",
                                 param_hint="--cause")
    from fsm.store.desk import Queue

    queue = Queue(open_only=not closed, workflow=workflow, cause=cause, taken_by=taken_by)
    with reader_for(db) as store:
        found = store.handovers(queue, limit=limit, offset=offset)
        total = store.count_handovers(queue)
    now = clock()
    rows = [{"run_id": h.run_id, "workflow": h.workflow, "customer": h.user,
             "reason": h.reason, "cause": h.cause, "request": h.request,
             "age": _age(now - h.handed_at), "handed_at": h.handed_at,
             "taken_by": h.taken_by, "outcome": h.outcome, "note": h.note,
             "handover_id": h.handover_id} for h in found]
    if as_json:
        print_json(rows)
        return
    cols = ["run_id", "workflow", "customer", "reason", "request", "age", "taken_by"]
    if closed:
        cols += ["outcome", "note"]
    print_table(None, cols, [[r[c] for c in cols] for r in rows])
    console.print(f"{len(rows)} of {total} handed-over runs" + ("" if closed else " waiting"),
                  markup=False)


@app.command("take")
def take_cmd(
    run_id: str = typer.Argument(..., help="the handed-over run"),
    note: str | None = typer.Option(None, "--note", help="why you take over a run another "
                                    "person took (required then; the log keeps it)"),
    by: str | None = ByOpt,
    db: str | None = DbOpt,
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Take a handed-over run: it is assigned to you, and shown so to others. A run another
    person took is taken over with --note saying why."""
    from fsm.errors import UsageError

    if note is not None and not note.strip():
        raise UsageError("--note must say why you take the run over, not be empty")
    person = _person(by)
    with store_for(db) as store:
        engine, _ = engine_for_run(store, run_id)
        engine.take_handover(run_id, person, note=note)
        _said(store, run_id, as_json)


@app.command("close", epilog=exits.HELP)
def close_cmd(
    run_id: str = typer.Argument(..., help="the handed-over run"),
    outcome: str = typer.Option(..., "--outcome", help=f"one of {', '.join(OUTCOMES)}: "
                                "resolved outside fsm, resumed (where the workflow lets a "
                                "person continue the run), or closed"),
    note: str = typer.Option(..., "--note", help="what was done (required; the log keeps "
                             "it, and a resumed run's model reads it)"),
    event: str | None = typer.Option(None, "--event", help="the event to resume with, when "
                                     "the hand-over state has several"),
    no_drive: bool = typer.Option(False, "--no-drive", help="resumed: only record it; a "
                                  "worker continues the run"),
    by: str | None = ByOpt,
    db: str | None = DbOpt,
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Close a handover with an outcome and a note (taking it first if nobody has)."""
    from fsm.errors import UsageError

    if outcome not in OUTCOMES:
        raise typer.BadParameter(f"unknown outcome {outcome!r} (allowed: "
                                 f"{', '.join(OUTCOMES)})", param_hint="--outcome")
    if not note.strip():
        raise UsageError("--note must say what was done, not be empty")
    refuse_empty(event=event)
    person = _person(by)
    with store_for(db) as store:
        engine, _ = engine_for_run(store, run_id)
        with interruptible(store, run_id):
            run = engine.close_handover(run_id, person, outcome, note, event=event,
                                        drive=not no_drive)
        if outcome == "resumed":
            finish(store, run, as_json)
        _said(store, run_id, as_json)


def _said(store: Any, run_id: str, as_json: bool) -> None:
    (row,) = store.run_handovers(run_id)[-1:]
    data = row.model_dump(mode="json")
    if as_json:
        print_json(data)
        return
    state = f"closed ({row.outcome}) by {row.closed_by}" if row.closed_at else \
        f"taken by {row.taken_by}" if row.taken_by else "waiting"
    console.print(f"run      {run_id}", markup=False)
    console.print(f"reason   {row.reason}", markup=False)
    console.print(f"handover {state}" + (f": {row.note}" if row.note else ""), markup=False)
    console.print(f"waited   {_age(clock() - row.handed_at)}", markup=False)
