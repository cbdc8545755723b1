"""fsm fork, fsm replay and fsm eval: new runs from old ones, and policies tried safely."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from typing import TYPE_CHECKING, Any

import typer

from fsm.errors import SuiteError, UsageError, WorkflowNotFound

from . import exits
from .app import DB_HELP, JSON_HELP, MAX_INT, POLICY_HELP, app, console, print_json, print_table
from .context import ModelFlags, clock, make_policy, reader_for, store_for, workflow_ref
from .ops import CapOpt, NoForceOpt, ServerOpt, TimeoutOpt

if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.sandbox.evaluate import EvalReport
    from fsm.sandbox.replay import ReplayReport
    from fsm.sandbox.suite import Suite

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
#: Suites that ship with the workflows, by name.
SUITES = {"retail-tau2": "workflows.retail.evals:tau2_suite"}


def _workflow(ref: str) -> WorkflowSpec:
    # A workflow that cannot be loaded is refused in one line at the command line's edge
    # (WorkflowNotFound: usage, nothing done).
    from fsm.definition.registry import load_workflow

    return load_workflow(ref)


# -- fork ---------------------------------------------------------------------------------

@app.command("fork")
def fork_cmd(
    run_id: str = typer.Argument(..., help="the run to fork"),
    at: int = typer.Option(..., "--at", min=0, max=MAX_INT,
                           help="the step whose committed state the fork starts from"),
    new_run_id: str | None = typer.Option(None, "--run-id", help="the fork's id "
                                          "(default: random)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Start a new run from what RUN had committed at step --at (its state, facts,
    budgets and transcript); writes made up to there are not made again. The fork is not
    driven: continue it with fsm resume."""
    from fsm.runtime.engine import Engine

    if new_run_id is not None and not new_run_id.strip():
        raise UsageError("--run-id must not be empty")
    with store_for(db) as store:
        parent = store.load_run(run_id)
        spec = _workflow(workflow_ref(store, parent))
        with Engine(spec, store, None, clock=clock) as engine:
            run = engine.fork(run_id, at=at, new_run_id=new_run_id)
    origin = run.forked_from
    assert origin is not None
    if as_json:
        print_json({"run_id": run.run_id, "status": run.status, "state": run.state,
                    "step": run.step, "forked_from": origin.model_dump()})
        return
    console.print(f"forked {run_id} at step {at} as {run.run_id}: {run.status} in state "
                  f"{run.state!r} (the parent's log head there: seq {origin.seq}, "
                  f"{origin.hash[:16]}…)", markup=False)
    console.print(f"continue it with: fsm resume {run.run_id}", markup=False)


# -- replay -------------------------------------------------------------------------------

@app.command("replay")
def replay_cmd(
    run_id: str = typer.Argument(..., help="the recorded run to replay"),
    policy: str | None = typer.Option(None, "--policy", help="the policy to try (default: "
                                      "the run's own); " + POLICY_HELP),
    model: str | None = typer.Option(None, "--model", help="try this model instead"),
    base_url: str | None = typer.Option(None, "--base-url", help="endpoint for --model"),
    timeout: float | None = TimeoutOpt,
    max_output_tokens: int | None = CapOpt,
    no_force: bool = NoForceOpt,
    server: str | None = ServerOpt,
    from_step: int = typer.Option(0, "--from", min=0, max=MAX_INT,
                                  help="replay the recorded actions up to this step, then "
                                       "let the policy act"),
    live_reads: bool = typer.Option(False, "--live-reads",
                                    help="run read-only calls the recording lacks against "
                                         "the workflow's resources"),
    check: bool = typer.Option(False, "--check",
                               help="exit 1 unless the replay reproduces the recorded run "
                                    "step for step (for CI)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Drive a policy against a recorded run in memory, the database opened read only:
    recorded reads get their recorded results, writes never run. Compares the two runs
    step by step."""
    from fsm.adapters.recorded import recorded_choice
    from fsm.definition.tools import Resources
    from fsm.records import policy_record
    from fsm.sandbox.replay import replay

    flags = ModelFlags(timeout=timeout, max_output_tokens=max_output_tokens,
                       no_force=no_force, server=server)
    with reader_for(db) as store:
        run = store.load_run(run_id)
        events = store.events(run_id)
        ref = workflow_ref(store, run, events)
        spec = _workflow(ref)
        settings: dict[str, Any] = {}
        if policy is None and model is None:
            recorded = recorded_choice(policy_record(events))
            policy, model = recorded.policy, recorded.model
            base_url = base_url or recorded.base_url
            settings = dict(recorded.settings)
        fn, record = make_policy(ref, spec, policy, model, base_url, flags=flags,
                                 settings=settings, events=events)
        live = Resources(spec.resources, store.location) if live_reads else None
        try:
            report = replay(spec, store, run_id, fn, policy_name=str(record["policy"]),
                            from_step=from_step, live_reads=live, clock=clock)
        finally:
            if live is not None:
                live.close()
    if as_json:
        print_json(report.as_json())
    else:
        _print_replay(report)
    if check and not report.reproduced:
        raise typer.Exit(exits.ERROR)


def _print_replay(r: ReplayReport) -> None:
    where = "reproduces the recorded run step for step" if r.reproduced else (
        f"the paths split at step {r.split}" if r.split is not None
        else "takes the same actions, and ends otherwise")
    console.print(f"replay of {r.run_id} with {r.policy}"
                  + (f" from step {r.from_step}" if r.from_step else "") + f": {where}",
                  markup=False)
    print_table(None, ["step", "recorded", "replayed", "state (recorded)", "state (replay)",
                       ""], [[s.step, s.recorded, s.replayed, s.state_recorded,
                              s.state_replayed, s.verdict] for s in r.steps])
    j = r.as_json()
    rows = [[name, v["status"], v["state"], v["steps"], v["input_tokens"] + v["output_tokens"],
             v["cost_micros"], v["reason"] or ""] for name, v in
            (("recorded", j["recorded"]), ("replay", j["replayed"]))]
    print_table(None, ["run", "status", "state", "steps", "tokens", "cost_micros", "reason"],
                rows)
    allowed = sum(w.allowed for w in r.writes)
    console.print(f"write attempts: {len(r.writes)} (none ran): {allowed} the tables and "
                  f"guards allowed, {len(r.writes) - allowed} refused", markup=False)
    if r.writes:
        print_table(None, ["step", "tool", "arguments", "allowed", "note"], [
            [w.step, w.tool, _args(w.args), "yes" if w.allowed else "no", w.note]
            for w in r.writes])
    console.print(f"refused attempts: {len(r.refused)}", markup=False)
    for f in r.refused:
        console.print(f"  step {f['step']}: {f['tool'] or 'advance'} {_args(f['args'])}: "
                      f"{f['reason']}", markup=False)
    if r.not_recorded:
        console.print(f"reads not in the recording: {len(r.not_recorded)}", markup=False)


def _args(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True)


# -- eval ---------------------------------------------------------------------------------

_AGO = re.compile(r"^(\d+)([smhd])$")


def _since(text: str | None) -> float | None:
    """``--since``: an ISO date or time (UTC unless it says), or an age like 24h, 7d."""
    if text is None:
        return None
    m = _AGO.match(text.strip())
    if m:
        return time.time() - int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[
            m.group(2)]
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since must be a date or time like 2026-12-01 or "
                         f"2026-12-01T09:00Z, or an age like 90m, 24h, 7d; not {text!r}"
                         ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _suite(ref: str) -> Suite:
    import os

    from fsm.definition.registry import load_object
    from fsm.sandbox.suite import Suite, load_suite

    if os.path.exists(ref) or ref.endswith((".yaml", ".yml")):
        return load_suite(ref)
    target = SUITES.get(ref, ref)
    if ":" not in target:
        raise SuiteError(f"no suite {ref!r}: give a suite file, module:attr, or one of "
                         f"{', '.join(sorted(SUITES))}")
    try:
        made = load_object(target)  # a Suite, or a function of no arguments returning one
    except WorkflowNotFound as exc:
        raise SuiteError(f"suite {ref!r}: {exc}") from None
    suite = made() if callable(made) and not isinstance(made, Suite) else made
    if not isinstance(suite, Suite):
        raise SuiteError(f"suite {ref!r} is not a Suite")
    return suite


@app.command("eval", epilog="Exit status: 0 every trial of every case passed; 1 a trial "
                            "failed (or an error); 2 a bad suite, policy or option (nothing ran).")
def eval_cmd(
    suite_ref: str | None = typer.Argument(None, metavar="SUITE", help="a suite file (YAML), "
                                           "module:attr, or " + ", ".join(SUITES)),
    policy: str | None = typer.Option(None, "--policy", help="the policy to evaluate "
                                      "(default: the suite's, else the workflow's); "
                                      + POLICY_HELP),
    model: str | None = typer.Option(None, "--model", help="evaluate this model"),
    base_url: str | None = typer.Option(None, "--base-url", help="endpoint for --model"),
    timeout: float | None = TimeoutOpt,
    max_output_tokens: int | None = CapOpt,
    no_force: bool = NoForceOpt,
    server: str | None = ServerOpt,
    k: int | None = typer.Option(None, "-k", min=1, max=1000,
                                 help="trials of each case (default: the suite's, else 1)"),
    from_runs: bool = typer.Option(False, "--from-runs", help="build the suite from stored "
                                   "runs: each run's outcome is what its case expects"),
    workflow: str | None = typer.Option(None, "--workflow", help="with --from-runs: only "
                                        "runs of this workflow"),
    status: str | None = typer.Option(None, "--status", help="with --from-runs: only runs "
                                      "in this status"),
    since: str | None = typer.Option(None, "--since", help="with --from-runs: only runs "
                                     "started since (2026-12-01, 24h, 7d)"),
    save: str | None = typer.Option(None, "--save", help="with --from-runs: also write the "
                                    "suite to this YAML file"),
    infer_events: bool = typer.Option(False, "--infer-events", help="the policy speaks "
                                      "plain tool calling: it sees every tool, and the "
                                      "workflow's events are fired for it (as fsm shadow "
                                      "infers them)"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run each case of a suite k times, each on fresh resources in memory, and report
    pass^k (as tau2-bench defines it), refused attempts, steps, tokens and cost."""
    from fsm.definition.registry import default_policy
    from fsm.sandbox.evaluate import evaluate, policy_maker, resolve_checks
    from fsm.sandbox.infer import inferring

    suite = _eval_suite(suite_ref, from_runs, workflow, status, since, save, db)
    spec = _workflow(suite.workflow)
    resolve_checks(suite, spec)
    flags = ModelFlags(timeout=timeout, max_output_tokens=max_output_tokens,
                       no_force=no_force, server=server)
    chosen, name, fallback = policy or suite.policy, policy or suite.policy, None
    if model is not None or flags.given():
        fn, record = make_policy(suite.workflow, spec, policy, model, base_url, flags=flags)
        chosen, name, fallback = None, str(record["policy"]), (lambda: fn)
    elif chosen is not None:
        make_policy(suite.workflow, spec, chosen, None, None)  # refused before anything runs
    elif not all(c.policy is not None for c in suite.cases):
        found = default_policy(suite.workflow)
        if found is None:
            raise UsageError(f"workflow {suite.workflow!r} ships no default policy; give "
                             "--policy module:attr or --model NAME")
        name, fallback = "default", (lambda: default_policy(suite.workflow))
    maker = policy_maker(chosen, fallback)
    report = evaluate(spec, suite, inferring(spec, maker) if infer_events else maker,
                      k=k or suite.k, policy_name=(name or "the suite's own")
                      + (" (events inferred)" if infer_events else ""), clock=clock)
    if as_json:
        print_json({**report.as_json(), **({"skipped": suite.skipped} if from_runs else {})})
    else:
        if suite.skipped:
            console.print(suite.skipped_line(), markup=False)
        _print_eval(report)
    raise typer.Exit(exits.OK if report.ok else exits.ERROR)


def _eval_suite(ref: str | None, from_runs: bool, workflow: str | None, status: str | None,
                since: str | None, save: str | None, db: str | None) -> Suite:
    if from_runs and ref is not None:
        raise UsageError("give a SUITE or --from-runs, not both")
    if not from_runs and ref is None:
        raise UsageError("give a SUITE, or --from-runs to build one from stored runs")
    if not from_runs and (workflow or status or since or save):
        raise UsageError("--workflow, --status, --since and --save apply to --from-runs only")
    if ref is not None:
        return _suite(ref)
    from fsm.sandbox.suite import suite_from_runs, suite_yaml

    after = _since(since)
    with reader_for(db) as store:
        suite = suite_from_runs(store, workflow=workflow, status=status, since=after)
    if save is not None:
        try:
            with open(save, "x", encoding="utf-8") as f:
                f.write(suite_yaml(suite))
        except FileExistsError:
            raise UsageError(f"--save {save!r}: the file exists; give a new name") from None
        except OSError as exc:
            raise UsageError(f"--save {save!r}: {exc.strerror or exc}") from None
    return suite


def _print_eval(r: EvalReport) -> None:
    j = r.as_json()
    key = f"pass^{r.k}"
    print_table(None, ["case", "trials", "passed", key, "refused/run", "steps/run", "tokens",
                       "cost_micros", "why not"], [
        [c["case"], c["trials"], c["passed"], f"{c[key]:.3f}", f"{c['refused_per_run']:.2f}",
         f"{c['steps_per_run']:.1f}", c["tokens"], c["cost_micros"],
         "; ".join(c["failures"])] for c in j["cases"]])
    o = j["overall"]
    ks = ", ".join(f"pass^{i} {o[f'pass^{i}']:.3f} ({o[f'pass^{i} under policy']:.3f} under "
                   "policy)" for i in range(1, r.k + 1))
    console.print(f"{r.suite} with {r.policy}: {o['cases_passed']} of {o['cases']} cases "
                  f"passed every trial ({o['trials']} trials); {ks}; refused/run "
                  f"{o['refused_per_run']:.2f}, steps/run {o['steps_per_run']:.1f}, tokens "
                  f"{o['tokens']}, cost_micros {o['cost_micros']}; {j['seconds']:.1f}s",
                  markup=False)
