"""Definition checks: every mistake in the tables, all reported in one error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fsm import FSMError, Guard, ToolSpec, WorkflowDefinitionError, define_workflow, guard
from fsm.auditor.verify import OnlyThrough, ToolOnlyAfter, ToolOnlyIn


class Payload(BaseModel):
    amount: int


def tool(name: str, **options: Any) -> ToolSpec:
    return ToolSpec(name, lambda args, ctx: None, **options)


def always(facts: Any, payload: Any) -> bool:
    return True


def table(**changes: Any) -> dict[str, Any]:
    """A valid workflow, with ``changes`` applied."""
    base: dict[str, Any] = {
        "transitions": {
            "start": {"go": "work"},
            "work": {"finish": "done", "ask": "review", "give_up": "handed_over"},
            "review": {"approved": "work", "declined": "handed_over"},
        },
        "tools_by_state": {"start": ["lookup"], "work": ["lookup", "write"]},
        "initial": "start",
        "terminal": {"done"},
        "handed_over_states": {"handed_over"},
        "human_events": {"approved", "declined"},
        "tools": [tool("lookup"), tool("write", write=True)],
    }
    return {**base, **changes}


def only(transitions: dict[str, dict[str, str]], **changes: Any) -> dict[str, Any]:
    """Changes that replace the tables with ``transitions``: no review, no hand-over."""
    return {"transitions": transitions, "human_events": set(), "handed_over_states": set(),
            **changes}


def problems(**changes: Any) -> list[str]:
    with pytest.raises(WorkflowDefinitionError) as info:
        define_workflow("w", **table(**changes))
    assert info.value.workflow == "w"
    return info.value.problems


def test_the_base_table_is_valid() -> None:
    spec = define_workflow("w", **table())
    assert spec.states == ("start", "work", "review", "done", "handed_over")
    assert spec.terminal == {"done", "handed_over"}
    assert spec.handed_over_states == {"handed_over"}
    assert spec.waits_for_person("review") and not spec.waits_for_person("work")


def test_several_mistakes_give_one_error_naming_all_of_them() -> None:
    with pytest.raises(WorkflowDefinitionError) as info:
        define_workflow(
            "messy",
            transitions={
                "a": {"go": "b", "lookup": "c"},
                "b": {"back": "a", "finish": "cc"},
                "c": {},
                "island": {"swim": "c"},
                "loop1": {"spin": "loop2"},
                "loop2": {"spin_back": "loop1"},
                "stuck": {},
            },
            tools_by_state={"a": ["lookup", "missing_tool"], "nowhere": ["lookup"]},
            initial="a", tools=[tool("lookup")], terminal={"c", "zzz"},
            guards={"fly": Guard("never", always)}, payloads={"jump": Payload},
            human_events={"ghost"},
        )
    err = info.value
    assert isinstance(err, FSMError)
    assert err.problems == [
        "transition target 'cc' (b --finish-->) is not a declared state; did you mean 'c'? "
        f"{DECLARE}",
        "non-terminal states with no way out: 'stuck' (list them in terminal= if runs end "
        "there)",
        "states unreachable from 'a': 'island', 'loop1', 'loop2', 'stuck', 'zzz'",
        "these states cannot reach a terminal state: 'loop1', 'loop2', 'stuck'",
        "tools named in TOOLS_BY_STATE but not registered: 'missing_tool' "
        "(registered: 'lookup')",
        "states in TOOLS_BY_STATE that are not in the machine: 'nowhere'",
        "guards for events that do not exist: 'fly'",
        "payload models for events that do not exist: 'jump'",
        "human-only events for events that do not exist: 'ghost'",
        "event names collide with tool names: 'lookup'",
    ]
    message = str(err)
    assert message.startswith("workflow 'messy' has 10 definition problem(s):\n")
    assert all(f"  - {p}" in message for p in err.problems)


DECLARE = "(declare end states with terminal= or handed_over_states=)"
PERSONS = "(human-only events: 'approved', 'declined')"

CHECKS = [
    pytest.param({"initial": "begin"}, ["initial state 'begin' is not in TRANSITIONS"],
                 id="unknown-initial-state"),
    pytest.param({"transitions": {**table()["transitions"],
                                  "work": {"finish": "dnoe", "ask": "review",
                                           "give_up": "handed_over"}}},
                 ["transition target 'dnoe' (work --finish-->) is not a declared state; "
                  f"did you mean 'done'? {DECLARE}",
                  "states unreachable from 'start': 'done'"],
                 id="typo-in-a-target"),
    pytest.param({"terminal": None, "handed_over_states": set()},
                 [f"transition target 'done' (work --finish-->) is not a declared state {DECLARE}",
                  "transition target 'handed_over' (work --give_up-->, review --declined-->) "
                  f"is not a declared state {DECLARE}"],
                 id="end-states-not-declared"),
    pytest.param({"terminal": {"done", "finished"}},
                 ["states unreachable from 'start': 'finished'"],
                 id="terminal-state-never-reached"),
    pytest.param({"finish_states": {"wrok"}},
                 ["finish_states names states not in TRANSITIONS: 'wrok'"],
                 id="unknown-finish-state"),
    pytest.param({"instructions": {"strat": "begin here"}},
                 ["instructions names states not in TRANSITIONS: 'strat'"],
                 id="instructions-for-unknown-state"),
    pytest.param(only({"start": {"go": "work"}, "work": {"finish": "done"},
                       "orphan": {"finish_too": "done"}}),
                 ["states unreachable from 'start': 'orphan'"],
                 id="unreachable-state"),
    pytest.param(only({"start": {"go": "work", "sidestep": "limbo"},
                       "work": {"finish": "done"}, "limbo": {}}),
                 ["non-terminal states with no way out: 'limbo' "
                  "(list them in terminal= if runs end there)",
                  "these states cannot reach a terminal state: 'limbo'"],
                 id="dead-end"),
    pytest.param(only({"start": {"go": "work", "sidestep": "limbo"},
                       "work": {"finish": "done"}, "limbo": {}, "done": {}}, terminal=None),
                 [], id="a-state-written-with-no-events-is-terminal"),
    pytest.param(only({"start": {"go": "work", "detour": "ping"},
                       "work": {"finish": "done"}, "ping": {"p": "pong"},
                       "pong": {"q": "ping"}}),
                 ["these states cannot reach a terminal state: 'ping', 'pong'"],
                 id="no-path-to-terminal"),
    pytest.param(only({"start": {"go": "done"}, "done": {"again": "start"}},
                      tools_by_state={}),
                 ["terminal states with outgoing events: 'done'"],
                 id="terminal-state-with-exits"),
    pytest.param({"tools_by_state": {"start": ["lookup", "fetch", "pay"]}},
                 ["tools named in TOOLS_BY_STATE but not registered: 'fetch', 'pay' "
                  "(registered: 'lookup', 'write')"],
                 id="unregistered-tools"),
    pytest.param({"tools_by_state": {"start": ["lookup"], "paying": ["write"],
                                     "closing": []}},
                 ["states in TOOLS_BY_STATE that are not in the machine: 'closing', 'paying'"],
                 id="tools-for-state-not-in-machine"),
    pytest.param({"guards": {"go": Guard("ok", always), "fly": Guard("no", always)}},
                 ["guards for events that do not exist: 'fly'"],
                 id="guard-for-missing-event"),
    pytest.param({"payloads": {"finish": Payload, "jump": Payload, "hop": Payload}},
                 ["payload models for events that do not exist: 'hop', 'jump'"],
                 id="payload-for-missing-event"),
    pytest.param({"records": {"leap": "leap_payload"}},
                 ["records for events that do not exist: 'leap'"],
                 id="record-for-missing-event"),
    pytest.param({"human_events": {"approved", "declined", "approve"}},
                 ["human-only events for events that do not exist: 'approve'"],
                 id="human-event-missing"),
    pytest.param({"expiry_event": "finish"},
                 ["expiry event 'finish' must be one of the human-only events"],
                 id="expiry-event-not-human"),
    pytest.param({"approve_event": "approve"},
                 [f"approve_event 'approve' is not a human-only event of this workflow {PERSONS}"],
                 id="approve-event-not-human"),
    pytest.param({"deny_event": "denied"},
                 [f"deny_event 'denied' is not a human-only event of this workflow {PERSONS}"],
                 id="deny-event-not-human"),
    pytest.param({"deny_event": "approved"},
                 ["approve_event and deny_event are both 'approved'"],
                 id="approve-and-deny-the-same"),
    pytest.param(only({"start": {"go": "done"}}, approve_event="yes", deny_event="no",
                      tools_by_state={}),
                 [], id="approve-and-deny-unchecked-when-nothing-waits-for-a-person"),
    pytest.param({"human_events": {"approved", "declined", "give_up"}},
                 ["state 'work' has human-only events ('give_up') and events the model or a "
                  "tool fires ('ask', 'finish'): the run never pauses there, so no person can "
                  "fire them; make every way out of 'work' human, or none"],
                 id="waiting-state-the-model-may-leave"),
    pytest.param({"finish_states": {"review"}},
                 ["state 'review' waits for a person ('approved', 'declined') but is a finish "
                  "state, where the model's final answer ends the run"],
                 id="waiting-state-that-is-a-finish-state"),
    pytest.param({"tools_by_state": {"start": ["lookup"], "review": ["lookup"]}},
                 ["state 'review' waits for a person, so its tools can never be called: "
                  "'lookup'"],
                 id="tools-in-a-waiting-state"),
    pytest.param({"guards": {"go": guard("the order was fetched")}},
                 ["guard of event 'go' is a function, not a Guard (write Guard(description, "
                  "fn) or decorate fn with @guard(description))"],
                 id="guard-decorator-not-applied"),
    pytest.param({"guards": {"go": Guard("the order was fetched", None)}},  # type: ignore
                 ["guard of event 'go' (the order was fetched) has no function "
                  "(give fn(facts, payload) -> bool)"],
                 id="guard-without-a-function"),
    pytest.param({"invariants": ToolOnlyIn("write", "work")},
                 ["invariants must be a list or tuple, got a single ToolOnlyIn: "
                  "write invariants=(...,)"],
                 id="invariants-given-as-one-object"),
    pytest.param({"invariants": {ToolOnlyIn("write", "work")}},
                 ["invariants must be a list or tuple, got a set: write invariants=(...,)"],
                 id="invariants-given-as-a-set"),
    pytest.param({"invariants": [ToolOnlyIn("wirte", "wokr"), OnlyThrough("work", "og"),
                                 ToolOnlyAfter("write", "approved", unless="small"),
                                 "write runs only in work"]},
                 ["ToolOnlyIn: unknown tool 'wirte' (known tools: lookup, write)",
                  "ToolOnlyIn: unknown state 'wokr' (known states: done, handed_over, review, "
                  "start, work)",
                  "OnlyThrough: unknown event 'og' (known events: approved, ask, declined, "
                  "finish, give_up, go)",
                  "ToolOnlyAfter: unknown fact 'small' (known facts: none)",
                  "invariants[3] is a str, not an invariant (use the classes of "
                  "fsm.auditor.verify)"],
                 id="invariants-naming-what-the-workflow-lacks"),
    pytest.param({"invariants": [ToolOnlyAfter("write", "approved", unless="small")],
                  "guards": {"ask": Guard("big", always, establishes=("large",))}},
                 ["ToolOnlyAfter: unknown fact 'small' (known facts: large)"],
                 id="invariant-fact-no-guard-establishes"),
    pytest.param(only({"start": {"lookup": "work"}, "work": {"finish": "done"}}),
                 ["event names collide with tool names: 'lookup'"],
                 id="event-tool-name-collision"),
    pytest.param(only({"start": {"advance": "work"}, "work": {"finish": "done"}}),
                 ["event names collide with tool names: 'advance'"],
                 id="event-named-advance"),
    pytest.param({"tools": [tool("lookup"), tool("write"), tool("advance")]},
                 ["event names collide with tool names: 'advance'"],
                 id="tool-named-advance"),
    pytest.param({"tools": [tool("lookup", emits=lambda r: "teleported",
                                 emits_events=("teleported",)), tool("write")]},
                 ["tools emit events that do not exist: 'lookup → teleported'"],
                 id="tool-emits-missing-event"),
    pytest.param({"tools": [tool("lookup", emits=lambda r: "teleported"), tool("write")]},
                 ["tools with emits name no emits_events (every event emits may return): "
                  "'lookup'"],
                 id="tool-emits-undeclared"),
    pytest.param({"tools": [tool("lookup"), tool("lookup"), tool("write")]},
                 ["tools registered twice: 'lookup'"],
                 id="tool-registered-twice"),
    pytest.param({"transitions": {"start": {"go": 7}}},
                 ["transitions.start.go: Input should be a valid string"],
                 id="table-of-the-wrong-shape"),
]


@pytest.mark.parametrize("changes, expected", CHECKS)
def test_each_check(changes: dict[str, Any], expected: list[str]) -> None:
    if not expected:
        define_workflow("w", **table(**changes))
        return
    assert problems(**changes) == expected
