"""Fleet commands: ``fsm worker`` drives runnable runs; ``fsm submit`` creates one for it."""

from __future__ import annotations

import signal
from typing import Any

import typer

from fsm.errors import UsageError

from .app import DB_HELP, JSON_HELP, MAX_INT, app, console, print_json
from .context import check_clock, clock, make_policy, reader_for, refuse_empty, store_for
from .goal import GOAL_HELP, read_goal

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
#: The longest lease, poll or sweep interval a worker takes: a day.
MAX_INTERVAL = 86_400.0
WorkflowOpt = typer.Option(None, "--workflow", help="only runs of this workflow (repeatable)")


@app.command("submit")
def submit_cmd(
    workflow: str = typer.Argument(..., help="registered workflow name or module:attr"),
    goal: str = typer.Argument(..., help=GOAL_HELP),
    user: str = typer.Option("", "--user", help="the customer/user the run acts for"),
    run_id: str | None = typer.Option(None, "--run-id", help="run id (default: random)"),
    policy: str | None = typer.Option(None, "--policy",
                                      help="policy the workers drive it with (module:attr)"),
    max_steps: int = typer.Option(50, "--max-steps", min=1, max=MAX_INT, help="step budget"),
    db: str | None = DbOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Create a run for the workers to drive (``fsm worker``), without driving it here."""
    text = read_goal(goal)
    if run_id is not None and not run_id.strip():
        raise UsageError("--run-id must not be empty")
    check_clock()
    from fsm.records import Budgets
    from fsm.registry import load_workflow
    from fsm.runtime.engine import Engine

    spec = load_workflow(workflow)
    make_policy(workflow, spec, policy, None, None)  # refuse a policy no worker could load
    with store_for(db) as store:
        engine = Engine(spec, store, clock=clock)
        run = engine.start(text, user=user, run_id=run_id, budgets=Budgets(max_steps=max_steps),
                           drive=False,
                           meta={"workflow_ref": workflow, "policy": policy or "default"})
    if as_json:
        print_json({"run_id": run.run_id, "status": run.status, "state": run.state})
    else:
        console.print(f"submitted {run.run_id} ({run.workflow}, {run.status} in {run.state})",
                      markup=False)


@app.command("worker")
def worker_cmd(
    db: str | None = DbOpt,
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=1000,
                                    help="runs driven at once"),
    workflow: list[str] | None = WorkflowOpt,
    policy: str | None = typer.Option(None, "--policy",
                                      help="drive every run with this policy (module:attr)"),
    lease_seconds: float = typer.Option(30.0, "--lease-seconds", min=0.5, max=MAX_INTERVAL,
                                        help="lease time; a dead worker's runs wait this long"),
    poll_seconds: float = typer.Option(1.0, "--poll-seconds", min=0.05, max=MAX_INTERVAL,
                                       help="poll interval when no notification arrives"),
    sweep_seconds: float = typer.Option(5.0, "--sweep-seconds", min=0.1, max=MAX_INTERVAL,
                                        help="interval between sweeps of expired approvals"),
    metrics_port: int | None = typer.Option(None, "--metrics-port", min=0, max=65535,
                                            help="serve Prometheus text on 127.0.0.1:PORT"),
    stats: bool = typer.Option(False, "--stats",
                               help="print the fleet's counts from the database and exit"),
    as_json: bool = JsonOpt,
) -> None:
    """Drive runnable runs until SIGTERM: then finish current steps, release, exit."""
    refuse_empty(policy=policy)
    if stats:
        from fsm.worker import fleet_stats

        with reader_for(db) as reader:
            _print_stats(fleet_stats(reader, clock()), as_json)
        return
    store = store_for(db)
    from fsm.worker import Worker, WorkerConfig

    config = WorkerConfig(concurrency=concurrency, workflows=workflow or None, policy=policy,
                          lease_seconds=lease_seconds, poll_seconds=poll_seconds,
                          sweep_seconds=sweep_seconds)
    worker = Worker(store, config, clock=clock, log=_say)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    try:
        if metrics_port is None:
            worker.run()
        else:
            with worker.serving_metrics(metrics_port) as port:
                worker.say(f"metrics on http://127.0.0.1:{port}/metrics")
                worker.run()
    finally:
        store.close()


def _say(line: str) -> None:
    # Flushed at once: a worker's log must survive a SIGKILL up to its last line.
    console.print(line, markup=False)
    console.file.flush()


def _print_stats(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    runs = ", ".join(f"{k} {v}" for k, v in data["runs"].items()) or "none"
    console.print(f"runs               {runs}", markup=False)
    for key in ("in_flight", "runnable", "expired_leases", "approvals_waiting",
                "steps_per_second"):
        console.print(f"{key.replace('_', ' '):18} {data[key]}", markup=False)
