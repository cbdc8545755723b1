"""τ²-bench's retail tasks with models: the desk played by a model, and the customer too.

As in τ²-bench, the customer is a second model given the task's user instructions (why
they call, what they know and do not know, how to behave); it ends the conversation by
writing ``###STOP###`` (or ``###TRANSFER###`` once handed to a person). The desk is any
policy, normally :class:`~fsm.adapters.openai.OpenAIPolicy` against an OpenAI-compatible
server. A trial succeeds when the final database has the expected hash; :func:`pass_hat_k`
is τ²-bench's pass^k over the trials of each task.

Only the project's fake OpenAI-compatible server (``tests/support/fake_openai.py``) tests
this module; results against real models are whatever those models do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import openai

from fsm import Budgets, Engine
from fsm.policy import Policy
from workflows.retail.replay import expected_hash
from workflows.retail.runner import Bench, refusals

#: What the customer says to end the conversation (τ²-bench's tokens).
STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
#: The desk's first words, as in τ²-bench; the customer answers them with its request.
GREETING = "Hi! How can I help you today?"

_GUIDE = (
    "You play a customer contacting an online retail store's customer service, to test its "
    "agent. Stay in character and follow the instructions below. Say one thing at a time, "
    "as a customer would, and do not give away information the instructions do not give "
    "you. Never invent ids, emails or names you were not given. When your request is "
    "resolved, or cannot be, write only ###STOP###. If you are transferred to a human "
    "agent, write only ###TRANSFER###."
)


def instructions(task: Mapping[str, Any]) -> str:
    """The task's user scenario as the customer model's system prompt."""
    scenario = task["user_scenario"]["instructions"]
    parts = [_GUIDE, ""]
    for key, title in (("reason_for_call", "Why you call"), ("known_info", "What you know"),
                       ("unknown_info", "What you do not know"),
                       ("task_instructions", "How you behave")):
        if scenario.get(key):
            parts.append(f"{title}: {scenario[key]}")
    return "\n".join(parts)


class ModelCustomer:
    """The customer as a chat model: ``customer(request) -> reply`` for the engine's
    :func:`~fsm.testing.talk`; ``opening()`` is its first message. ``stopped`` is set
    once it has written one of :data:`STOP_TOKENS` (it then has nothing more to say)."""

    def __init__(self, task: Mapping[str, Any], model: str, *, base_url: str,
                 api_key: str = "none", timeout: float = 120.0,
                 options: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout,
                                    max_retries=2)
        self.options = dict(options or {})
        # From the customer model's side the desk is the "user" and it is the "assistant".
        self.messages: list[dict[str, str]] = [{"role": "system",
                                                "content": instructions(task)}]
        self.stopped: str | None = None

    def _say(self, heard: str) -> str:
        self.messages.append({"role": "user", "content": heard})
        reply = self.client.chat.completions.create(model=self.model, messages=self.messages,  # type: ignore[arg-type]
                                                    **self.options)
        text = (reply.choices[0].message.content or "").strip()
        self.messages.append({"role": "assistant", "content": text})
        token = next((t for t in STOP_TOKENS if t in text), None)
        if token is not None:
            self.stopped = token
        return text

    def opening(self) -> str:
        return self._say(GREETING) or "Hello"

    def __call__(self, request: Any) -> str:
        message = str(getattr(request, "message", "") or "")
        proposal = dict(getattr(request, "args", {}) or {})
        if proposal:
            message += (f"\n\n[The agent asks you to confirm: {proposal.get('tool')} with "
                        f"{proposal.get('args')}. Answer yes only if that is what you want.]")
        return self._say(message.strip() or "(the agent says nothing)")


def pass_hat_k(successes: Mapping[str, Sequence[bool]], k: int) -> float:
    """τ²-bench's pass^k: for each task with c successes in n trials, C(c, k) / C(n, k),
    averaged over the tasks (tasks with fewer than k trials are left out)."""
    scores = [math.comb(sum(trials), k) / math.comb(len(trials), k)
              for trials in successes.values() if len(trials) >= k]
    return sum(scores) / len(scores) if scores else 0.0


def trial(bench: Bench, task: Mapping[str, Any], desk: Policy, customer: ModelCustomer, *,
          run_id: str, max_steps: int = 60, max_turns: int = 40) -> dict[str, Any]:
    """One conversation of ``desk`` with ``customer`` on a fresh database: whether it
    ended with the expected database, and what the desk had refused."""
    bench.reset()
    started = time.perf_counter()
    opening = customer.opening()
    with Engine(bench.spec, bench.store, desk, resources=bench.resources) as engine:
        run = engine.start_conversation(opening, user="customer", run_id=run_id,
                                        budgets=Budgets(max_steps=max_steps)).run
        for _ in range(max_turns):
            if run.status != "awaiting_customer" or customer.stopped:
                break
            said = customer(run.pending)
            if customer.stopped:
                break
            run = engine.reply(run.run_id, said)
    log = refusals(bench.store.events(run.run_id))
    return {"task": str(task["id"]), "run": run.run_id, "success": bench.db.hash() ==
            expected_hash(task), "status": run.status, "state": run.state, "steps": run.step,
            "ended_by": customer.stopped or run.status,
            "refusals": [r.reason for r in log if r.source not in ("tool", "repeat")],
            "seconds": round(time.perf_counter() - started, 2)}


def trials(bench: Bench, tasks: Sequence[Mapping[str, Any]], desk: Callable[[], Policy],
           customer: Callable[[Mapping[str, Any]], ModelCustomer], n: int
           ) -> dict[str, Any]:
    """``n`` trials of every task; pass^k for k = 1..n and every trial's row."""
    rows = [trial(bench, t, desk(), customer(t), run_id=f"model-{t['id']}-{i}")
            for t in tasks for i in range(n)]
    successes: dict[str, list[bool]] = {}
    for row in rows:
        successes.setdefault(row["task"], []).append(row["success"])
    return {"trials": n, "pass_hat_k": {k: round(pass_hat_k(successes, k), 4)
                                        for k in range(1, n + 1)},
            "refused_attempts": sum(len(r["refusals"]) for r in rows), "rows": rows}
