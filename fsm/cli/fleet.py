"""Fleet commands: ``fsm worker`` drives runnable runs; ``fsm submit`` creates one for it."""

from __future__ import annotations

import signal
import threading
from typing import Any

import typer

from fsm.errors import UsageError

from .app import (
    DB_HELP,
    JSON_HELP,
    MAX_INT,
    WORKFLOW_HELP,
    app,
    console,
    print_json,
    settings,
    skipped_rows,
)
from .context import check_clock, clock, make_policy, reader_for, refuse_empty, store_for
from .goal import GOAL_HELP, read_goal
from .retrying import retry_of

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)
#: The longest lease, poll or sweep interval a worker takes: a day.
MAX_INTERVAL = 86_400.0
WorkflowOpt = typer.Option(None, "--workflow", help="only runs of this workflow (repeatable)")


@app.command("submit")
def submit_cmd(
    workflow: str = typer.Argument(..., help=WORKFLOW_HELP),
    goal: str = typer.Argument(..., help=GOAL_HELP),
    user: str = typer.Option("", "--user", help="the customer the run acts for (tools read it "
                             "as ctx.user); default: \"\", a run of no one"),
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
    from fsm.definition.registry import load_workflow
    from fsm.records import Budgets
    from fsm.runtime.engine import Engine

    spec = load_workflow(workflow)
    make_policy(workflow, spec, policy, None, None)  # refuse a policy no worker could load
    options: dict[str, Any] = dict(
        user=user, run_id=run_id, budgets=Budgets(max_steps=max_steps), drive=False,
        meta={"workflow_ref": workflow, "policy": policy or "default"})
    token = None
    with store_for(db) as store:
        engine = Engine(spec, store, clock=settings().clock)
        if spec.converses:  # the customer's front end needs the run's reply token
            chat = engine.start_conversation(text, **options)
            run, token = chat.run, chat.token
        else:
            run = engine.start(text, **options)
    if as_json:
        print_json({"run_id": run.run_id, "status": run.status, "state": run.state,
                    **({"reply_token": token} if token else {})})
    else:
        console.print(f"submitted {run.run_id} ({run.workflow}, {run.status} in {run.state})",
                      markup=False)
        if token:
            console.print(f"token    {token} (the customer's reply token; shown only now)",
                          markup=False)


#: Runs a threaded worker drives at once, at most (one thread each).
MAX_THREADED = 1000


@app.command("worker")
def worker_cmd(
    db: str | None = DbOpt,
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=10_000,
                                    help="runs driven at once (at most 1000 on threads)"),
    workflow: list[str] | None = WorkflowOpt,
    policy: str | None = typer.Option(None, "--policy",
                                      help="drive every run with this policy (module:attr)"),
    lease_seconds: float = typer.Option(30.0, "--lease-seconds", min=0.5, max=MAX_INTERVAL,
                                        help="lease time; a dead worker's runs wait this long"),
    poll_seconds: float = typer.Option(1.0, "--poll-seconds", min=0.05, max=MAX_INTERVAL,
                                       help="poll interval when no notification arrives"),
    sweep_seconds: float = typer.Option(5.0, "--sweep-seconds", min=0.1, max=MAX_INTERVAL,
                                        help="interval between sweeps of expired approvals"),
    step_timeout: float = typer.Option(
        300.0, "--step-timeout", min=0, max=MAX_INTERVAL,
        help="seconds a step may last before the worker gives its run's lease back to the "
             "fleet (0: never)"),
    metrics_port: int | None = typer.Option(None, "--metrics-port", min=0, max=65535,
                                            help="serve Prometheus metrics on "
                                                 "127.0.0.1:PORT/metrics"),
    stats: bool = typer.Option(False, "--stats",
                               help="print the fleet's counts from the database and exit"),
    as_json: bool = JsonOpt,
    use_async: bool = typer.Option(
        False, "--async", help="drive the runs in flight from one event loop: a run waiting "
                               "on its model holds no thread (concurrency up to 10000)"),
    threads: int | None = typer.Option(
        None, "--threads", min=1, max=256,
        help="--async: threads for the store's work and the tools (default: the store's "
             "connections)"),
    store_on_loop: bool = typer.Option(
        False, "--store-on-loop",
        help="--async: drive the steps on the event loop, their statements through "
             "PostgreSQL's async pool, instead of in the threads"),
) -> None:
    """Drive runnable runs until SIGTERM: then finish current steps, release, exit."""
    refuse_empty(policy=policy)
    if stats:
        _stats(db, as_json)
        return
    _check_kind(use_async, concurrency, threads, store_on_loop)
    from fsm.worker import Worker, WorkerConfig

    config = WorkerConfig(concurrency=concurrency, workflows=workflow or None, policy=policy,
                          lease_seconds=lease_seconds, poll_seconds=poll_seconds,
                          sweep_seconds=sweep_seconds, step_timeout=step_timeout or None,
                          retry=retry_of(settings()), settings=settings(), threads=threads,
                          store_on_loop=store_on_loop)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    store = _open_retrying(db, config, stopping)
    if store is None:
        return
    if use_async:
        from fsm.worker_async import AsyncWorker

        worker: Worker = AsyncWorker(store, config, clock=settings().clock, log=_say)
    else:
        worker = Worker(store, config, clock=settings().clock, log=_say)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    if stopping.is_set():
        worker.stop()
    try:
        if metrics_port is None:
            worker.run()
        else:
            with worker.serving_metrics(metrics_port) as port:
                worker.say(f"metrics on http://127.0.0.1:{port}/metrics")
                worker.run()
    finally:
        store.close()


def _check_kind(use_async: bool, concurrency: int, threads: int | None,
                store_on_loop: bool) -> None:
    """Refuse what only an async worker takes, in one line."""
    if use_async:
        return
    if concurrency > MAX_THREADED:
        raise typer.BadParameter(
            f"{concurrency} runs at once needs --async: on threads (one per run in flight) "
            f"--concurrency is at most {MAX_THREADED}", param_hint="--concurrency")
    if threads is not None:
        raise typer.BadParameter("--threads is for --async workers (a threaded worker has "
                                 "one thread per run in flight: --concurrency)",
                                 param_hint="--threads")
    if store_on_loop:
        raise typer.BadParameter("--store-on-loop is for --async workers (a threaded "
                                 "worker has no event loop)", param_hint="--store-on-loop")


def _open_retrying(db: str | None, config: Any, stopping: threading.Event) -> Any:
    """The worker's store; while the database cannot be reached for now (it restarts, a
    migration of another process holds it), try again with backoff until it can, or
    until SIGTERM (then ``None``)."""
    from fsm.errors import Unavailable

    tries = 0
    while True:
        try:
            return store_for(db)
        except Unavailable as exc:
            tries += 1
            delay = config.retry.delay(tries)
            _say(f"worker: cannot open the database: {exc}; trying again in {delay:.1f}s")
            if stopping.wait(delay):
                return None


def _say(line: str) -> None:
    # Flushed at once: a worker's log must survive a SIGKILL up to its last line.
    console.print(line, markup=False)
    console.file.flush()


def _stats(db: str | None, as_json: bool) -> None:
    """Print the fleet's counts; a row that cannot be read is left out of them and named
    on its own ``warning:`` line (the counts of every other run stand)."""
    from fsm.errors import RowDamaged
    from fsm.worker import fleet_stats

    damaged: list[RowDamaged] = []
    with reader_for(db) as reader:
        _print_stats(fleet_stats(reader, clock(), damaged), as_json)
    skipped_rows(damaged, "left out of the counts")


def _print_stats(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    runs = ", ".join(f"{k} {v}" for k, v in data["runs"].items()) or "none"
    console.print(f"runs               {runs}", markup=False)
    for key in ("in_flight", "runnable", "expired_leases", "approvals_waiting",
                "steps_per_second", "damaged_rows"):
        console.print(f"{key.replace('_', ' '):18} {data[key]}", markup=False)
