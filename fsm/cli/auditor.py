"""Auditor commands: diagram and verify."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from fsm.cli.files import output_target, write_atomic
from fsm.errors import UsageError

from .app import DB_HELP, WORKFLOW_HELP, app, console, err_console, fail, settings
from .context import reader_for

# The auditor (and Graphviz) is imported by the commands, so that ``fsm --help`` stays fast.
if TYPE_CHECKING:
    from fsm.auditor.diagram import Overlay
    from fsm.definition.spec import WorkflowSpec

# fsm.auditor.render.FORMATS, spelled here so that the help needs no import of the renderer
# (tests/test_bench_smoke.py checks that the two agree).
FORMATS = ("dot", "svg", "png", "mermaid", "md")


def _overlay(spec: WorkflowSpec, run_id: str, db: str | None,
             version: str | None) -> tuple[WorkflowSpec, Overlay]:
    """The version of ``spec`` the run lives on, and the run drawn on it."""
    from fsm.auditor.diagram import overlay

    with reader_for(db) as store:
        run = store.load_run(run_id)
        if run.workflow != spec.name:
            raise UsageError(f"run {run_id!r} belongs to workflow {run.workflow!r}, "
                             f"not {spec.name!r}")
        own = spec.version_for(run.definition_hash)
        if own is None or (version is not None and own is not spec.named(version)):
            label = store.version_labels([run.definition_hash])[run.definition_hash]
            raise UsageError(
                f"run {run_id!r} lives on version {label} (definition "
                f"{run.definition_hash}) of workflow {spec.name!r}, which "
                + ("this code does not keep" if own is None else f"is not {version!r}")
                + f" (kept: {_kept(spec)}); draw it on the version it lives on")
        return own, overlay(run_id, store.events(run_id))


def _kept(spec: WorkflowSpec) -> str:
    return ", ".join(f"{v.label} ({v.definition_hash})" if v.version else v.label
                     for v in spec.versions)


def _version(spec: WorkflowSpec, version: str | None) -> WorkflowSpec:
    """The kept version ``--version`` names (default: the current one)."""
    if version is None:
        return spec
    found = spec.named(version)
    if found is None:
        raise UsageError(f"workflow {spec.name!r} keeps no version {version!r} (kept: "
                         f"{_kept(spec)}, or current)")
    return found


VersionOpt = typer.Option(None, "--version", help="a version the workflow keeps: its label "
                          "or definition hash, or current (default)")


def _emit(output: str | None, data: bytes, what: str) -> None:
    if output is None:
        sys.stdout.write(data.decode())
        sys.stdout.flush()
        return
    target = output_target(output)
    try:
        write_atomic(target, data)
    except OSError as exc:
        raise UsageError(f"cannot write {output!r}: {exc.strerror or exc}") from None
    console.print(f"wrote {output} ({what})", markup=False)


@app.command("diagram")
def diagram_cmd(
    workflow: str = typer.Argument(..., help=WORKFLOW_HELP),
    output: str | None = typer.Option(
        None, "-o", "--output", help="write to this file; its suffix picks the format "
        "(.dot .svg .png .mmd .md)"),
    fmt: str | None = typer.Option(
        None, "--format", "-f", help=f"one of {', '.join(FORMATS)} "
        "(default: the suffix of -o, else mermaid)"),
    run: str | None = typer.Option(
        None, "--run", help="draw this run on it: the path taken with step numbers, "
        "refused attempts, the current state"),
    db: str | None = typer.Option(None, "--db", help=DB_HELP + "; used with --run"),
    version: str | None = VersionOpt,
) -> None:
    """Draw a workflow: states with their tools, who may fire each event, guards, a legend.

    SVG and PNG need Graphviz's dot program; DOT, Mermaid and Markdown need nothing.
    """
    from fsm.auditor.diagram import extract
    from fsm.auditor.render import format_for, render
    from fsm.definition.registry import load_workflow
    from fsm.errors import DiagramError

    spec = load_workflow(workflow)
    drawn_on = _version(spec, version)
    try:
        chosen = format_for(output, fmt)
    except DiagramError as exc:
        raise UsageError(str(exc)) from None
    if output is None and chosen == "png":
        raise UsageError("PNG is binary: give -o FILE.png")
    if db is not None and run is None:
        raise UsageError("--db is only used with --run RUN_ID")
    drawn = None
    if run is not None:
        drawn_on, drawn = _overlay(spec, run, db, version)
    data = render(extract(drawn_on, drawn), chosen, dot_timeout=settings().dot_timeout)
    _emit(output, data, chosen)


@app.command("verify")
def verify_cmd(
    workflow: str = typer.Argument(..., help=WORKFLOW_HELP),
    fmt: str | None = typer.Option(
        None, "--format", "-f", help="text or md (default: md for an -o ending in .md, "
        "else text)"),
    output: str | None = typer.Option(None, "-o", "--output", help="write the report here"),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="accept a workflow that declares no invariants"),
    version: str | None = VersionOpt,
) -> None:
    """Prove the workflow's invariants over every path, or print shortest counterexamples.

    Exits with status 1 if any invariant is violated, or if the workflow declares none
    (unless --allow-empty): a report that proves nothing must not pass a CI job.
    """
    from fsm.auditor.verify import verify
    from fsm.definition.registry import load_workflow

    spec = _version(load_workflow(workflow), version)
    if not spec.invariants and not allow_empty:
        # Not a usage error: the check ran, and it proves nothing.
        raise fail(
            f"workflow {spec.name!r} declares no invariants, so fsm verify proves nothing; "
            "add invariants=(...) to define_workflow, or pass --allow-empty to accept that")
    if fmt is None:
        fmt = "md" if output is not None and output.lower().endswith(".md") else "text"
    if fmt not in ("text", "md"):
        raise UsageError(f"unknown report format {fmt!r} (allowed: text, md)")
    report = verify(spec)
    text = report.markdown() if fmt == "md" else report.text()
    _emit(output, text.encode(), report.summary)
    if output is not None or fmt == "md":
        for line in report.warnings:  # where the report does not show them
            err_console.print(f"warning: {line}", markup=False)
    if not report.ok:
        raise typer.Exit(1)
