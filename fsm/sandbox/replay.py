"""``fsm replay``: what a policy would have done on a recorded run, run in memory.

The run's store is only read (open it read only). The policy drives a copy of the run in
a :class:`~fsm.runtime.recording.Sandbox`: recorded reads get their recorded results,
other reads "not in the recording" (unless ``live_reads``), writes never run. From step
``from_step`` on the policy acts; before it, the recorded actions are replayed. The
report compares the recorded run and the replay step by step.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import Resources
from fsm.policy import PolicyFn
from fsm.records import RunState
from fsm.runtime.engine import Engine
from fsm.runtime.forking import check_step
from fsm.runtime.recording import RecordedPolicy, Recording, Sandbox, WriteAttempt

__all__ = ["ReplayReport", "StepRow", "replay", "replay_async", "shown_action"]


def shown_action(m: dict[str, Any] | None) -> str:
    """One line for a step's action (an assistant message)."""
    if m is None:
        return "-"
    if "final" in m:
        return f"final: {m['final']}"
    if m.get("tool"):
        return f"{m['tool']} {json.dumps(m.get('args') or {}, ensure_ascii=False, sort_keys=True)}"
    return f"says: {m.get('content', '')}"


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    keys = ("tool", "args", "final", "content")
    return all(a.get(k) == b.get(k) for k in keys)


@dataclass
class StepRow:
    """One step of the recorded run beside the same step of the replay."""

    step: int
    recorded: str
    replayed: str
    #: ``same``, ``different`` (the first is where the paths split), ``after split``.
    verdict: str
    state_recorded: str = ""
    state_replayed: str = ""


@dataclass
class ReplayReport:
    """The comparison ``fsm replay`` prints."""

    run_id: str
    policy: str
    from_step: int
    steps: list[StepRow]
    split: int | None
    recorded: RunState
    replayed: RunState
    writes: list[WriteAttempt] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    not_recorded: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def reproduced(self) -> bool:
        """The replay took the recorded run's every action and ended as it did."""
        return self.split is None and self.recorded.status == self.replayed.status \
            and self.recorded.state == self.replayed.state

    def as_json(self) -> dict[str, Any]:
        def used(run: RunState) -> dict[str, Any]:
            u = run.used
            return {"status": run.status, "state": run.state, "reason": run.reason,
                    "steps": u.steps, "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens, "cost_micros": u.cost_micros}

        return {
            "run_id": self.run_id, "policy": self.policy, "from_step": self.from_step,
            "reproduced": self.reproduced, "split_at": self.split,
            "steps": [vars(r) for r in self.steps],
            "recorded": used(self.recorded), "replayed": used(self.replayed),
            # ``writes``: those the tables and guards let through (none ran);
            # ``write_attempts``: every write the policy tried, with ``allowed``.
            "writes": [w.as_json() for w in self.writes if w.allowed],
            "write_attempts": [w.as_json() for w in self.writes],
            "refused": self.refused, "not_recorded": self.not_recorded,
            "seconds": round(self.seconds, 3),
        }


def _states(store: Any, run_id: str, steps: int) -> list[str]:
    out = []
    for step in range(1, steps + 1):
        view = store.view_record(run_id, step)
        out.append(view.state if view is not None else "")
    return out


def replay(spec: WorkflowSpec, store: Any, run_id: str, policy: PolicyFn, *,
           policy_name: str = "", from_step: int = 0, live_reads: Resources | None = None,
           clock: Any = time.time) -> ReplayReport:
    """Drive ``policy`` against run ``run_id`` of ``store`` in a sandbox (see the
    module's docstring); ``store`` is only read."""
    started = time.perf_counter()
    rec = Recording.of(store, run_id)
    check_step(rec.run, from_step, "replay")
    version = spec.version_for(rec.run.definition_hash) or spec
    box = Sandbox(version, rec, live_reads=live_reads)
    driver = RecordedPolicy(rec, upto=from_step, then=policy) if from_step else policy
    with Engine(box.spec, box.store, driver, budgets=rec.run.budgets, clock=clock,
                resources=box.resources) as engine:
        run = engine.start(rec.goal, user=rec.run.user, run_id=run_id,
                           budgets=rec.run.budgets, meta={"sandbox": True})
        run = box.answer(engine, run)
    mine = box.store.messages(run_id)
    ours = [m for m in mine if m.get("role") == "assistant"]
    theirs = rec.actions()
    rows, split = [], None
    rec_states = _states(store, run_id, len(theirs))
    new_states = _states(box.store, run_id, len(ours))
    for i, (a, b) in enumerate(itertools.zip_longest(theirs, ours)):
        same = _same(a, b)
        if not same and split is None:
            split = i + 1
            verdict = "different"
        else:
            verdict = "same" if split is None else "after split"
        rows.append(StepRow(i + 1, shown_action(a), shown_action(b), verdict,
                            rec_states[i] if i < len(rec_states) else "",
                            new_states[i] if i < len(new_states) else ""))
    writes = list(box.writes)
    refused = []
    for e in box.store.events(run_id):
        if e.kind != "refusal":
            continue
        args = _args_at(ours, e.step, e.tool or "advance")
        refused.append({"step": e.step, "tool": e.tool, "event": e.event, "args": args,
                        "reason": e.reason})
        tool = version.tools.get(e.tool or "")
        if tool is not None and tool.write:
            writes.append(WriteAttempt(e.step, tool.name, args, False, e.reason or ""))
    box.store.close()
    return ReplayReport(
        run_id=run_id, policy=policy_name, from_step=from_step, steps=rows, split=split,
        recorded=rec.run, replayed=run, writes=sorted(writes, key=lambda w: w.step),
        refused=refused,
        not_recorded=[{"step": s, "tool": t, "args": a} for s, t, a in box.unrecorded],
        seconds=time.perf_counter() - started)


def _args_at(actions: list[dict[str, Any]], step: int, tool: str) -> dict[str, Any]:
    """The arguments of the ``step``-th action (assistant message), when it called
    ``tool`` (``advance`` for an event)."""
    if 0 < step <= len(actions) and actions[step - 1].get("tool") == tool:
        return dict(actions[step - 1].get("args") or {})
    return {}


async def replay_async(spec: WorkflowSpec, store: Any, run_id: str,
                       policy: Callable[[Any], Any], *, policy_name: str = "",
                       from_step: int = 0, live_reads: Resources | None = None,
                       clock: Any = time.time) -> ReplayReport:
    """:func:`replay` from an event loop, with a policy that may be ``async def``.

    The sandbox runs in one thread of its own; each of the policy's answers is awaited
    on the caller's loop, so an async model client (its connection pool, its limits)
    serves the replay as it serves live runs."""
    loop = asyncio.get_running_loop()

    def asked(view: Any) -> Any:
        raw = policy(view)
        if inspect.isawaitable(raw):
            return asyncio.run_coroutine_threadsafe(_awaited(raw), loop).result()
        return raw

    return await asyncio.to_thread(replay, spec, store, run_id, asked,
                                   policy_name=policy_name, from_step=from_step,
                                   live_reads=live_reads, clock=clock)


async def _awaited(raw: Any) -> Any:
    return await raw
