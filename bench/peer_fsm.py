"""The agent-loop workload (``workload.py``) on fsm; run by ``peers.py``.

A round is one engine step of a one-state workflow: check the budgets, build the view
(transcript and tools of the state), ask the scripted policy (``fetch(i)``), gate the
call (tool allowed in the state, arguments validated by pydantic, repeat check), run
the tool, then commit the step in one SQLite transaction (run snapshot, the two new
messages, the view record, the hash-chained events) with WAL and ``synchronous=FULL``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import workload
from steps import loop_spec

from fsm import Action, Budgets, Engine, SQLiteStore, View


def run(path: Path, rounds: int, synchronous: str, decisions: workload.Decisions) -> None:
    store = SQLiteStore(str(path), synchronous=synchronous)

    def policy(view: View) -> Action:
        call = decisions.decide(view.step)
        return Action(tool=call["name"], args=call["args"])

    try:
        engine = Engine(loop_spec(), store, policy, budgets=Budgets(max_steps=rounds),
                        max_repeats=None)
        run = engine.start("go", run_id="bench")
        assert run.status == "budget_exhausted" and run.used.steps == rounds, run
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(workload.main(run, "fsm"))
