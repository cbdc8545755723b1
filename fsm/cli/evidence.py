"""Evidence and retention: ``fsm export`` (a bundle for auditors) and ``fsm prune``."""

from __future__ import annotations

import datetime as dt
import getpass
from typing import TYPE_CHECKING, Any

import typer

from fsm.cli.files import output_target, write_atomic
from fsm.errors import UsageError

from .app import DB_HELP, JSON_HELP, app, console, print_json, settings
from .context import clock, reader_for, store_for, workflow_ref

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.records import RunState
    from fsm.store.roles import RunReads

DbOpt = typer.Option(None, "--db", help=DB_HELP)


def _who(by: str | None, what: str) -> str:
    if by is not None:
        if not by.strip():
            raise UsageError(f"--by must name who {what}, not be empty")
        return by.strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell who you are: give --by NAME") from None


def _spec_of(store: RunReads) -> Any:
    from fsm.definition.registry import load_workflow
    from fsm.errors import FSMError

    cache: dict[str, WorkflowSpec | None] = {}

    def spec_of(run: RunState) -> WorkflowSpec | None:
        ref = workflow_ref(store, run)
        if ref not in cache:
            try:
                cache[ref] = load_workflow(ref)
            except FSMError:
                cache[ref] = None
        return cache[ref]

    return spec_of


@app.command("export")
def export_cmd(
    run_ids: list[str] = typer.Argument(..., help="the runs to export"),  # noqa: B008
    output: str = typer.Option(..., "-o", "--output", help="the bundle to write (FILE.zip)"),
    by: str | None = typer.Option(None, "--by", help="who exports, for the manifest "
                                  "(default: the login name)"),
    db: str | None = DbOpt,
) -> None:
    """Write an evidence bundle of runs: their logs, snapshots, transcripts, approvals and
    effects, the definition's tables, diagrams and verifier report, and the audit verdict.
    Check it anywhere with: python -m fsm.auditor.bundle verify FILE.zip"""
    if not output.lower().endswith(".zip"):
        raise UsageError(f"-o {output!r}: an evidence bundle is a .zip file")
    who = _who(by, "exports")
    target = output_target(output)
    from fsm.auditor.export import export

    with reader_for(db) as store:
        data = export(store, run_ids, _spec_of(store), now=clock(), by=who,
                      dot_timeout=settings().dot_timeout)
    try:
        write_atomic(target, data)
    except OSError as exc:
        raise UsageError(f"cannot write {output!r}: {exc.strerror or exc}") from None
    console.print(f"wrote {output} ({len(set(run_ids))} runs, {len(data)} bytes); check it "
                  f"with: python -m fsm.auditor.bundle verify {output} --key KEY (the "
                  "public key fsm keys show prints)", markup=False)


def _date(text: str) -> float:
    """``--finished-before``: a date (UTC midnight) or an ISO time."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--finished-before takes a date or time such as 2026-01-31 or "
                         f"2026-01-31T12:00:00Z, not {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


@app.command("prune")
def prune_cmd(
    finished_before: str = typer.Option(..., "--finished-before", help="prune runs that "
                                        "finished before this date or time (UTC)"),
    workflow: str | None = typer.Option(None, "--workflow", help="only this workflow's runs"),
    statuses: list[str] = typer.Option(  # noqa: B008 - typer's repeated option
        [], "--status", help="only runs that finished so (done, failed, budget_exhausted, "
        "handed_over); repeatable; default: all of them"),
    dry_run: bool = typer.Option(False, "--dry-run", help="count what would be pruned, and "
                                 "change nothing"),
    batch: int = typer.Option(500, "--batch", min=1, max=100_000, help="runs deleted per "
                              "transaction (short transactions never hold workers up long)"),
    pause: float = typer.Option(0.01, "--pause", min=0, max=60, help="seconds to wait "
                                "between batches, so that waiting writers get in"),
    by: str | None = typer.Option(None, "--by", help="who prunes, kept in each tombstone "
                                  "(default: the login name)"),
    db: str | None = DbOpt,
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Delete the rows of finished runs, keeping a tombstone of each (its head hash and
    number of events, so that fsm audit and exported bundles can still be checked).
    Waiting and running runs, and handed-over runs whose handover is open, are never
    pruned."""
    from fsm.store.prune import PRUNABLE, prune

    bad = [s for s in statuses if s not in PRUNABLE]
    if bad:
        raise UsageError(f"--status {bad[0]!r} is not a finished status (allowed: "
                         f"{', '.join(PRUNABLE)}); waiting and running runs are never pruned")
    before = _date(finished_before)
    who = _who(by, "prunes")
    opener = reader_for if dry_run else store_for
    with opener(db) as store:
        result = prune(store, before=before, workflow=workflow,
                       statuses=tuple(statuses) or PRUNABLE, dry_run=dry_run, by=who,
                       now=clock(), batch=batch, pause=pause)
    data = {"runs": result.runs, "events": result.events, "batches": result.batches,
            "dry_run": dry_run, "seconds": round(result.seconds, 3), "kept": result.kept}
    if as_json:
        print_json(data)
        return
    verb = "would prune" if dry_run else "pruned"
    kept = (f"; {'would keep' if dry_run else 'kept'} {len(result.kept)} "
            f"run{'s' if len(result.kept) > 1 else ''} whose forks are not pruned"
            if result.kept else "")
    console.print(f"{verb} {result.runs} runs ({result.events} log events) that finished "
                  f"before {finished_before}" + ("" if dry_run else
                                                 f", in {result.batches} batches, "
                                                 f"{result.seconds:.1f} s; a tombstone of "
                                                 "each is kept") + kept, markup=False)
    _print_kept(result.kept, dry_run)


#: How many kept runs ``fsm prune`` names one a line (--json lists them all).
_KEPT_SHOWN = 20


def _print_kept(kept: dict[str, list[str]], dry_run: bool) -> None:
    verb = "would keep" if dry_run else "kept"
    for parent, forks in list(kept.items())[:_KEPT_SHOWN]:
        console.print(f"{verb} {parent}: forked by {', '.join(forks)}", markup=False)
    if len(kept) > _KEPT_SHOWN:
        console.print(f"… and {len(kept) - _KEPT_SHOWN} more (--json lists them all)",
                      markup=False)
