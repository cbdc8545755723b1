"""The agent-loop workload (``workload.py``) on Apache Burr; run by ``peers.py`` in its own
virtual environment (``apache-burr``).

A round is one run of the action ``step`` (declared to read and write ``messages`` and
``round``): it asks the scripted policy (``fetch(i)``), calls the tool and appends the
two new chat messages (plain dicts) to ``messages``; a transition loops back to
``step`` while ``round < N``, then goes to ``done`` (which ends the run, not timed).
The application has a ``SQLitePersister`` as its state persister, on a connection with
WAL and ``synchronous=FULL``: after every action Burr inserts the whole state as JSON
and commits — one commit per round.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import workload
from burr.core import ApplicationBuilder, State, action, default, expr
from burr.core.persistence import SQLitePersister


def build(rounds: int, decisions: workload.Decisions, persister: SQLitePersister) -> Any:
    @action(reads=["messages", "round"], writes=["messages", "round"])
    def step(state: State) -> State:
        i = state["round"] + 1
        call = decisions.decide(i)
        result = workload.fetch(**call["args"])
        return state.extend(messages=[workload.assistant_message(call),
                                      workload.tool_message(call, result)]).update(round=i)

    @action(reads=[], writes=[])
    def done(state: State) -> State:
        return state

    return (
        ApplicationBuilder()
        .with_actions(step=step, done=done)
        .with_transitions(("step", "step", expr(f"round < {rounds}")), ("step", "done", default))
        .with_state(messages=[{"role": "user", "content": "go"}], round=0)
        .with_entrypoint("step")
        .with_identifiers(app_id="bench")
        .with_state_persister(persister)
        .build()
    )


def run(path: Path, rounds: int, synchronous: str, decisions: workload.Decisions) -> None:
    persister = SQLitePersister(str(path), connection=workload.connect(path, synchronous))
    try:
        persister.initialize()
        app = build(rounds, decisions, persister)
        app.run(halt_after=["done"])
        assert app.state["round"] == rounds and len(app.state["messages"]) == 2 * rounds + 1
    finally:
        persister.cleanup()


if __name__ == "__main__":
    sys.exit(workload.main(run, "burr"))
