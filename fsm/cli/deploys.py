"""Deploy commands: ``fsm definitions`` lists the versions runs live on, ``fsm migrate``
moves runs to another version, ``fsm check-history`` replays stored runs against a
candidate definition before a release (the last two also under their noun: ``fsm
definitions migrate|check-history``, see :mod:`fsm.cli.nouns`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from .app import DB_HELP, JSON_HELP, app, console, print_json, print_table, settings
from .context import fmt_time, reader_for

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.store.roles import RunReads, Versions

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)


def definitions_cmd(
    ctx: typer.Context,
    workflow: str | None = typer.Option(
        None, "--workflow", help="only this workflow's versions (also given bare: fsm "
        "definitions WORKFLOW)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List the definitions runs live on, oldest first: each version's label and hash, how
    many runs it has in each status, and whether the code here still defines it. With a
    command, act on versions: fsm definitions migrate|check-history."""
    if ctx.invoked_subcommand is not None:
        return
    with reader_for(db) as store:
        rows = definition_rows(store, workflow)
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no definitions recorded" + (f" for {workflow}" if workflow else ""),
                      markup=False)
        return
    pinned = any(r["servers"] for r in rows)
    print_table(None, ["workflow", "version", "definition", "recorded", "runs", "in code",
                       *(["servers"] if pinned else [])], [
        [r["workflow"], r["version"] or "—", r["definition_hash"], fmt_time(r["recorded_at"]),
         ", ".join(f"{k} {v}" for k, v in r["runs"].items()) or "none", r["in_code"],
         *([_pins(r["servers"])] if pinned else [])]
        for r in rows])


def _pins(servers: dict[str, str]) -> str:
    """The tool servers a definition pins: each name with its tool list's hash."""
    return ", ".join(f"{name} {tools}" for name, tools in sorted(servers.items())) or "—"


def definition_rows(store: Versions, workflow: str | None) -> list[dict[str, Any]]:
    """One row per definition: the recorded ones in the order first seen, then any that
    runs name but no record holds (runs started before stores kept definitions)."""
    counts: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    samples: dict[str, str] = {}
    for c in store.definition_counts(workflow):
        counts.setdefault(c.definition_hash, {})[c.status] = c.runs
        names[c.definition_hash] = c.workflow
        samples.setdefault(c.definition_hash, c.sample)
    rows: list[dict[str, Any]] = [
        {"workflow": d.workflow, "version": d.version, "definition_hash": d.definition_hash,
         "recorded_at": d.recorded_at, "runs": counts.pop(d.definition_hash, {}),
         "servers": {n: p.get("tools") for n, p in (d.body.get("servers") or {}).items()}}
        for d in store.definitions(workflow)]
    rows += [{"workflow": names[h], "version": "", "definition_hash": h, "recorded_at": None,
              "runs": runs, "servers": {}} for h, runs in counts.items()]
    codes: dict[str, WorkflowSpec | None] = {}
    for r in rows:
        # Any run of the workflow says how its code is imported.
        sample = samples.get(r["definition_hash"]) or next(
            (samples[h] for h, w in names.items() if w == r["workflow"]), None)
        r["in_code"] = _in_code(store, r, codes, sample)
    return rows


def _in_code(store: RunReads, row: dict[str, Any], codes: dict[str, WorkflowSpec | None],
             sample: str | None) -> str:
    """``current``, ``kept`` (an earlier version the code keeps), ``no``, or ``?`` when the
    workflow does not import here."""
    from fsm.definition.registry import load_workflow, registered
    from fsm.errors import FSMError
    from fsm.records import started_as

    name = row["workflow"]
    if name not in codes:
        # How its runs were started (registered name or module:attr) says what to import.
        ref = started_as(store.events(sample), name) if sample else \
            registered().get(name, name)
        try:
            codes[name] = load_workflow(ref)
        except FSMError:
            codes[name] = None
    spec = codes[name]
    if spec is None:
        return "?"
    if spec.definition_hash == row["definition_hash"]:
        return "current"
    return "kept" if spec.version_for(row["definition_hash"]) is not None else "no"


RunsArg = typer.Argument(None, help="the runs to migrate")
MapOpt = typer.Option(None, "--map", help="OLD=NEW: a state of the run's version and the "
                      "state of the target it maps to (repeatable; equal names map by default)")


def _who(by: str | None) -> str:
    """``--by``, else the login name of whoever runs the command."""
    import getpass

    from fsm.errors import UsageError

    if by is not None:
        if not by.strip():
            raise UsageError("--by must name who migrates, not be empty")
        return by.strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell who you are: give --by NAME") from None


@app.command("migrate")
def migrate_cmd(
    runs: list[str] | None = RunsArg,
    workflow: str | None = typer.Option(
        None, "--workflow", help="registered workflow name or module:attr (with --from: "
        "every run of it on that version that has not ended)"),
    from_version: str | None = typer.Option(None, "--from", help="the version to move runs "
                                            "off: a label or a definition hash"),
    to: str = typer.Option("current", "--to", help="the version to move them to: a label "
                           "or definition hash the workflow keeps, or current"),
    state_map: list[str] | None = MapOpt,
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="print each run's verdict and change nothing"),
    by: str | None = typer.Option(None, "--by", help="who migrates (default: your login)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Move runs to another version of their workflow, on purpose: the plan is checked
    first (states mapped, waiting states to waiting states of the same kind, pending calls
    valid there, the facts guards read, the invariants proved on from the mapped state),
    then each run moves in one transaction with a migrated event in its log. Exits 1 when
    the plan is refused; then nothing changed."""
    from fsm.errors import MigrationRefused, UsageError
    from fsm.migration import migrate, parse_map

    from .context import store_for

    if runs and workflow is not None and from_version is None:
        raise UsageError("--workflow goes with --from VERSION; give run ids alone")
    if from_version is not None and workflow is None:
        raise UsageError("--from needs --workflow W (the workflow whose runs move)")
    if not runs and workflow is None:
        raise UsageError("give the runs to migrate, or --workflow W --from VERSION")
    pairs = parse_map(state_map or [])
    who = _who(by)
    with store_for(db) as store:
        spec = _workflow(store, workflow, runs or [])
        try:
            result = migrate(store, spec, runs=runs or [], from_version=from_version, to=to,
                             state_map=pairs, by=who, dry_run=dry_run, clock=settings().clock)
        except MigrationRefused as exc:
            _print_plan(exc.lines, as_json, ok=False)
            raise typer.Exit(1) from None
    plan = result.plan
    if as_json:
        print_json({"ok": plan.ok, "dry_run": dry_run, "target": plan.target.label,
                    "lines": plan.lines(), "moved": result.moved,
                    "left": [{"run_id": r, "why": w} for r, w in result.left]})
    else:
        for line in plan.lines() or ["no runs selected"]:
            console.print(line, markup=False)
        if dry_run:
            console.print(f"dry run: {len(plan.moving)} run(s) would move to version "
                          f"{plan.target.label}; nothing was changed", markup=False)
        else:
            console.print(f"migrated {len(result.moved)} run(s) to version "
                          f"{plan.target.label}", markup=False)
        for run_id, why in result.left:
            console.print(f"left {run_id} as it was: {why}", markup=False)
    if not plan.ok or result.left:
        raise typer.Exit(1)


def _workflow(store: RunReads, workflow: str | None, runs: list[str]) -> WorkflowSpec:
    from fsm.definition.registry import load_workflow

    from .context import spec_for_run

    if workflow is not None:
        return load_workflow(workflow)
    return spec_for_run(store, store.load_run(runs[0]))


def _print_plan(lines: list[str], as_json: bool, *, ok: bool) -> None:
    if as_json:
        print_json({"ok": ok, "lines": lines})
        return
    for line in lines:
        console.print(line, markup=False)
    console.print("the plan is refused: nothing was changed", markup=False)


RunsOpt = typer.Option(None, "--runs", help="only these runs (repeatable, or comma-separated)")


@app.command("check-history")
def check_history_cmd(
    against: str = typer.Option(..., "--against", help="the candidate definition: "
                                "module:attr (or a registered workflow name)"),
    runs: list[str] | None = RunsOpt,
    sample: int | None = typer.Option(None, "--sample", min=1, help="check this many of the "
                                      "workflow's runs, picked at random (see --seed)"),
    seed: int = typer.Option(0, "--seed", help="the seed --sample picks with (the same runs "
                             "every time)"),
    state_map: list[str] | None = MapOpt,
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Replay stored runs against a candidate definition before a release, running
    nothing: report the runs whose recorded path its tables would refuse, waiting states
    it no longer has, pending calls whose tool or schema it changed, and runs a migration
    with --map would strand. Exits 1 when any run would break."""
    from fsm.definition.registry import load_workflow
    from fsm.errors import UsageError
    from fsm.migration import parse_map
    from fsm.migration.history import check_history

    ids = [r.strip() for item in runs or [] for r in item.split(",") if r.strip()]
    if ids and sample is not None:
        raise UsageError("give --runs or --sample, not both")
    candidate = load_workflow(against)
    with reader_for(db) as store:
        report = check_history(store, candidate, runs=ids, sample=sample, seed=seed,
                               state_map=parse_map(state_map or []))
    if as_json:
        print_json({"ok": report.ok, "candidate": candidate.label,
                    "definition_hash": candidate.definition_hash,
                    "runs": [{"run_id": r.run_id, "version": r.version, "status": r.status,
                              "state": r.state, "problems": r.problems}
                             for r in report.runs]})
    else:
        for line in report.lines():
            console.print(line, markup=False)
    if not report.ok:
        raise typer.Exit(1)
