"""Opening the store, the workflow and the policy a command needs."""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

from fsm.errors import UsageError, WorkflowNotFound

from .app import db_path

# The runtime is imported by the commands that use it, so that ``fsm --help`` stays fast.
if TYPE_CHECKING:
    from fsm.records import Event, RunState
    from fsm.runtime.engine import Engine
    from fsm.spec import WorkflowSpec
    from fsm.store import Store


#: The last second every listing can show (9999-12-31 23:59:59 UTC).
LAST_TIME = 253_402_300_799.0
#: The longest wait for one model reply that ``--timeout`` accepts: a day.
MAX_TIMEOUT = 86_400.0


def clock() -> float:
    """Wall-clock time, shifted by ``FSM_CLOCK_OFFSET`` seconds (to rehearse expiries)."""
    raw = os.environ.get("FSM_CLOCK_OFFSET") or "0"
    try:
        offset = float(raw)
    except ValueError:
        offset = math.nan
    now = time.time() + offset
    if not 0 <= now <= LAST_TIME:
        raise UsageError(f"FSM_CLOCK_OFFSET must be a number of seconds that keeps the clock "
                         f"between 1970 and the year 9999, not {raw!r}")
    return now


def check_clock() -> None:
    """Refuse a bad ``FSM_CLOCK_OFFSET`` before a command changes anything."""
    clock()


def refuse_empty(**options: str | None) -> None:
    """An option given as an empty text (``--model "$UNSET"``) is refused, not defaulted."""
    for name, value in options.items():
        if value is not None and not value.strip():
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} must not be empty; leave it out for the default")


def check_timeout(timeout: float | None) -> float | None:
    """``--timeout``: seconds above 0, at most a day."""
    if timeout is not None and not (0 < timeout <= MAX_TIMEOUT):
        raise UsageError(f"--timeout must be a number of seconds above 0 and at most "
                         f"{MAX_TIMEOUT:g}, not {timeout:g}")
    return timeout


def store_for(db: str | None) -> Store:
    """The database of ``--db`` for a command that writes (created if missing; a file of
    another program is refused untouched)."""
    from fsm.store import open_store

    return open_store(db_path(db), adopt=False)


def reader_for(db: str | None) -> Store:
    """The database of ``--db`` for a command that only reads: it must exist and be an
    fsm database, and nothing in it changes."""
    from fsm.store import open_store

    return open_store(db_path(db), readonly=True)


def fmt_time(t: float | None) -> str:
    from fsm.records import utc

    return utc(t)


def workflow_ref(store: Store, run: RunState, events: list[Event] | None = None) -> str:
    """How the run's workflow was named when it started (registered name or module:attr),
    from its log (``events``, when the caller has read it already)."""
    from fsm.records import started_as

    return started_as(store.events(run.run_id) if events is None else events, run.workflow)


def spec_for_run(store: Store, run: RunState, events: list[Event] | None = None) -> WorkflowSpec:
    from fsm.registry import load_workflow

    return load_workflow(workflow_ref(store, run, events))


def make_policy(spec_ref: str, spec: WorkflowSpec, policy: str | None, model: str | None,
                base_url: str | None, timeout: float | None = None) -> tuple[Any, str]:
    """The policy to drive runs with, and how to name it in the log."""
    from fsm.registry import default_policy, load_policy

    refuse_empty(policy=policy, model=model, base_url=base_url)
    if policy and model:
        raise UsageError("give either --policy or --model, not both")
    if timeout is not None and not model:
        raise UsageError("--timeout applies to --model only")
    check_timeout(timeout)
    if model:
        from fsm.adapters.openai import DEFAULT_TIMEOUT, OpenAIPolicy

        seconds = DEFAULT_TIMEOUT if timeout is None else timeout
        return OpenAIPolicy(spec, model, base_url=base_url, timeout=seconds), f"model:{model}"
    if policy:
        return load_policy(policy), policy
    found = default_policy(spec_ref)
    if found is None:
        raise UsageError(
            f"workflow {spec_ref!r} ships no default policy; give --policy module:attr "
            "or --model NAME"
        )
    return found, "default"


def engine_for_run(store: Store, run_id: str, *, policy: str | None = None,
                   model: str | None = None, base_url: str | None = None,
                   timeout: float | None = None) -> Engine:
    """An engine for an existing run, with the policy it started with unless overridden."""
    from fsm.adapters.recorded import recorded_choice
    from fsm.records import start_detail
    from fsm.registry import load_workflow
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.engine import Engine

    run = store.load_run(run_id)
    events = store.events(run_id)
    ref = workflow_ref(store, run, events)
    spec = load_workflow(ref)
    if policy is None and model is None:
        recorded = recorded_choice(start_detail(events))
        policy, model = recorded.policy, recorded.model
        if model is not None:
            base_url = base_url or recorded.base_url
            timeout = recorded.timeout if timeout is None else timeout
    try:
        fn, _ = make_policy(ref, spec, policy, model, base_url, timeout)
    except WorkflowNotFound as exc:
        raise UsageError(str(exc)) from None
    return Engine(spec, store, fn, clock=clock, compactor=Compactor())


def path_of(store: Store, run_id: str, events: list[Event] | None = None) -> list[str]:
    """The states a run went through, in order (from ``events``, when already read)."""
    from fsm.records import state_path

    return state_path(store.events(run_id) if events is None else events)
