"""StepBuilder: collects what one step writes, then commits it in one transaction."""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from fsm.policy import Action, Usage
from fsm.records import Approval, Event, RunState, StepCommit, ViewRecord

if TYPE_CHECKING:
    from fsm.runtime.engine import Engine
    from fsm.runtime.gate import Refuse


class StepBuilder:
    def __init__(self, engine: Engine, run: RunState, *, step: int,
                 started: float | None = None) -> None:
        self.engine = engine
        self.run = run
        self.step = step
        self.expected_version = run.version
        self.started = started if started is not None else time.monotonic()
        self.messages: list[dict[str, Any]] = []
        self.events: list[Event] = []
        self.view: ViewRecord | None = None
        self.effects_done: dict[str, tuple[Any, str | None]] = {}
        self.new_approval: Approval | None = None
        self.decision: tuple[str, str, str | None, str | None, float] | None = None
        self.artifacts: dict[str, str] = {}
        self._cost = 0
        self._tokens = 0

    # -- state --------------------------------------------------------------------

    def set(self, **changes: Any) -> None:
        self.run = self.run.model_copy(update=changes)

    def key(self) -> str:
        return f"{self.run.run_id}:{self.step}"

    def spend(self, usage: Usage, *, policy_call: bool, uses_step: bool = True) -> None:
        used = self.run.used.model_copy(update={
            "steps": self.run.used.steps + (1 if policy_call and uses_step else 0),
            "input_tokens": self.run.used.input_tokens + usage.input_tokens,
            "output_tokens": self.run.used.output_tokens + usage.output_tokens,
            "cost_micros": self.run.used.cost_micros + usage.cost_micros,
        })
        self.set(used=used)
        self._cost += usage.cost_micros
        self._tokens += usage.input_tokens + usage.output_tokens
        if policy_call:
            self.event("policy", cost_micros=usage.cost_micros,
                       tokens=usage.input_tokens + usage.output_tokens,
                       detail={"input_tokens": usage.input_tokens,
                               "output_tokens": usage.output_tokens, "calls": usage.calls,
                               **({} if uses_step else {"step_used": False})})

    def stop(self, status: str, reason: str | None) -> None:
        self.set(status=status, reason=reason)
        self.event("stop", reason=reason, detail={"status": status})

    # -- transcript ---------------------------------------------------------------

    def message(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)
        cached = self.engine._transcript.get(self.run.run_id)
        if cached is not None:
            cached.append(msg)

    def assistant(self, action: Action) -> None:
        if action.final is not None:
            self.message({"role": "assistant", "final": action.final})
        elif action.tool is not None:
            msg: dict[str, Any] = {"role": "assistant", "tool": action.tool, "args": action.args}
            if action.text:
                msg["text"] = action.text
            self.message(msg)
        else:
            self.message({"role": "assistant", "content": action.text or ""})

    def tool_result(self, tool: str, *, result: Any = None, error: str | None = None) -> None:
        if error is not None:
            self.message({"role": "tool", "tool": tool, "error": error})
        else:
            self.message({"role": "tool", "tool": tool, "result": self._cap(result)})

    def replace_last_result(self, tool: str, *, result: Any = None,
                            error: str | None = None) -> None:
        """Rewrite this step's pending result for ``tool`` (used by ``advance``)."""
        for msg in reversed(self.messages):
            if msg.get("role") == "tool" and msg.get("tool") == tool:
                msg.pop("result", None)
                msg.pop("error", None)
                if error is not None:
                    msg["error"] = error
                else:
                    msg["result"] = result
                return

    def refuse(self, refusal: Refuse) -> None:
        if refusal.tool is not None:
            self.message({"role": "tool", "tool": refusal.tool, "error": refusal.reason})
        else:
            self.message({"role": "user", "content": refusal.reason, "runtime": True})
        self.event("refusal", tool=refusal.tool, event=refusal.event, reason=refusal.reason)
        if refusal.fail is not None:
            self.stop("failed", refusal.fail)

    def _cap(self, result: Any) -> Any:
        text = json.dumps(result, ensure_ascii=False, sort_keys=True, default=str)
        cap = self.engine.result_cap
        if len(text) <= cap:
            return result
        sha = hashlib.sha256(text.encode()).hexdigest()
        self.artifacts[sha] = text
        return {"excerpt": text[:cap], "artifact": f"artifact:{sha}", "chars": len(text)}

    # -- log ----------------------------------------------------------------------

    def event(self, kind: str, **fields: Any) -> None:
        fields.setdefault("state_before", self.run.state)
        fields.setdefault("state_after", self.run.state)
        self.events.append(Event(run_id=self.run.run_id, step=self.step,
                                 time=self.engine.clock(), kind=kind, **fields))

    # -- commit -------------------------------------------------------------------

    def commit(self, *, initial: bool = False) -> StepCommit:
        now = self.engine.clock()
        elapsed = 0.0 if initial else time.monotonic() - self.started
        used = self.run.used.model_copy(
            update={"active_seconds": self.run.used.active_seconds + elapsed}
        )
        self.set(step=max(self.run.step, self.step), used=used, updated_at=now,
                 message_count=self.run.message_count + len(self.messages))
        return StepCommit(
            run=self.run, expected_version=self.expected_version, messages=self.messages,
            view=self.view, events=self.events, effects_done=self.effects_done,
            new_approval=self.new_approval, decision=self.decision, artifacts=self.artifacts,
        )

    def save(self) -> RunState:
        from fsm.faults import fault

        try:
            run = self.engine.store.commit(self.commit())
        except Exception:
            # The step did not land: forget its messages from the cached transcript.
            self.engine._transcript.pop(self.run.run_id, None)
            raise
        fault("after_commit", self.step)
        return run
