"""Definition checks: every mistake in the tables, all reported in one error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fsm import FSMError, Guard, ToolSpec, WorkflowDefinitionError, define_workflow


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
            "work": {"finish": "done", "give_up": "handed_over"},
        },
        "tools_by_state": {"start": ["lookup"], "work": ["lookup", "write"]},
        "initial": "start",
        "tools": [tool("lookup"), tool("write", write=True)],
    }
    return {**base, **changes}


def problems(**changes: Any) -> list[str]:
    with pytest.raises(WorkflowDefinitionError) as info:
        define_workflow("w", **table(**changes))
    assert info.value.workflow == "w"
    return info.value.problems


def test_the_base_table_is_valid() -> None:
    spec = define_workflow("w", **table())
    assert spec.states == ("start", "work", "done", "handed_over")
    assert spec.terminal == {"done", "handed_over"}


def test_several_mistakes_give_one_error_naming_all_of_them() -> None:
    with pytest.raises(WorkflowDefinitionError) as info:
        define_workflow(
            "messy",
            transitions={
                "a": {"go": "b", "lookup": "c"},
                "b": {"back": "a"},
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
        "terminal states not in TRANSITIONS: 'zzz'",
        "non-terminal states with no way out: 'stuck'",
        "states unreachable from 'a': 'island', 'loop1', 'loop2', 'stuck'",
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


CHECKS = [
    pytest.param({"initial": "begin"}, ["initial state 'begin' is not in TRANSITIONS"],
                 id="unknown-initial-state"),
    pytest.param({"terminal": {"done", "finished"}},
                 ["terminal states not in TRANSITIONS: 'finished'",
                  "non-terminal states with no way out: 'handed_over'",
                  "these states cannot reach a terminal state: 'handed_over'"],
                 id="unknown-terminal-state"),
    pytest.param({"finish_states": {"wrok"}},
                 ["finish_states names states not in TRANSITIONS: 'wrok'"],
                 id="unknown-finish-state"),
    pytest.param({"instructions": {"strat": "begin here"}},
                 ["instructions names states not in TRANSITIONS: 'strat'"],
                 id="instructions-for-unknown-state"),
    pytest.param({"transitions": {"start": {"go": "work"}, "work": {"finish": "done"},
                                  "orphan": {"finish_too": "done"}}},
                 ["states unreachable from 'start': 'orphan'"],
                 id="unreachable-state"),
    pytest.param({"transitions": {"start": {"go": "work", "sidestep": "limbo"},
                                  "work": {"finish": "done"}, "limbo": {}},
                  "terminal": {"done"}},
                 ["non-terminal states with no way out: 'limbo'",
                  "these states cannot reach a terminal state: 'limbo'"],
                 id="dead-end"),
    pytest.param({"transitions": {"start": {"go": "work", "detour": "ping"},
                                  "work": {"finish": "done"}, "ping": {"p": "pong"},
                                  "pong": {"q": "ping"}}},
                 ["these states cannot reach a terminal state: 'ping', 'pong'"],
                 id="no-path-to-terminal"),
    pytest.param({"transitions": {"start": {"go": "done"}, "done": {"again": "start"}},
                  "terminal": {"done"}, "tools_by_state": {}},
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
    pytest.param({"human_events": {"give_up", "approve"}},
                 ["human-only events for events that do not exist: 'approve'"],
                 id="human-event-missing"),
    pytest.param({"human_events": {"give_up"}, "expiry_event": "finish"},
                 ["expiry event 'finish' must be one of the human-only events"],
                 id="expiry-event-not-human"),
    pytest.param({"transitions": {"start": {"lookup": "work"}, "work": {"finish": "done"}}},
                 ["event names collide with tool names: 'lookup'"],
                 id="event-tool-name-collision"),
    pytest.param({"transitions": {"start": {"advance": "work"}, "work": {"finish": "done"}}},
                 ["event names collide with tool names: 'advance'"],
                 id="event-named-advance"),
    pytest.param({"tools": [tool("lookup"), tool("write"), tool("advance")]},
                 ["event names collide with tool names: 'advance'"],
                 id="tool-named-advance"),
    pytest.param({"tools": [tool("lookup", emits=lambda r: "teleported",
                                 emits_events=("teleported",)), tool("write")]},
                 ["tools emit events that do not exist: 'lookup → teleported'"],
                 id="tool-emits-missing-event"),
    pytest.param({"tools": [tool("lookup"), tool("lookup"), tool("write")]},
                 ["tools registered twice: 'lookup'"],
                 id="tool-registered-twice"),
    pytest.param({"transitions": {"start": {"go": 7}}},
                 ["transitions.start.go: Input should be a valid string"],
                 id="table-of-the-wrong-shape"),
]


@pytest.mark.parametrize("changes, expected", CHECKS)
def test_each_check(changes: dict[str, Any], expected: list[str]) -> None:
    assert problems(**changes) == expected
