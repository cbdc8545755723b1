"""The minimal Agent API, exactly as issue 2 describes it.

Explicit tests check each clause. A reference implementation, written line by
line from the issue's text, is then run side by side with ``fsm.Agent`` under
hypothesis-generated policies, decisions and resumes: their checkpoints must be
equal after every operation.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm import Agent, Tool

# -- the contract, clause by clause ------------------------------------------------------


class Script:
    """A policy replaying replies; records the histories it was shown."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    def __call__(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        self.seen.append(history)
        return self.replies[len(self.seen) - 1]


def make_tools(log: list[tuple[str, Any, str]]) -> list[Tool]:
    def lookup(args: dict[str, Any], key: str) -> Any:
        log.append(("lookup", args, key))
        return {"found": args.get("q")}

    def boom(args: dict[str, Any], key: str) -> Any:
        log.append(("boom", args, key))
        raise ValueError("no such thing")

    def send(args: dict[str, Any], key: str) -> Any:
        log.append(("send", args, key))
        return {"sent": args.get("to"), "key": key}

    return [Tool("lookup", lookup), Tool("boom", boom), Tool("send", send, side_effect=True)]


def test_idle_state_shape() -> None:
    agent = Agent(Script(), make_tools([]))

    assert agent.state == {"run_id": "run-1", "history": [], "steps": 0, "status": "idle",
                           "pending": None, "answer": None}
    assert agent.checkpoint() == json.dumps(agent.state, sort_keys=True)


def test_start_runs_tools_until_a_final_answer() -> None:
    log: list[tuple[str, Any, str]] = []
    policy = Script({"tool": "lookup", "args": {"q": "kettle"}}, {"tool": "lookup"},
                    {"tool": "boom", "args": {}}, {"tool": "nope", "args": {"a": 1}},
                    {"final": "found it"})
    agent = Agent(policy, make_tools(log), run_id="r7")

    assert agent.start("find the kettle") == "done"
    assert agent.state == {
        "run_id": "r7", "steps": 5, "status": "done", "pending": None, "answer": "found it",
        "history": [
            {"role": "user", "content": "find the kettle"},
            {"role": "assistant", "tool": "lookup", "args": {"q": "kettle"}},
            {"role": "tool", "tool": "lookup", "result": {"found": "kettle"}},
            {"role": "assistant", "tool": "lookup", "args": {}},
            {"role": "tool", "tool": "lookup", "result": {"found": None}},
            {"role": "assistant", "tool": "boom", "args": {}},
            {"role": "tool", "tool": "boom", "error": "ValueError: no such thing"},
            {"role": "assistant", "tool": "nope", "args": {"a": 1}},
            {"role": "tool", "tool": "nope", "error": "unknown tool nope"},
            {"role": "assistant", "final": "found it"},
        ],
    }
    assert log == [("lookup", {"q": "kettle"}, "r7:1"), ("lookup", {}, "r7:2"),
                   ("boom", {}, "r7:3")]
    # The policy saw the history before its own reply, as a copy.
    assert [len(h) for h in policy.seen] == [1, 3, 5, 7, 9]
    policy.seen[0].append({"role": "user", "content": "injected"})
    assert agent.state["history"][1]["role"] == "assistant"


def test_start_raises_unless_idle() -> None:
    agent = Agent(Script({"final": "ok"}), [])
    agent.start("go")

    with pytest.raises(RuntimeError):
        agent.start("again")
    assert len(agent.state["history"]) == 2


def test_budget_is_checked_before_each_policy_call() -> None:
    policy = Script(*[{"tool": "lookup", "args": {"q": i}} for i in range(5)])
    agent = Agent(policy, make_tools([]), max_steps=3)

    assert agent.start("loop") == "budget_exhausted"
    assert agent.state["steps"] == 3 and len(policy.seen) == 3
    assert agent.state["answer"] is None

    zero = Agent(Script(), [], max_steps=0)
    assert zero.start("nothing") == "budget_exhausted"
    assert zero.state["history"] == [{"role": "user", "content": "nothing"}]


def test_side_effect_pauses_with_the_pending_call() -> None:
    log: list[tuple[str, Any, str]] = []
    agent = Agent(Script({"tool": "lookup", "args": {"q": 1}},
                         {"tool": "send", "args": {"to": "ravi"}}), make_tools(log))

    assert agent.start("tell ravi") == "awaiting_approval"
    assert agent.state["pending"] == {"tool": "send", "args": {"to": "ravi"}, "key": "run-1:2"}
    assert agent.state["history"][-1] == {"role": "assistant", "tool": "send",
                                          "args": {"to": "ravi"}}
    assert [name for name, _, _ in log] == ["lookup"]


def _paused(log: list[tuple[str, Any, str]], *after: dict[str, Any],
            max_steps: int = 8) -> Agent:
    policy = Script({"tool": "send", "args": {"to": "ravi"}}, *after)
    agent = Agent(policy, make_tools(log), max_steps=max_steps)
    assert agent.start("tell ravi") == "awaiting_approval"
    return agent


def test_checkpoint_resume_in_a_fresh_object_then_approve() -> None:
    first: list[tuple[str, Any, str]] = []
    blob = _paused(first).checkpoint()
    assert blob == json.dumps(json.loads(blob), sort_keys=True)

    log: list[tuple[str, Any, str]] = []
    policy = Script({"final": "told him"})
    agent = Agent.resume(blob, policy, make_tools(log))
    assert agent.checkpoint() == blob

    assert agent.decide(True) == "done"
    assert log == [("send", {"to": "ravi"}, "run-1:1")] and first == []
    state = agent.state
    assert state["history"][-2:] == [
        {"role": "tool", "tool": "send", "result": {"sent": "ravi", "key": "run-1:1"}},
        {"role": "assistant", "final": "told him"},
    ]
    assert (state["steps"], state["status"], state["pending"], state["answer"]) == \
        (2, "done", None, "told him")

    with pytest.raises(RuntimeError):
        agent.decide(True)
    assert len(log) == 1


def test_denial_is_reported_to_the_policy() -> None:
    log: list[tuple[str, Any, str]] = []
    agent = _paused(log, {"final": "could not tell him"})

    assert agent.decide(False, note="not today") == "done"
    assert log == []
    assert agent.state["history"][-2:] == [
        {"role": "tool", "tool": "send", "error": "denied by human: not today"},
        {"role": "assistant", "final": "could not tell him"},
    ]
    with pytest.raises(RuntimeError):
        agent.decide(False)


def test_decide_raises_unless_awaiting_approval() -> None:
    agent = Agent(Script({"final": "ok"}), [])
    with pytest.raises(RuntimeError):
        agent.decide(True)
    agent.start("go")
    with pytest.raises(RuntimeError):
        agent.decide(True)


def test_budget_holds_across_resume_with_a_new_max_steps() -> None:
    log: list[tuple[str, Any, str]] = []
    paused = _paused(log, max_steps=8)
    paused_state = paused.state
    assert paused_state["steps"] == 1

    more = Script(*[{"tool": "lookup", "args": {"q": i}} for i in range(10)])
    agent = Agent.resume(paused.checkpoint(), more, make_tools(log), max_steps=3)
    assert agent.decide(True) == "budget_exhausted"
    assert agent.state["steps"] == 3 and len(more.seen) == 2
    assert [name for name, _, _ in log] == ["send", "lookup", "lookup"]
    assert [k for _, _, k in log] == ["run-1:1", "run-1:2", "run-1:3"]


def test_a_pending_call_waits_for_decide_however_long_it_takes() -> None:
    log: list[tuple[str, Any, str]] = []
    agent = _paused(log, {"final": "told him"})
    later = time.time() + 365 * 86_400
    agent._engine.clock = lambda: later

    assert agent.run() == "awaiting_approval"
    assert agent.decide(True) == "done"
    assert log == [("send", {"to": "ravi"}, "run-1:1")]


def test_resume_a_finished_agent_keeps_its_state() -> None:
    agent = Agent(Script({"final": "ok"}), [], run_id="x")
    agent.start("go")
    again = Agent.resume(agent.checkpoint(), Script(), [])

    assert again.checkpoint() == agent.checkpoint()
    assert again.run() == "done"
    with pytest.raises(RuntimeError):
        again.start("go")


# -- side by side with a reference written from the issue ------------------------------


class Reference:
    """The issue's Agent paragraph, transcribed."""

    def __init__(self, policy: Callable[..., Any], tools: list[Tool], max_steps: int = 8,
                 run_id: str = "run-1") -> None:
        self.policy = policy
        self.tools = {t.name: t for t in tools}
        self.max_steps = max_steps
        self.state: dict[str, Any] = {"run_id": run_id, "history": [], "steps": 0,
                                      "status": "idle", "pending": None, "answer": None}

    def start(self, goal: str) -> str:
        if self.state["status"] != "idle":
            raise RuntimeError("not idle")
        self.state["history"].append({"role": "user", "content": goal})
        self.state["status"] = "running"
        return self.run()

    def run(self) -> str:
        s = self.state
        while s["status"] == "running":
            if s["steps"] >= self.max_steps:
                s["status"] = "budget_exhausted"
                break
            reply = self.policy(copy.deepcopy(s["history"]))
            s["steps"] += 1
            if "final" in reply:
                s["answer"] = reply["final"]
                s["status"] = "done"
                s["history"].append({"role": "assistant", "final": reply["final"]})
                break
            name, args = reply["tool"], reply.get("args", {})
            s["history"].append({"role": "assistant", "tool": name, "args": args})
            tool = self.tools.get(name)
            if tool is None:
                s["history"].append({"role": "tool", "tool": name, "error": f"unknown tool {name}"})
                continue
            key = f"{s['run_id']}:{s['steps']}"
            if tool.side_effect:
                s["pending"] = {"tool": name, "args": args, "key": key}
                s["status"] = "awaiting_approval"
                break
            self._call(tool, args, key)
        return str(s["status"])

    def _call(self, tool: Tool, args: dict[str, Any], key: str) -> None:
        try:
            result = tool.fn(args, key)
        except Exception as exc:
            self.state["history"].append(
                {"role": "tool", "tool": tool.name, "error": f"{type(exc).__name__}: {exc}"})
        else:
            self.state["history"].append({"role": "tool", "tool": tool.name, "result": result})

    def decide(self, approved: bool, note: str = "") -> str:
        s = self.state
        if s["status"] != "awaiting_approval":
            raise RuntimeError("nothing pending")
        pending, s["pending"], s["status"] = s["pending"], None, "running"
        if approved:
            self._call(self.tools[pending["tool"]], pending["args"], pending["key"])
        else:
            s["history"].append({"role": "tool", "tool": pending["tool"],
                                 "error": f"denied by human: {note}"})
        return self.run()

    def checkpoint(self) -> str:
        return json.dumps(self.state, sort_keys=True)

    @classmethod
    def resume(cls, blob: str, policy: Callable[..., Any], tools: list[Tool],
               max_steps: int = 8) -> Reference:
        state = json.loads(blob)
        agent = cls(policy, tools, max_steps=max_steps, run_id=state["run_id"])
        agent.state = state
        return agent


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=6,
)
tool_call = st.builds(
    lambda name, args: {"tool": name} if args is None else {"tool": name, "args": args},
    st.sampled_from(["lookup", "boom", "send", "nope", "big"]),
    st.none() | st.dictionaries(st.sampled_from(["q", "to", "n"]), json_values, max_size=2),
)
reply = tool_call | st.builds(lambda t: {"final": t}, st.text(max_size=8))
operation = st.one_of(
    st.tuples(st.just("decide"), st.booleans(), st.text(max_size=6)),
    st.tuples(st.just("resume"), st.integers(0, 12)),
    st.tuples(st.just("run")),
)


def _pair(replies: list[dict[str, Any]]) -> tuple[Callable[..., Any], list[Any], list[Tool]]:
    """A fresh policy (falls back to a final answer), tool log and tools."""
    replies = list(replies)

    def policy(history: list[dict[str, Any]]) -> dict[str, Any]:
        return replies.pop(0) if replies else {"final": "enough"}

    log: list[Any] = []
    tools = make_tools(log) + [Tool("big", lambda args, key: "x" * 9000)]
    return policy, log, tools


def _apply(agent: Any, op: tuple[Any, ...]) -> Any:
    try:
        if op[0] == "decide":
            return agent.decide(op[1], op[2])
        return agent.run()
    except RuntimeError:
        return RuntimeError


@settings(max_examples=150, deadline=None)
@given(replies=st.lists(reply, max_size=10), max_steps=st.integers(0, 9),
       ops=st.lists(operation, max_size=6))
def test_agent_matches_the_reference(replies: list[dict[str, Any]], max_steps: int,
                                     ops: list[tuple[Any, ...]]) -> None:
    mine_policy, mine_log, mine_tools = _pair(replies)
    ref_policy, ref_log, ref_tools = _pair(replies)
    mine: Any = Agent(mine_policy, mine_tools, max_steps=max_steps)
    ref: Any = Reference(ref_policy, ref_tools, max_steps=max_steps)

    assert mine.start("goal") == ref.start("goal")
    assert mine.checkpoint() == ref.checkpoint()
    for op in ops:
        if op[0] == "resume":
            blob = mine.checkpoint()
            mine = Agent.resume(blob, mine_policy, mine_tools, max_steps=op[1])
            ref = Reference.resume(blob, ref_policy, ref_tools, max_steps=op[1])
            assert mine.checkpoint() == blob
            continue
        assert _apply(mine, op) == _apply(ref, op)
        assert mine.checkpoint() == ref.checkpoint()
    assert mine_log == ref_log
