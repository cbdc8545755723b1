"""Opening the store, the workflow and the policy a command needs."""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from fsm.errors import FSMError
from fsm.records import RunState
from fsm.registry import NotFound, default_policy, load_policy, load_workflow
from fsm.runtime.compaction import Compactor
from fsm.runtime.engine import Engine
from fsm.spec import WorkflowSpec
from fsm.store import SQLiteStore, open_store

from .app import db_path


class UsageError(FSMError):
    """A command-line argument that cannot be used."""


def clock() -> float:
    """Wall-clock time, shifted by ``FSM_CLOCK_OFFSET`` seconds (to rehearse expiries)."""
    raw = os.environ.get("FSM_CLOCK_OFFSET") or "0"
    try:
        offset = float(raw)
    except ValueError:
        raise UsageError(f"FSM_CLOCK_OFFSET must be a number of seconds, not {raw!r}") from None
    return time.time() + offset


def store_for(db: str | None) -> SQLiteStore:
    """The database of ``--db`` for a command that writes (created if missing)."""
    return open_store(db_path(db))


def reader_for(db: str | None) -> SQLiteStore:
    """The database of ``--db`` opened read-only: it must exist and be an fsm database,
    and nothing in it changes."""
    return SQLiteStore(db_path(db), readonly=True)


def fmt_time(t: float | None) -> str:
    if t is None:
        return ""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def workflow_ref(store: SQLiteStore, run: RunState) -> str:
    """How the run's workflow was named when it started (registered name or module:attr)."""
    events = store.events(run.run_id)
    if events and events[0].kind == "start":
        ref = events[0].detail.get("workflow_ref")
        if ref:
            return str(ref)
    return run.workflow


def spec_for_run(store: SQLiteStore, run: RunState) -> WorkflowSpec:
    return load_workflow(workflow_ref(store, run))


def make_policy(spec_ref: str, spec: WorkflowSpec, policy: str | None, model: str | None,
                base_url: str | None) -> tuple[Any, str]:
    """The policy to drive runs with, and how to name it in the log."""
    if policy and model:
        raise UsageError("give either --policy or --model, not both")
    if model:
        from fsm.adapters.openai import OpenAIPolicy

        return OpenAIPolicy(spec, model, base_url=base_url), f"model:{model}"
    if policy:
        return load_policy(policy), policy
    found = default_policy(spec_ref)
    if found is None:
        raise UsageError(
            f"workflow {spec_ref!r} ships no default policy; give --policy module:attr "
            "or --model NAME"
        )
    return found, "default"


def engine_for_run(store: SQLiteStore, run_id: str, *, policy: str | None = None,
                   model: str | None = None, base_url: str | None = None) -> Engine:
    """An engine for an existing run, with the policy it started with unless overridden."""
    run = store.load_run(run_id)
    ref = workflow_ref(store, run)
    spec = load_workflow(ref)
    if policy is None and model is None:
        start = store.events(run_id)[0].detail if store.events(run_id) else {}
        recorded = str(start.get("policy") or "default")
        if recorded.startswith("model:"):
            model = recorded.removeprefix("model:")
            base_url = base_url or start.get("base_url")
        elif recorded != "default":
            policy = recorded
    try:
        fn, _ = make_policy(ref, spec, policy, model, base_url)
    except NotFound as exc:
        raise UsageError(str(exc)) from None
    return Engine(spec, store, fn, clock=clock, compactor=Compactor())


def path_of(store: SQLiteStore, run_id: str) -> list[str]:
    """The states a run went through, in order."""
    path: list[str] = []
    for e in store.events(run_id):
        if e.kind == "start" and e.state_after:
            path.append(e.state_after)
        elif e.kind == "transition" and e.state_after:
            path.append(e.state_after)
    return path


def amount_of(args: dict[str, Any]) -> str:
    paise = args.get("amount_paise")
    if not isinstance(paise, int):
        return ""
    rupees, rest = divmod(paise, 100)
    return f"₹{rupees:,}" + (f".{rest:02d}" if rest else "")
