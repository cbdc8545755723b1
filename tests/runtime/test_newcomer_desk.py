"""The newcomer's desk (tests/support/newcomer_desk.py): every way its first draft failed
now ends where a person can act. A charge is paid once or handed over, never left to run
out of steps; a policy that returns ``None`` fails at once, naming it; a supervisor's
state that would ask about nothing is refused when the workflow is defined."""

from __future__ import annotations

import pytest
from newcomer_desk import Gateway, build, clerk, silent

from fsm import Engine, MemoryStore, RunState, WorkflowDefinitionError
from fsm.errors import Unavailable
from fsm.records import verify_chain
from fsm.store.sqlite import SQLiteStore

#: Enough resumes for the engine's retries to run out; a bound on a failing test only.
RESUMES = 20


def released(engine: Engine, store: object) -> RunState:
    """A $270 charge, released by a supervisor and confirmed by the customer: the run is
    about to charge the card (or has)."""
    run = engine.start("please charge my order", user="nia")
    assert (run.status, run.state) == ("awaiting_approval", "supervising")
    assert run.pending is not None and run.pending.args == {"order_id": "N-1001",
                                                            "cents": 27_000}
    run = engine.decide(run.run_id, True, "sam", "the customer asked for it")
    assert (run.status, run.state) == ("awaiting_customer", "confirming")
    return run


def settle(engine: Engine, store: SQLiteStore | MemoryStore, run: RunState) -> RunState:
    """Give the customer's yes, then resume as a worker would until the run stops
    running (each transient error is raised once, as ``Unavailable``)."""
    try:
        run = engine.reply(run.run_id, "yes")
    except Unavailable:
        pass
    for _ in range(RESUMES):
        run = store.load_run(run.run_id)
        if run.status != "running":
            return run
        try:
            engine.resume(run.run_id)
        except Unavailable:
            continue
    return store.load_run(run.run_id)


@pytest.mark.parametrize("error", [TimeoutError, ConnectionResetError, Unavailable])
def test_a_transient_error_of_the_confirmed_charge_retries_it_and_it_is_paid_once(
        tmp_path: object, error: type[Exception]) -> None:
    gateway = Gateway(fail=1, error=error)
    store = SQLiteStore(str(tmp_path) + "/desk.db")  # type: ignore[operator]
    try:
        engine = Engine(build(gateway), store, clerk)
        run = settle(engine, store, released(engine, store))
        events = store.events(run.run_id)
    finally:
        store.close()
    assert (run.status, run.state) == ("done", "done"), run.reason
    assert [c["cents"] for c in gateway.charges.values()] == [27_000]
    assert gateway.calls == 2  # the same confirmed call, tried again with its key
    tools = [e for e in events if e.kind == "tool" and e.tool == "charge_card"]
    assert len(tools) == 1 and tools[0].detail.get("confirmed", {}).get("reply") == 1
    assert not any(e.kind == "refusal" for e in events)
    verify_chain(events)  # raises on a broken chain


def test_a_gateway_that_stays_down_hands_the_run_over_never_out_of_steps() -> None:
    gateway = Gateway(fail=1_000, error=TimeoutError)
    store = MemoryStore()
    engine = Engine(build(gateway), store, clerk)
    run = settle(engine, store, released(engine, store))
    assert run.status == "handed_over", run.reason
    assert "tries in a row" in (run.reason or "") and "TimeoutError" in (run.reason or "")
    assert gateway.charges == {}


def test_a_charge_that_is_not_retry_safe_is_handed_over_in_doubt() -> None:
    gateway = Gateway(fail=1, error=ConnectionResetError)
    store = MemoryStore()
    engine = Engine(build(gateway, retry_safe=False), store, clerk)
    run = settle(engine, store, released(engine, store))
    assert run.status == "handed_over" and (run.reason or "").startswith("in doubt: charge_card")
    assert gateway.calls == 1 and gateway.charges == {}


def test_a_confirmed_charge_that_failed_for_good_hands_the_run_over() -> None:
    """The yes was spent on a call that failed; from ``charging`` no new yes can be asked,
    so the model's second try is refused and the run goes to a person at once."""
    gateway = Gateway(fail=1, error=RuntimeError)  # the gateway's own bug: no retry
    store = MemoryStore()
    engine = Engine(build(gateway), store, clerk)
    run = settle(engine, store, released(engine, store))
    assert run.status == "handed_over", run.reason
    assert "needs the customer's yes to this call, and none can be asked from state " \
           "'charging'" in (run.reason or "")
    assert run.step < 10 and gateway.charges == {}
    refusals = [e for e in store.events(run.run_id) if e.kind == "refusal"]
    assert len(refusals) == 1 and "has not confirmed this call" in (refusals[0].reason or "")


def test_a_policy_that_returns_none_fails_at_once_naming_none() -> None:
    store = MemoryStore()
    run = Engine(build(), store, silent).start("please charge my order", user="nia")
    assert run.status == "failed" and run.step == 3
    assert run.reason is not None and "the same unusable output 3 times in a row" in run.reason
    assert "(the policy returned None)" in run.reason
    told = [m for m in store.messages(run.run_id) if m.get("runtime")]
    assert len(told) == 3 and all("the policy returned None" in m["content"] for m in told)


def test_different_unusable_outputs_are_each_an_observation() -> None:
    outputs = iter([None, 42, None, "charge it", None])

    def wobbly(view: object) -> object:
        return next(outputs, None) if view.step <= 5 else clerk(view)  # type: ignore[attr-defined]

    store = MemoryStore()
    run = Engine(build(), store, wobbly).start("please charge my order", user="nia")
    assert run.status == "awaiting_approval" and run.state == "supervising"


def test_a_supervisor_state_entered_by_an_event_that_records_nothing_is_refused() -> None:
    """The first draft: ``escalate`` records nothing, so the supervisor would be asked to
    release ``{}``, which no release limit can read."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        build(record_escalation=False)
    message = str(caught.value)
    assert "state 'supervising' would be asked about nothing" in message
    assert "event 'escalate' records no payload" in message
