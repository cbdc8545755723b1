"""The compiled machine: built once per spec, one permanent model, the same refusals."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from paths import ROOT

from fsm import Guard, TransitionRefused, WorkflowCodeError, WorkflowSpec, define_workflow
from fsm.definition.machine import WorkflowMachine, machine_for


def boom(facts: object, payload: object) -> bool:
    raise KeyError("amount")


SPEC = define_workflow(
    "m", transitions={"a": {"go": "b", "jump": "c"}, "b": {"back": "a", "explode": "c"},
                      "c": {}},
    tools_by_state={}, initial="a",
    guards={"jump": Guard("the payload says yes", lambda f, p: p.get("yes") is True),
            "explode": Guard("never computed", boom)},
)


def refusal(spec: WorkflowSpec, state: str, event: str, payload: dict | None = None) -> str:
    with pytest.raises(TransitionRefused) as info:
        machine_for(spec).fire(state, event, {}, payload or {}, run_id="r")
    assert (info.value.run_id, info.value.state, info.value.event) == ("r", state, event)
    return str(info.value)


def test_one_machine_per_spec_kept_in_its_cache() -> None:
    machine = machine_for(SPEC)
    assert machine is machine_for(SPEC) and SPEC.cache[WorkflowMachine] is machine
    other = define_workflow("m2", transitions={"a": {"go": "b"}, "b": {}},
                            tools_by_state={}, initial="a")
    assert machine_for(other) is not machine


def test_fires_from_whatever_state_it_is_given() -> None:
    machine = machine_for(SPEC)
    assert machine.fire("a", "go", {}, {}) == "b"
    assert machine.fire("b", "back", {}, {}) == "a"
    assert machine.fire("b", "back", {}, {}) == "a"     # the model's last state is irrelevant
    assert machine.fire("a", "jump", {}, {"yes": True}) == "c"
    assert machine.triggers("a") == ["go", "jump"] and machine.triggers("c") == []


def test_refusals_say_why() -> None:
    assert refusal(SPEC, "a", "fly") == "event 'fly' does not exist in workflow 'm'"
    assert refusal(SPEC, "a", "back") == \
        "event 'back' is not allowed in state 'a' (allowed: go, jump)"
    assert refusal(SPEC, "c", "go") == "event 'go' is not allowed in state 'c' (allowed: none)"
    assert refusal(SPEC, "a", "jump", {"yes": False}) == \
        "event 'jump' refused in state 'a': guard not met (the payload says yes)"
    with pytest.raises(WorkflowCodeError) as raised:  # a bug in the guard, not a refusal
        machine_for(SPEC).fire("b", "explode", {}, {})
    assert str(raised.value) == ("event 'explode' in state 'b': its guard (never computed) "
                                 "raised KeyError: 'amount'")
    assert raised.value.where == "the guard of 'explode'"
    assert isinstance(raised.value.__cause__, KeyError)
    # A refusal leaves nothing behind: the next fire starts from the state it is given.
    assert machine_for(SPEC).fire("b", "back", {}, {}) == "a"


def test_threads_share_the_machine() -> None:
    machine = machine_for(SPEC)
    wrong: list[tuple[str, str]] = []

    def work(state: str, event: str, expected: str) -> None:
        for _ in range(300):
            got = machine.fire(state, event, {}, {"yes": True})
            if got != expected:
                wrong.append((state, got))

    threads = [threading.Thread(target=work, args=args)
               for args in [("a", "go", "b"), ("b", "back", "a"), ("a", "jump", "c")]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_the_fire_benchmark_runs() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "fire.py"), "200"],
                          capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    assert "fire, permanent model:" in proc.stdout
    assert "fire, add/remove per event:" in proc.stdout


def test_a_guard_says_why_it_is_not_met_for_this_payload() -> None:
    def why(facts: object, payload: dict) -> str | None:
        return None if payload.get("yes") is True else f"yes is {payload.get('yes')!r}"

    def raises(facts: object, payload: dict) -> str | None:
        raise ValueError("no reason today")

    spec = define_workflow(
        "m3", transitions={"a": {"jump": "c", "hop": "c"}, "c": {}}, tools_by_state={},
        initial="a",
        guards={"jump": Guard("the payload says yes", lambda f, p: p.get("yes") is True,
                              reason=why),
                "hop": Guard("never", lambda f, p: False, reason=raises)})
    assert refusal(spec, "a", "jump", {"yes": 3}) == (
        "event 'jump' refused in state 'a': guard not met (the payload says yes): yes is 3")
    assert refusal(spec, "a", "hop") == (
        "event 'hop' refused in state 'a': guard not met (never): its reason raised "
        "ValueError: no reason today")
    assert machine_for(spec).fire("a", "jump", {}, {"yes": True}) == "c"
