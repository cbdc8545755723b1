"""Opening the store, the workflow and the policy a command needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fsm.errors import UsageError, WorkflowNotFound

from .app import db_path
from .app import settings as read_settings
from .retrying import retry_of

# The runtime is imported by the commands that use it, so that ``fsm --help`` stays fast.
if TYPE_CHECKING:
    from fsm.definition.spec import WorkflowSpec
    from fsm.records import Event, RunState
    from fsm.runtime.engine import Engine
    from fsm.store import Store
    from fsm.store.roles import RunReads


#: The longest wait for one model reply that ``--timeout`` accepts: a day.
MAX_TIMEOUT = 86_400.0

def clock() -> float:
    """Wall-clock time, shifted by ``FSM_CLOCK_OFFSET`` seconds (to rehearse expiries)."""
    return read_settings().clock()


def check_clock() -> None:
    """Refuse bad settings (``FSM_CLOCK_OFFSET`` among them) before a command changes
    anything."""
    read_settings()


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

    return open_store(db_path(db), settings=read_settings(), adopt=False)


def reader_for(db: str | None) -> Store:
    """The database of ``--db`` for a command that only reads: it must exist and be an
    fsm database, and nothing in it changes."""
    from fsm.store import open_store

    return open_store(db_path(db), settings=read_settings(), readonly=True)


def fmt_time(t: float | None) -> str:
    from fsm.records import utc

    return utc(t)


def workflow_ref(store: RunReads, run: RunState, events: list[Event] | None = None) -> str:
    """How the run's workflow was named when it started (registered name or module:attr),
    from its log (``events``, when the caller has read it already)."""
    from fsm.records import started_as

    return started_as(store.events(run.run_id) if events is None else events, run.workflow)


def spec_for_run(store: RunReads, run: RunState, events: list[Event] | None = None) -> WorkflowSpec:
    """The run's workflow as its code defines it now (with the versions it keeps)."""
    from fsm.definition.registry import load_workflow

    return load_workflow(workflow_ref(store, run, events))


@dataclass(frozen=True)
class ModelFlags:
    """The options of ``run`` and ``resume`` that shape a model's requests."""

    timeout: float | None = None
    max_output_tokens: int | None = None
    no_force: bool = False
    server: str | None = None

    def given(self) -> bool:
        return (self.timeout is not None or self.max_output_tokens is not None
                or self.no_force or self.server is not None)

    def settings(self, recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Model settings: these flags over the ``recorded`` ones."""
        out = dict(recorded or {})
        if self.max_output_tokens is not None:
            out["max_output_tokens"] = self.max_output_tokens
        if self.no_force:
            out["force"] = False
        if self.server is not None:
            out["server"] = self.server
        return out


def check_model_flags(flags: ModelFlags) -> None:
    check_timeout(flags.timeout)
    if flags.max_output_tokens is not None and flags.max_output_tokens < 1:
        raise UsageError(f"--max-output-tokens must be a whole number of tokens above 0, not "
                         f"{flags.max_output_tokens}")
    from fsm.adapters.servers import SERVER_NAMES

    if flags.server is not None and flags.server not in SERVER_NAMES:
        raise UsageError(f"--server must be one of {', '.join(SERVER_NAMES)}, not "
                         f"{flags.server!r}")


def version_for_run(store: RunReads, run: RunState,
                    events: list[Event] | None = None) -> WorkflowSpec:
    """The version of its workflow the run lives on, when the code keeps it (else the
    current one): what to show the run's steps with."""
    spec = spec_for_run(store, run, events)
    return spec.version_for(run.definition_hash) or spec


def make_policy(spec_ref: str, spec: WorkflowSpec, policy: str | None, model: str | None,
                base_url: str | None, timeout: float | None = None, *,
                flags: ModelFlags | None = None, settings: Mapping[str, Any] | None = None,
                events: list[Event] | None = None) -> tuple[Any, dict[str, Any]]:
    """The policy to drive runs with, and how the run's log names it: ``{"policy": ...}``
    and, for a model, its ``base_url``, ``timeout`` and ``settings`` (never a key).

    ``settings`` are recorded model settings that ``flags`` override; ``events`` (a run's
    log) tell the model's policy what was learnt about its server.
    """
    from fsm.definition.registry import default_policy, load_policy

    flags = flags or ModelFlags(timeout=timeout)
    refuse_empty(policy=policy, model=model, base_url=base_url)
    if policy and model:
        raise UsageError("give either --policy or --model, not both")
    if flags.given() and not model:
        raise UsageError(f"{_first_flag(flags)} applies to --model only")
    check_model_flags(flags)
    if model:
        from fsm.adapters.openai import shown_url
        from fsm.adapters.recorded import model_policy

        chosen = flags.settings(settings)
        fn = model_policy(spec, model, base_url=base_url, timeout=flags.timeout,
                          settings=chosen, events=events or [], config=read_settings())
        record: dict[str, Any] = {"policy": f"model:{model}"}
        if base_url:
            record["base_url"] = shown_url(base_url)
        if flags.timeout is not None:
            record["timeout"] = flags.timeout  # approve and deny reuse it
        record["settings"] = fn.settings()
        return fn, record
    if policy:
        return load_policy(policy), {"policy": policy}
    found = default_policy(spec_ref)
    if found is None:
        raise UsageError(
            f"workflow {spec_ref!r} ships no default policy; give --policy module:attr "
            "or --model NAME"
        )
    return found, {"policy": "default"}


def _first_flag(flags: ModelFlags) -> str:
    if flags.timeout is not None:
        return "--timeout"
    if flags.max_output_tokens is not None:
        return "--max-output-tokens"
    return "--no-force" if flags.no_force else "--server"


def engine_for_run(store: Store, run_id: str, *, policy: str | None = None,
                   model: str | None = None, base_url: str | None = None,
                   flags: ModelFlags | None = None) -> tuple[Engine, dict[str, Any] | None]:
    """An engine for an existing run, with the policy its log records (see
    :func:`fsm.records.policy_record`) unless overridden, and the record of the new policy
    when it is overridden (``None`` otherwise): ``Engine.resume`` logs the change.

    Model flags without ``--model`` change the settings of the model the run is driven
    with.
    """
    from fsm.adapters.recorded import recorded_choice
    from fsm.definition.registry import load_workflow
    from fsm.records import policy_record
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.engine import Engine

    flags = flags or ModelFlags()
    run = store.load_run(run_id)
    events = store.events(run_id)
    ref = workflow_ref(store, run, events)
    spec = load_workflow(ref)
    recorded = recorded_choice(policy_record(events))
    override = policy is not None or model is not None or flags.given()
    settings: Mapping[str, Any] = {}
    if policy is None and model is None:
        if flags.given() and recorded.model is None:
            raise UsageError(f"{_first_flag(flags)} applies to a run driven by a model; run "
                             f"{run_id!r} is driven by {recorded.policy or 'the default policy'}"
                             " (give --model NAME)")
        policy, model, settings = recorded.policy, recorded.model, recorded.settings
        if model is not None:
            base_url = base_url or recorded.base_url
            if flags.timeout is None and recorded.timeout is not None:
                flags = replace(flags, timeout=recorded.timeout)
    try:
        fn, record = make_policy(ref, spec, policy, model, base_url, flags=flags,
                                 settings=settings, events=events)
    except WorkflowNotFound as exc:
        raise UsageError(str(exc)) from None
    engine = Engine(spec, store, fn, clock=read_settings().clock, compactor=Compactor(),
                    retry=retry_of(read_settings()))
    return engine, (record if override else None)


def path_of(store: RunReads, run_id: str, events: list[Event] | None = None) -> list[str]:
    """The states a run went through, in order (from ``events``, when already read)."""
    from fsm.records import state_path

    return state_path(store.events(run_id) if events is None else events)
