"""Read-only commands: runs, approvals, show, history, audit."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from fsm.errors import RowDamaged, RunError, UsageError

if TYPE_CHECKING:  # ``fsm --help`` must not import pydantic's models
    from fsm.records import RunState
    from fsm.records.transcript import Message

from . import exits
from .app import (
    DB_HELP,
    JSON_HELP,
    MAX_INT,
    app,
    console,
    err_console,
    print_json,
    print_table,
    skipped_rows,
)
from .asked import customer_lines
from .context import fmt_time, path_of, reader_for, version_for_run
from .history import history_rows

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
#: Every run status (``fsm.records.STATUSES``, which ``import fsm.cli`` does not load;
#: tests/test_cli_runs.py holds the two equal).
STATUSES = ("running", "awaiting_approval", "done", "failed", "budget_exhausted",
            "handed_over", "model_unavailable", "model_refused", "awaiting_customer")


def runs_cmd(
    ctx: typer.Context,
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
    """List runs, newest first: the newest 50 unless --limit, --offset or --all. With a
    command, act on one run: fsm runs show|history|audit|resume|fork|export|prune."""
    if ctx.invoked_subcommand is not None:
        return
    if status is not None and status not in STATUSES:
        raise typer.BadParameter(f"unknown status {status!r} (allowed: {', '.join(STATUSES)})",
                                 param_hint="--status")
    with reader_for(db) as store:
        # One more than asked for tells whether there are more to page to.
        page = store.list_runs(status, workflow=workflow, offset=offset, newest_first=True,
                               limit=None if show_all else limit + 1)
        more = not show_all and len(page) > limit
        runs = page if show_all else page[:limit]
        labels = store.version_labels(r.definition_hash for r in runs)
    rows = [_run_row(r, labels[r.definition_hash]) for r in runs]
    if as_json:
        print_json(rows)
        return
    _print_runs(rows)
    if more:
        console.print(f"runs {offset + 1}-{offset + len(rows)}, newest first; more with "
                      f"--offset {offset + len(rows)} or --all", markup=False)
    elif not rows:
        console.print("no runs" + (" match" if status or workflow or offset else ""),
                      markup=False)


def _run_row(r: RunState, version: str) -> dict[str, Any]:
    """One run as ``fsm runs --json`` lists it."""
    origin = r.forked_from
    return {
        "run_id": r.run_id, "workflow": r.workflow, "version": version,
        "definition_hash": r.definition_hash, "user": r.user, "status": r.status,
        "state": r.state, "steps": r.used.steps, "cost_micros": r.used.cost_micros,
        "updated": fmt_time(r.updated_at), "reason": r.reason,
        "forked_from": None if origin is None else {"run_id": origin.run_id,
                                                    "step": origin.step},
    }


def _print_runs(rows: list[dict[str, Any]]) -> None:
    """The runs' table; forks name their parent and its step."""
    cols = ["run_id", "workflow", "version", "user", "status", "state", "steps", "cost_micros",
            "updated", "reason"]
    table = [[row[c] for c in cols] for row in rows]
    if any(row["forked_from"] for row in rows):
        cols.append("forked_from")
        for line, row in zip(table, rows, strict=True):
            origin = row["forked_from"]
            line.append(f"{origin['run_id']} @ step {origin['step']}" if origin else "")
    print_table(None, cols, table)


def approvals_cmd(ctx: typer.Context, db: str | None = DbOpt, as_json: bool = JsonOpt) -> None:
    """List the approvals that runs wait on. With a command, decide or expire them:
    fsm approvals approve|deny|sweep.

    A run with a row that cannot be read is skipped and named on a ``warning:`` line;
    every other approval is listed. A pending approval no run waits on (its run
    finished, or the row was written outside a step), or a run whose workflow cannot be
    loaded, is not listed: each is named on an ``error:`` line, and the command exits 1."""
    from fsm.errors import FSMError

    if ctx.invoked_subcommand is not None:
        return
    rows, problems = [], []
    with reader_for(db) as store:
        damaged: list[RowDamaged] = []
        pending = store.approvals(pending_only=True, skip_damaged=True)
        damaged += pending.damaged
        for a in pending:
            try:
                row = _approval_row(store, a)
            except RowDamaged as exc:  # one of the run's own rows
                damaged.append(exc)
                continue
            except FSMError as exc:  # its workflow
                problems.append(f"{' '.join(str(exc).split())} (not listed)")
                continue
            if isinstance(row, str):
                problems.append(row)
            else:
                rows.append(row)
    if as_json:
        print_json(rows)
    else:
        cols = ["run_id", "user", "state", "waits_for", "asks", "arguments", "amount",
                "requested", "expires"]
        print_table(None, cols, [
            [json.dumps(r[c], ensure_ascii=False) if c == "arguments" else r[c] for c in cols]
            for r in rows
        ])
    skipped_rows(damaged, "not listed")
    for line in problems:
        err_console.print(f"error: {' '.join(line.split())}", markup=False)
    if problems:
        raise typer.Exit(exits.ERROR)


def _approval_row(store: Any, a: Any) -> dict[str, Any] | str:
    """What ``fsm approvals`` lists of approval ``a``, or why it is not listed."""
    from fsm.definition.presentation import waits_for
    from fsm.runtime.review import waiting_on

    run = store.load_run(a.run_id)
    if waiting_on(run, a) is None:
        return (f"approval {a.approval_id} of run {a.run_id!r} is pending in the approvals "
                f"table, but the run does not wait on it (it is {run.status} in state "
                f"{run.state!r}); not listed: see fsm audit {a.run_id}")
    events = run.pending.events if run.pending else []
    shown = version_for_run(store, run).presentation
    return {
        "run_id": a.run_id, "user": run.user, "state": run.state,
        "waits_for": waits_for(a.tool, events),
        "asks": shown.describe(a.tool, a.args, run.facts, events), "arguments": a.args,
        "amount": shown.money_text(a.tool, a.args),
        "requested": fmt_time(a.requested_at), "expires": fmt_time(a.expires_at),
    }


@app.command("show")
def show_cmd(
    run_id: str = typer.Argument(..., help="the run"),
    step: int | None = typer.Option(None, "--step", min=1, max=MAX_INT,
                                    help="step (default: the latest)"),
    request: bool = typer.Option(False, "--request",
                                 help="print the exact chat-completions request body sent"),
    model: str | None = typer.Option(None, "--model", help="model name for --request "
                                     "(default: the model the step was sent to)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print exactly what the model saw at a step: state, offered tools, transcript."""
    from fsm.runtime.view import view_at

    with reader_for(db) as store:
        run = store.load_run(run_id)
        spec = version_for_run(store, run)
        view = view_at(spec, store, run_id, step)
        if view is None:
            what = f"step {step}" if step is not None else "any step"
            recorded = f"recorded steps: 1..{run.step}" if run.step else \
                "it has not been driven yet"
            raise RunError(f"run {run_id!r} has no view recorded for {what} ({recorded})",
                           run_id=run_id)
        events = store.events(run_id) if request else []
    if request:
        from fsm.adapters.recorded import sent_body
        from fsm.adapters.translate import encode

        try:
            body = sent_body(view, events, model)
        except LookupError:
            body = sent_body(view, events, _run_model(events, run_id))
        typer.echo(encode(body).decode())
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
    for i, msg in enumerate(view.transcript):
        console.print(f"  [{i}] {_line(msg)}", markup=False)
    if step is None or step == run.step:
        for line in customer_lines(spec, run):
            console.print(line, markup=False)


def _run_model(events: list[Any], run_id: str) -> str:
    """The model a step that recorded no request would have been sent to: the model the
    run's log says it is driven with."""
    from fsm.records import policy_record

    policy = str(policy_record(events).get("policy", ""))
    if not policy.startswith("model:"):
        raise RunError(f"run {run_id!r} was not driven by a model ({policy or 'unknown'}); "
                       "give --model NAME", run_id=run_id)
    return policy.removeprefix("model:")


def _line(msg: Message) -> str:
    rest = msg.body()
    role = rest.pop("role", None) or "?"
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
        spec = version_for_run(store, run, events)
        messages = store.messages(run_id, 0, run.message_count)  # what the steps wrote
        rows = history_rows(spec, events, messages, verbose=verbose)
        path = path_of(store, run_id, events)
    print_table(f"history of {run_id}: {' → '.join(path)}",
                ["step", "time", "kind", "state", "tool/event", "detail", "cost", "reviewer"],
                rows)


@app.command("audit")
def audit_cmd(run_id: str = typer.Argument(..., help="the run"), db: str | None = DbOpt,
              bundle: str | None = typer.Option(
                  None, "--bundle", help="also check this evidence bundle of the run "
                  "against the head this database holds (for a pruned run: its tombstone)"),
              expect: str | None = typer.Option(
                  None, "--expect", metavar="HEAD[:EVENTS]",
                  help="the head (and number of events) held from outside the database "
                  "(an earlier audit, a notification, a bundle): a run rolled back whole to "
                  "an earlier signed state fails"),
              as_json: bool = JsonOpt) -> None:
    """Verify a run's hash chain, its signature and its log against the run row; exit 1
    if altered. A pruned run is reported with the head and number of events its
    tombstone keeps."""
    from fsm.auditor.audit import audit
    from fsm.errors import RunNotFound

    wanted = _expected_head(expect)
    with reader_for(db) as store:
        keys = dict(store.keys.public)
        try:
            report = audit(store, run_id)
            if wanted is not None and (wanted[0] != report.head
                                       or wanted[1] not in (None, report.events)):
                report.problems.append(
                    f"its head is {report.head} after {report.events} events, not the "
                    f"expected {wanted[0]}" + (f" after {wanted[1]}" if wanted[1] is not None
                                               else "")
                    + " (rolled back, or the log rewritten)")
        except RunNotFound:
            stone = store.tombstone(run_id)
            if stone is None:
                raise
            _pruned(stone, bundle, as_json, keys)
            return
        except RowDamaged as exc:
            _damaged(run_id, exc, as_json)
    expected = (report.head, report.events)
    if as_json:
        print_json({"run_id": run_id, "ok": report.ok, "events": report.events,
                    "head": report.head, "problems": report.problems, "notes": report.notes,
                    "warnings": report.warnings, "forked_from": report.link.as_json()})
    else:
        _print_audit(run_id, report)
    if not report.ok:
        raise typer.Exit(1)
    if bundle is not None:
        _check_bundle(bundle, run_id, expected, keys)


def _expected_head(expect: str | None) -> tuple[str, int | None] | None:
    if expect is None:
        return None
    head, _, count = expect.partition(":")
    if len(head) != 64 or any(c not in "0123456789abcdef" for c in head) \
            or (count and not count.isdigit()):
        raise UsageError(f"--expect takes HEAD or HEAD:EVENTS (a 64-digit hex head), not "
                         f"{expect!r}")
    return head, int(count) if count else None


def _print_audit(run_id: str, report: Any) -> None:
    if report.ok:
        console.print(f"audit ok: {run_id}: {report.events} events, hash chain intact, "
                      "log consistent with the run, its approvals and its effects", markup=False)
        _print_link(report.link)
        console.print(f"head {report.head}", markup=False)
        for note in report.notes:
            console.print(f"note: {note}", markup=False)
    else:
        console.print(f"audit FAILED: {run_id}: {report.problems[0]}", markup=False)
        for p in report.problems[1:]:
            console.print(f"  also: {p}", markup=False)
    for warning in report.warnings:
        console.print(f"warning: {warning}", markup=False)


#: How ``fsm audit`` says what it found of a fork's link (:data:`fsm.auditor.forks.LinkState`).
_LINK_SAID = {
    "verified": "the link to it verified",
    "tombstone": "it was pruned since; the link verified against its tombstone's head "
                 "(the fork was made at its last event)",
    "unverifiable": "the link cannot be verified (see the warning)",
}


def _print_link(link: Any) -> None:
    origin = link.origin
    if origin is None or link.state == "broken":
        return
    console.print(f"forked from {origin.get('run_id')} at step {origin.get('step')}; "
                  f"{_LINK_SAID[link.state]}", markup=False)


def _damaged(run_id: str, exc: RowDamaged, as_json: bool) -> None:
    """A row the audit cannot read is a finding of the audit (exit 1), without the advice
    to inspect it with ``fsm audit``, which would lead back here."""
    said = exc.finding
    if as_json:
        print_json({"run_id": run_id, "ok": False, "problems": [said]})
    else:
        console.print(f"audit FAILED: {run_id}: {said}", markup=False)
    raise typer.Exit(1)


def _pruned(stone: Any, bundle: str | None, as_json: bool, keys: dict[str, bytes]) -> None:
    if as_json:
        print_json({"run_id": stone.run_id, "ok": True, "pruned": True,
                    "events": stone.log_count, "head": stone.head,
                    **stone.model_dump(mode="json")})
    else:
        console.print(f"audit: {stone.run_id}: pruned; head {stone.head}, {stone.log_count} "
                      f"events (it finished {stone.status} at {fmt_time(stone.finished_at)}; "
                      f"pruned at {fmt_time(stone.pruned_at)} by {stone.pruned_by})",
                      markup=False)
    if bundle is not None:
        _check_bundle(bundle, stone.run_id, (stone.head, stone.log_count), keys)


def _check_bundle(path: str, run_id: str, expected: tuple[str, int],
                  keys: dict[str, bytes]) -> None:
    from fsm.auditor.bundle import Unusable, verify
    from fsm.errors import UsageError

    try:
        report = verify(path, {run_id: expected}, keys)
    except Unusable as exc:
        raise UsageError(str(exc)) from None
    console.print(report.text(), markup=False)
    if not report.ok:
        raise typer.Exit(1)
