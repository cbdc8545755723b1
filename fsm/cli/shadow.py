"""fsm shadow: recorded conversations of real agents replayed through a workflow's gate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fsm.errors import UsageError

from .app import WORKFLOW_HELP, app, console, print_table

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.sandbox.shadow_report import ShadowReport


@app.command("shadow")
def shadow_cmd(
    files: list[str] = typer.Argument(  # noqa: B008 - typer's repeated argument
        ..., help="recorded conversations: τ²-bench results files, JSON lists of "
                  "simulations, or JSONL chat logs"),
    workflow: str = typer.Option(..., "--workflow", help=WORKFLOW_HELP),
    json_out: str | None = typer.Option(None, "--json", help="write the whole report as "
                                         "JSON to this file"),
    markdown: str | None = typer.Option(None, "--markdown", help="write the summary as "
                                         "Markdown to this file"),
    quiet: bool = typer.Option(False, "--quiet", help="print the summary only, not a row "
                               "per conversation"),
    live: bool = typer.Option(False, "--live", help="run the calls the gate admits on a "
                              "fresh copy of the workflow's own environment, and compare "
                              "each final database with the expected one"),
) -> None:
    """Replay each recorded conversation through the workflow's gate, in memory, nothing
    written anywhere: what would the tables have refused? Exits 0 when it ran, whatever the
    verdicts; 2 on a bad argument or a file that cannot be read. With --live, the calls the
    gate admits run on a fresh copy of the workflow's environment instead (refused ones
    never run), and each final database is compared with the expected one."""
    import json

    from fsm.definition.registry import load_workflow
    from fsm.sandbox.shadow_report import shadow_files
    from fsm.sandbox.shadow_rules import rules_for

    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    spec = load_workflow(workflow)
    if live:
        _live(spec, workflow, files, json_out, markdown, quiet)
        return
    report = shadow_files(spec, workflow, files, rules_for(workflow, spec))
    if json_out is not None:
        Path(json_out).write_text(json.dumps(report.as_json(spec), indent=1, ensure_ascii=False,
                                       default=str) + "\n", encoding="utf-8")
    if markdown is not None:
        Path(markdown).write_text(report.markdown(spec), encoding="utf-8")
    if not quiet:
        print_table(None, COLUMNS, report.rows())
    _summaries(report, spec)


COLUMNS = ["file", "task", "trial", "reward", "verdict", "refused", "rule or reason"]


def _summaries(report: ShadowReport, spec: WorkflowSpec) -> None:
    from fsm.sandbox.shadow_report import matrix_markdown, summarize

    parts = list(report.files.items())
    if len(parts) > 1:
        parts.append(("all files", report.all()))
    for name, outs in parts:
        seconds = report.seconds.get(name, sum(report.seconds.values()))
        s = summarize(outs, spec, seconds)
        console.print(f"{name}: {s['conversations']} conversations, "
                      f"{s['conversations_per_second']} per second", markup=False)
        for line in matrix_markdown(s):
            console.print(line, markup=False)


def _live(spec: WorkflowSpec, workflow: str, files: list[str], json_out: str | None,
          markdown: str | None, quiet: bool) -> None:
    """fsm shadow --live: the report with each final database beside the expected one."""
    import json

    from fsm.sandbox.shadow_live import live_files, live_for, live_markdown, live_rows, live_summary
    from fsm.sandbox.shadow_rules import rules_for

    env = live_for(workflow)
    if env is None:
        raise UsageError(f"workflow {workflow!r} has no live environment (no LIVE next to "
                         "it): --live cannot run it; leave --live out to replay in memory")
    report = live_files(spec, workflow, files, rules_for(workflow, spec), env)
    if json_out is not None:
        doc = report.as_json(spec)
        doc["live"] = {"environment": env.summary, "summary": live_summary(report.all()),
                       "files": {n: live_summary(o) for n, o in report.files.items()}}
        Path(json_out).write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str)
                                  + "\n", encoding="utf-8")
    if markdown is not None:
        Path(markdown).write_text(report.markdown(spec) + "\n" + "\n".join(
            live_markdown(report, env)), encoding="utf-8")
    if not quiet:
        print_table(None, [*COLUMNS, "final database"], live_rows(report))
    _summaries(report, spec)
    s = live_summary(report.all())
    console.print(f"final databases: {s['matched']} of {s['compared']} match the expected "
                  f"one ({s['differs']} differ, {s['no_expected']} without an expected one)",
                  markup=False)
