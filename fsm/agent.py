"""The minimal Agent API: the engine with one state, for embedding in a few lines.

``Agent`` is not a second loop: it compiles its tools into a one-state workflow
(``working``, where a final answer finishes the run) and drives it with
:class:`~fsm.runtime.engine.Engine` on an in-memory store.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from fsm.definition.spec import define_workflow
from fsm.definition.tools import ToolContext, ToolSpec
from fsm.errors import InvalidRunState, NothingPending
from fsm.policy import Action, View
from fsm.records import Approval, Budgets, CallAwaitingApproval, RunState, StepCommit
from fsm.records.transcript import read_all
from fsm.runtime.engine import Engine, usable
from fsm.store.memory import MemoryStore

_STATE = "working"


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


class Tool:
    """A tool for :class:`Agent`: ``fn(args: dict, key: str)`` returns a JSON-able result.

    A ``side_effect`` tool waits for :meth:`Agent.decide` before it runs.
    """

    def __init__(self, name: str, fn: Callable[[dict[str, Any], str], Any],
                 side_effect: bool = False) -> None:
        self.name = name
        self.fn = fn
        self.side_effect = side_effect

    def spec(self) -> ToolSpec:
        def call(args: BaseModel, ctx: ToolContext) -> Any:
            return self.fn(args.model_dump(), ctx.key or f"{ctx.run_id}:{ctx.step}")

        return ToolSpec(self.name, call, args=_AnyArgs, write=self.side_effect,
                        approval=self.side_effect)


class Agent:
    """A tool-using agent with checkpoints and human approval of side effects."""

    def __init__(self, policy: Callable[[list[dict[str, Any]]], dict[str, Any]],
                 tools: Sequence[Tool], max_steps: int = 8, run_id: str = "run-1") -> None:
        self.run_id = run_id
        self.max_steps = max_steps
        self._policy = policy
        spec = define_workflow(
            "agent", transitions={_STATE: {}}, tools_by_state={_STATE: [t.name for t in tools]},
            initial=_STATE, tools=[t.spec() for t in tools], terminal=set(),
            finish_states={_STATE}, approval_ttl_seconds=math.inf,
        )
        self._store = MemoryStore()
        # The Agent's contract: results enter the history whole, approvals never expire.
        self._engine = Engine(spec, self._store, self._ask, budgets=Budgets(max_steps=max_steps),
                              result_cap=sys.maxsize, max_repeats=None, plain_errors=True)

    def _ask(self, view: View) -> Action:
        reply = self._policy(copy.deepcopy(view.messages))
        if not isinstance(reply, dict):
            return usable(reply)  # unusable: becomes an observation, like any bad output
        if "final" in reply:
            return usable({"final": str(reply["final"])})
        return usable({"tool": reply.get("tool"), "args": reply.get("args") or {}})

    def _run(self) -> RunState | None:
        runs = self._store.list_runs()
        return runs[0] if runs else None

    @property
    def state(self) -> dict[str, Any]:
        run = self._run()
        if run is None:
            return {"run_id": self.run_id, "history": [], "steps": 0, "status": "idle",
                    "pending": None, "answer": None}
        pending = None
        if run.pending is not None:
            pending = {"tool": run.pending.tool, "args": run.pending.args,
                       "key": getattr(run.pending, "key", None)}
        return {"run_id": self.run_id,
                "history": self._store.messages(self.run_id, 0, run.message_count),
                "steps": run.used.steps, "status": run.status, "pending": pending,
                "answer": run.answer}

    def start(self, goal: str) -> str:
        if self._run() is not None:
            raise InvalidRunState(f"agent {self.run_id!r} has already started",
                                  run_id=self.run_id)
        self._engine.start(goal, run_id=self.run_id, budgets=Budgets(max_steps=self.max_steps))
        return self.state["status"]

    def run(self) -> str:
        if self._run() is None:
            raise InvalidRunState(f"agent {self.run_id!r} has not started", run_id=self.run_id)
        return self._engine.resume(self.run_id).status

    def decide(self, approved: bool, note: str = "") -> str:
        run = self._run()
        if run is None or run.status != "awaiting_approval":
            raise NothingPending(f"agent {self.run_id!r} is not awaiting approval",
                                 run_id=self.run_id)
        return self._engine.decide(self.run_id, approved, "human", note).status

    def checkpoint(self) -> str:
        return json.dumps(self.state, sort_keys=True)

    @classmethod
    def resume(cls, blob: str, policy: Callable[[list[dict[str, Any]]], dict[str, Any]],
               tools: Sequence[Tool], max_steps: int = 8) -> Agent:
        """Rebuild an agent from :meth:`checkpoint`; its checkpoint equals ``blob``."""
        data = json.loads(blob)
        agent = cls(policy, tools, max_steps=max_steps, run_id=data["run_id"])
        if data["status"] == "idle":
            return agent
        engine = agent._engine
        run = RunState(
            run_id=agent.run_id, workflow=engine.spec.name,
            definition_hash=engine.spec.definition_hash, status=data["status"], state=_STATE,
            step=data["steps"], budgets=Budgets(max_steps=max_steps), answer=data["answer"],
        )
        run.used.steps = data["steps"]
        commit = StepCommit(run=run, expected_version=0, messages=read_all(data["history"]))
        p = data["pending"]
        if p is not None:
            approval_id = f"{agent.run_id}:resumed"
            pending = CallAwaitingApproval(tool=p["tool"], args=p["args"], key=p["key"],
                                           step=data["steps"], approval_id=approval_id)
            run.pending = pending
            approval = Approval.request(pending, run_id=agent.run_id, run_version=1,
                                        now=engine.clock(), ttl=engine.spec.approval_ttl_seconds)
            commit.new_approval = approval.model_copy(update={"approval_id": approval_id})
        run.message_count = len(data["history"])
        agent._store.create_run(run, commit)
        return agent
