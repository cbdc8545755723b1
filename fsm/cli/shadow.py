"""fsm shadow: recorded conversations of real agents replayed through a workflow's gate."""

from __future__ import annotations

from pathlib import Path

import typer

from fsm.errors import UsageError

from .app import WORKFLOW_HELP, app, console, print_table


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
) -> None:
    """Replay each recorded conversation through the workflow's gate, in memory, nothing
    written anywhere: what would the tables have refused? Exits 0 when it ran, whatever the
    verdicts; 2 on a bad argument or a file that cannot be read."""
    import json

    from fsm.registry import load_workflow
    from fsm.sandbox.shadow_report import matrix_markdown, shadow_files, summarize
    from fsm.sandbox.shadow_rules import rules_for

    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    spec = load_workflow(workflow)
    report = shadow_files(spec, workflow, files, rules_for(workflow, spec))
    if json_out is not None:
        Path(json_out).write_text(json.dumps(report.as_json(spec), indent=1, ensure_ascii=False,
                                       default=str) + "\n", encoding="utf-8")
    if markdown is not None:
        Path(markdown).write_text(report.markdown(spec), encoding="utf-8")
    if not quiet:
        print_table(None, ["file", "task", "trial", "reward", "verdict", "refused", "rule or "
                           "reason"], report.rows())
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
